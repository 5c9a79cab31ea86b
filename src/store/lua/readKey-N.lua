--[[
  readKey: one consistent read of a fence key's stores (queryable state, docs/architecture.md "The
  store interface"): the key's fence stamp and the values asked for, all read in one script so the
  values are exactly those the stamp's record left. Read-only; every key is in the fence key's slot
  {<app>:<key>}, so it runs on Redis Cluster.

  KEYS[1]    the fence hash rf:{<app>:<key>}: p partition, o offset, e writer epoch, g generation (bumped
             by writers outside the owner), v / v:<store> values
  KEYS[2..]  window keys rf:{<app>:<key>}:w:<store>:<start>, then window hashes
             rf:{<app>:<key>}:h:<store> and session hashes rf:{<app>:<key>}:s:<store> (each must start
             with KEYS[1] .. ':w:', ':h:' or ':s:', the window keys first)
  ARGV[1]    protocol version, must be 'r1'
  ARGV[2..]  the fence hash's fields to read: 'v' (store 0), 'v:<store>', or '#<offset>' (a pending entry)
  Returns    {p, o, e, g, value per ARGV[2..], then per window key its value, final marker and time field
             (v, f, t), then per
             window or session hash its fields and values (HGETALL)} (absent: nil)
  Errors: 'RF_PROTOCOL ...' or 'RF_ARGS ...' on malformed arguments.
]]
if ARGV[1] ~= 'r1' then
  return redis.error_reply('RF_PROTOCOL readKey expects protocol r1')
end
local window, hash, session = KEYS[1] .. ':w:', KEYS[1] .. ':h:', KEYS[1] .. ':s:'
local whole = false
for i = 2, #KEYS do
  local head = string.sub(KEYS[i], 1, #window)
  if head == hash or head == session then
    whole = true
  elseif head ~= window or whole then
    return redis.error_reply('RF_ARGS KEYS[' .. i .. '] is not a window key of KEYS[1]')
  end
end
local fields = { 'p', 'o', 'e', 'g' }
for i = 2, #ARGV do
  local f = ARGV[i]
  if not (f == 'v' or string.find(f, '^v:%d+$') or string.find(f, '^#%d+$')) then
    return redis.error_reply('RF_ARGS ARGV[' .. i .. '] is not a value field')
  end
  fields[#fields + 1] = f
end
local reply = redis.call('HMGET', KEYS[1], unpack(fields))
for i = 2, #KEYS do
  if string.sub(KEYS[i], 1, #window) == window then
    local got = redis.call('HMGET', KEYS[i], 'v', 'f', 't')
    reply[#reply + 1] = got[1]
    reply[#reply + 1] = got[2]
    reply[#reply + 1] = got[3]
  else
    reply[#reply + 1] = redis.call('HGETALL', KEYS[i])
  end
end
return reply
