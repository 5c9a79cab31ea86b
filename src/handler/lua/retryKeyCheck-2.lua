--[[
  retryKeyCheck: may a record of a key run now, with per-key order kept across the retry topics?
  The key's list holds the main-topic offsets of its records in the retry chain, oldest first; only
  the head runs, the others are parked behind it. Fenced by the caller's epoch (a main-topic
  partition's epoch, or a retry-topic partition's one kept in the same slot).

  KEYS[1]  the caller's epoch counter     rf:{<name>:<input>:<partition>}:epoch (or :repoch:<retry topic>)
  KEYS[2]  the key's list                 rf:{<name>:<input>:<partition>}:rkey:<key>
  ARGV[1]  the caller's epoch
  ARGV[2]  the record's main-topic offset
  ARGV[3]  '1': join the list when the key is blocked and the record is not in it (a main-topic record)
  ARGV[4]  how long the list is kept, in milliseconds
  Returns  0 free (no list, or not in it), 1 the head, 2 behind the head (park it), -1 fenced
]]
local stored = tonumber(redis.call('GET', KEYS[1]) or '0')
if stored > tonumber(ARGV[1]) then return -1 end
local head = redis.call('LINDEX', KEYS[2], 0)
if not head then return 0 end
if head == ARGV[2] then return 1 end
if redis.call('LPOS', KEYS[2], ARGV[2]) then return 2 end
if ARGV[3] == '1' then
  redis.call('RPUSH', KEYS[2], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  return 2
end
return 0
