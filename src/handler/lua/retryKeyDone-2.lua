--[[
  retryKeyDone: a record of the retry chain finished (handled, dead-lettered or dropped): it leaves
  the key's list, so the next record of the key becomes the head (an empty list is gone: the key is
  free).

  KEYS[1]  the caller's epoch counter
  KEYS[2]  the key's list                 rf:{<name>:<input>:<partition>}:rkey:<key>
  ARGV[1]  the caller's epoch
  ARGV[2]  the record's main-topic offset
  Returns  1 done, -1 fenced (nothing written)
]]
local stored = tonumber(redis.call('GET', KEYS[1]) or '0')
if stored > tonumber(ARGV[1]) then return -1 end
redis.call('LREM', KEYS[2], 1, ARGV[2])
return 1
