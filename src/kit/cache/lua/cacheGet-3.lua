--[[
  cacheGet: reads one cache entry and, when the caller should load it, takes the load lease for it.

  KEYS[1]  entry hash         <base>:v   fields d (bytes), f (fresh until, ms), s (stale until, ms),
                                         l (how long its load took, ms)
  KEYS[2]  generation         <base>:g   INCR'd by every invalidation
  KEYS[3]  load lease         <base>:lease  the token of the one loader, PX leaseMs
  ARGV[1]  token              a random token for the lease
  ARGV[2]  leaseMs            how long the lease lasts (a loader that has not written by then lost it)
  ARGV[3]  early              a number >= 0 (XFetch: -ln(random) * beta, drawn by the caller); a fresh
                              entry is refreshed early when now + l * early >= f. 0: never early.
  Returns  { status, data or nil, leased (1/0), generation at lease time, lease PTTL (ms) }
           status 1 fresh; 2 stale (past f, before s); 3 miss; 4 fresh but due an early refresh.
           leased 1: this caller holds the lease (statuses 2, 3, 4); the generation is read in the same
           step, so a load that finishes after an invalidation cannot match it.
           A second run with the same token is harmless (SET NX fails; the lease is not ours twice).
]]
--@include "nowMs"
local now = nowMs()
local entry = redis.call('HMGET', KEYS[1], 'd', 'f', 's', 'l')
local status = 3
if entry[1] then
  local f = tonumber(entry[2])
  if now < f then
    status = 1
    local early = tonumber(ARGV[3])
    if early > 0 and now + tonumber(entry[4]) * early >= f then status = 4 end
  elseif now < tonumber(entry[3]) then
    status = 2
  else
    entry[1] = false
  end
end
if status == 1 then return { 1, entry[1], 0, 0, 0 } end
if redis.call('SET', KEYS[3], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return { status, entry[1], 1, tonumber(redis.call('GET', KEYS[2]) or '0'), 0 }
end
if redis.call('GET', KEYS[3]) == ARGV[1] then
  return { status, entry[1], 1, tonumber(redis.call('GET', KEYS[2]) or '0'), 0 }
end
return { status, entry[1], 0, 0, redis.call('PTTL', KEYS[3]) }
