--[[
  idemClaim: claims an idempotency key for one request, or says why it cannot. Atomic, so of any number
  of concurrent requests with one key exactly one gets 'claimed'.

  KEYS[1]  record hash   <base>:r   fields s ('f' in flight | 'd' done), h (fingerprint hash),
                                    o (the claiming request's token), d (the stored response)
  ARGV[1]  fingerprint   hash of the request's fingerprint
  ARGV[2]  inFlightTtlMs how long an unfinished claim holds the key
  ARGV[3]  token         random, one per request
  Returns  { 'claimed' }          new claim (the hash expires after inFlightTtlMs unless completed);
           { 'mismatch' }         the key is held with another fingerprint;
           { 'done', response }   the stored response;
           { 'inflight' }         another request holds the claim.
           A second run by the same request (same token) answers { 'claimed' } again, so retrying
           a call whose reply was lost is safe.
]]
local s = redis.call('HMGET', KEYS[1], 's', 'h', 'o', 'd')
if not s[1] then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 's', 'f', 'h', ARGV[1], 'o', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return { 'claimed' }
end
if s[2] ~= ARGV[1] then return { 'mismatch' } end
if s[1] == 'd' then return { 'done', s[4] } end
if s[3] == ARGV[3] then return { 'claimed' } end
return { 'inflight' }
