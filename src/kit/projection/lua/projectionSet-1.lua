--[[
  projectionSet: writes a projection entry only when the event's aggregate version is newer than the
  stored one. Versions arrive as 20-digit zero-padded decimals, so comparing the strings compares the
  numbers exactly (up to 2^64 - 1, past Lua's 2^53).

  KEYS[1]  entry hash   <base>:p   fields v (version), d (value), t ('1': a removal's tombstone)
  ARGV[1]  version      20 digits
  ARGV[2]  data         the encoded value ('' for a tombstone)
  ARGV[3]  ttlMs        time to live of the entry (with jitter already added)
  ARGV[4]  tombstone    '1': record a removal at this version (older updates stay refused)
  Returns  { 1, previous version or nil } written;
           { 0, 'older' | 'equal', stored version } refused (a stale or duplicate event).
           An entry without a version (not written by this script) counts as absent.
           Running it twice answers { 0, 'equal' } the second time: replays are harmless.
]]
local stored = redis.call('HGET', KEYS[1], 'v')
if stored and ARGV[1] <= stored then
  return { 0, ARGV[1] == stored and 'equal' or 'older', stored }
end
redis.call('DEL', KEYS[1])
if ARGV[4] == '1' then
  redis.call('HSET', KEYS[1], 'v', ARGV[1], 't', '1')
else
  redis.call('HSET', KEYS[1], 'v', ARGV[1], 'd', ARGV[2])
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return { 1, stored or false }
