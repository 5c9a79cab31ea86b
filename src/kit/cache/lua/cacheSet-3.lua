--[[
  cacheSet: the lease holder writes what it loaded, unless the entry was invalidated meanwhile.

  KEYS[1]  entry hash    <base>:v
  KEYS[2]  generation    <base>:g
  KEYS[3]  load lease    <base>:lease
  ARGV[1]  token         the lease token cacheGet took
  ARGV[2]  generation    the generation cacheGet returned with the lease
  ARGV[3]  data          the encoded value
  ARGV[4]  freshMs       fresh for this long (ttl + jitter)
  ARGV[5]  staleMs       then served stale for this long while one caller refreshes it
  ARGV[6]  loadMs        how long the load took (for early refresh)
  ARGV[7]  channel       pub/sub channel the waiters of this entry listen on
  ARGV[8]  checkGeneration  '1' (always, in the library; '0' only in the test that shows the race)
  Returns  1 written; 2 not written: the lease is no longer this token's (expired, another loader);
           3 not written: invalidated since the lease was taken (generation moved).
           Waiters are told on the channel in every case where the lease is released.
           A second run after a written reply answers 2 (lease gone) and writes nothing.
]]
--@include "nowMs"
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return 2 end
redis.call('DEL', KEYS[3])
if ARGV[8] == '1' and (redis.call('GET', KEYS[2]) or '0') ~= ARGV[2] then
  redis.call('PUBLISH', ARGV[7], 'g')
  return 3
end
local now = nowMs()
local fresh = tonumber(ARGV[4])
local stale = tonumber(ARGV[5])
redis.call('HSET', KEYS[1], 'd', ARGV[3], 'f', now + fresh, 's', now + fresh + stale, 'l', ARGV[6])
redis.call('PEXPIRE', KEYS[1], fresh + stale)
redis.call('PUBLISH', ARGV[7], 'w')
return 1
