--[[
  lockRelease: deletes the lock, only for the token that holds it (never another owner's lock).

  KEYS[1]  owner    <base>:owner
  ARGV[1]  token
  Returns  1 released; 0 not this token's (it expired, maybe taken by another). A second run answers 0.
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
