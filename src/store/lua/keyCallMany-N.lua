--[[
  keyCallMany: several key calls of one partition batch in one script call, for a single Redis (their
  fence keys are in different slots, so never on Redis Cluster). Each call is decided and made exactly
  as keyCall-N.lua makes one (the same body: includes/keyCallCore.lua); every call is parsed and
  checked before anything is read or written.

  KEYS[1]    the first call's fence hash; KEYS[2..] its window and session keys, then each next call's
             fence hash and its keys, call after call
  ARGV[1]    protocol version, must be 'm3'
  ARGV[2]    partition of every record
  ARGV[3]    caller epoch (the partition epoch the caller acquired)
  ARGV[4]    committed offset of the partition, -1 when unknown
  ARGV[5]    the number of calls n (>= 1)
  ARGV[6..]  per call: the number of its KEYS, its expected token (as keyCall's ARGV[5]), its record text
             (as keyCall's ARGV[6]; KEYS indexes in it count from the call's fence hash as 1), then the
             values of its set effects
  Returns    one keyCall reply per call, in order
  Errors: 'RF_PROTOCOL ...' or 'RF_ARGS call <i>: ...' on malformed arguments (nothing read or written).
]]
--@include "keyCallCore"

if ARGV[1] ~= 'm3' then
  return rf_err('RF_PROTOCOL', 'expected protocol m3, got ' .. tostring(ARGV[1]))
end
local partition = ARGV[2]
local epoch = tonumber(ARGV[3])
local watermark = tonumber(ARGV[4])
local n = tonumber(ARGV[5])
if not (tonumber(partition) and epoch and watermark and n and n >= 1) then
  return rf_err('RF_ARGS', 'malformed key calls arguments')
end
local callK1, callR1, callR2, callExpect = {}, {}, {}, {}
local a, k = 6, 1
for i = 1, n do
  local na = ARGV[a]
  local nk = na and NUM[na] -- (the same few counts in every call)
  if na and not nk then
    nk = tonumber(na)
    NUM[na] = nk
  end
  local expect, spec = ARGV[a + 1], ARGV[a + 2]
  if not (nk and nk >= 1 and expect and spec and k + nk - 1 <= #KEYS) then
    return rf_err('RF_ARGS', 'call ' .. i .. ': malformed arguments')
  end
  local r1, r2, nextArg = rf_parse(i, k, k + nk - 1, spec, a + 3)
  if not r1 then
    return r2
  end
  callK1[i], callR1[i], callR2[i], callExpect[i] = k, r1, r2, expect
  a = nextArg
  k = k + nk
end
if a ~= #ARGV + 1 or k ~= #KEYS + 1 then
  return rf_err('RF_ARGS', 'malformed key calls arguments')
end
local replies = {}
for i = 1, n do
  replies[i] = rf_run(callK1[i], callR1[i], callR2[i], partition, epoch, watermark, callExpect[i])
end
return replies
