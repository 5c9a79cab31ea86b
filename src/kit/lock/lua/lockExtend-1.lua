--[[
  lockExtend: pushes the lock's expiry out, only for the token that holds it.

  KEYS[1]  owner    <base>:owner
  ARGV[1]  token
  ARGV[2]  ttlMs    the new time to live from now
  Returns  1 extended; 0 not this token's (expired, or taken by another). Safe to run twice.
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
