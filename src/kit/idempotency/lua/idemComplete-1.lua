--[[
  idemComplete: stores a request's response under its idempotency key, when the key is still this
  request's claim, absent (the claim expired or Redis lost it), or, with `force`, in flight under any
  token (the durable record in PostgreSQL already decided and is being copied here). A stored response
  is never replaced.

  KEYS[1]  record hash   <base>:r   (see idemClaim)
  ARGV[1]  fingerprint   hash of the request's fingerprint
  ARGV[2]  response      the encoded response
  ARGV[3]  ttlMs         how long the stored response is kept
  ARGV[4]  token         the claiming request's token
  ARGV[5]  force         '1': copy a decided response over any claim that is not done
  Returns  1 stored; 0 not stored (another request's claim, or a response already stored).
           Idempotent: a second run with the same response stores nothing new.
]]
local s = redis.call('HMGET', KEYS[1], 's', 'o')
if s[1] == 'd' then return 0 end
if s[1] and s[2] ~= ARGV[4] and ARGV[5] ~= '1' then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 's', 'd', 'h', ARGV[1], 'd', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
