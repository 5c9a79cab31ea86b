--[[
  idemRelease: gives up a claim that is still this request's and not done (its command failed, or the
  durable record said another request holds the key), so a retry can claim the key at once.

  KEYS[1]  record hash   <base>:r   (see idemClaim)
  ARGV[1]  token         the claiming request's token
  Returns  1 released; 0 not this request's claim (or done). Idempotent.
]]
local s = redis.call('HMGET', KEYS[1], 's', 'o')
if s[1] == 'f' and s[2] == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
