--[[
  layout: an application's layout marker, and the probe that tells whether the application ran before
  (docs/architecture.md, "Redis layout"; src/store/layout.ts). One key per call: the marker and the
  partition epochs are in different slots.

  KEYS[1]    get / claim: the marker rf:[t=<tenant>:]{<app>}:layout, a hash: l the layout of the
             application's window keys; probe: a partition epoch key rf:[t=<tenant>:]{<app>:<topic>:<p>}:epoch
  ARGV[1]    'get', 'claim' or 'probe'
  ARGV[2]    claim: the layout this version writes, set when the marker holds none
  Returns    get / claim: the marker's layout (nil: none); probe: 1 when the key exists, else 0
  Errors: 'RF_ARGS ...' on another ARGV[1].
]]
local mode = ARGV[1]
if mode == 'probe' then
  if redis.call('GET', KEYS[1]) then
    return 1
  end
  return 0
end
if mode ~= 'get' and mode ~= 'claim' then
  return redis.error_reply('RF_ARGS layout expects get, claim or probe')
end
if mode == 'claim' and ARGV[2] and not redis.call('HGET', KEYS[1], 'l') then
  redis.call('HSET', KEYS[1], 'l', ARGV[2])
end
return redis.call('HGET', KEYS[1], 'l')
