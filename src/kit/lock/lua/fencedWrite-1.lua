--[[
  fencedWrite: the protected store's side of a fenced lock (a store in Redis): accepts a write only when
  its fencing number is not older than the newest it has accepted for that resource.

  KEYS[1]  resource hash   <base>:data   fields n (newest fencing number accepted), d (the value)
  ARGV[1]  fencing number  a positive integer below 2^53
  ARGV[2]  data            the value
  ARGV[3]  ttlMs           0: no TTL; else the resource's time to live
  Returns  { 1, n } written; { 0, newest } refused: a holder with a newer number has written.
           An equal number is the same holder writing again and is accepted.
]]
local newest = tonumber(redis.call('HGET', KEYS[1], 'n') or '0')
local n = tonumber(ARGV[1])
if n < newest then return { 0, newest } end
redis.call('HSET', KEYS[1], 'n', ARGV[1], 'd', ARGV[2])
if ARGV[3] ~= '0' then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return { 1, n }
