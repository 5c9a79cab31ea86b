--[[
  cacheRelease: a loader that failed gives its lease back so a waiter can load at once.

  KEYS[1]  load lease    <base>:lease
  ARGV[1]  token         the lease token
  ARGV[2]  channel       pub/sub channel of the entry's waiters
  Returns  1 released; 0 the lease was not this token's (nothing done). Safe to run twice.
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], 'r')
return 1
