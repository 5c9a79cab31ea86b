--[[
  retryKeyBlock: a record goes to a retry topic: its key is blocked behind it (the record joins the
  key's list unless it is in it already). Written before the record is produced (Redis, then produce,
  then commit): a crash in between leaves the record at the head, and its redelivery runs it.

  KEYS[1]  the caller's epoch counter
  KEYS[2]  the key's list                 rf:{<name>:<input>:<partition>}:rkey:<key>
  ARGV[1]  the caller's epoch
  ARGV[2]  the record's main-topic offset
  ARGV[3]  how long the list is kept, in milliseconds
  Returns  1 written, -1 fenced (nothing written)
]]
local stored = tonumber(redis.call('GET', KEYS[1]) or '0')
if stored > tonumber(ARGV[1]) then return -1 end
if not redis.call('LPOS', KEYS[2], ARGV[2]) then redis.call('RPUSH', KEYS[2], ARGV[2]) end
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return 1
