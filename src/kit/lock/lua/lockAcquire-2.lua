--[[
  lockAcquire: takes the lock for a token and hands out the next fencing number.

  KEYS[1]  owner          <base>:owner   the holder's token, PX ttlMs
  KEYS[2]  fencing        <base>:fence   a counter that only grows (no TTL: it must never restart)
  ARGV[1]  token          the caller's random token
  ARGV[2]  ttlMs          how long the lock lasts unless extended
  Returns  { 1, fencing number } taken (or already this token's: a retried call gets the same number);
           { 0, PTTL of the holder's lock } held by another token.
]]
local owner = redis.call('GET', KEYS[1])
if owner == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return { 1, tonumber(redis.call('GET', KEYS[2])) }
end
if owner then return { 0, redis.call('PTTL', KEYS[1]) } end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return { 1, redis.call('INCR', KEYS[2]) }
