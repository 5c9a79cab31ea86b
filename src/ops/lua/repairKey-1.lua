--[[
  repairKey: rewrites (or deletes) one state key found drifted by `redfence reconcile --repair`, only
  if the key is still exactly as reconcile read it, so a processor writing it meanwhile is never
  overwritten (reconcile reports the key as changed and leaves it).

  KEYS[1]  the state hash rf:[t=<tenant>:]{<store>:<key>}
  ARGV[1]  what reconcile read: '-' (no state), or '<partition>:<offset>:<epoch>' (fields p, o, e)
  ARGV[2]  SHA-1 hex of the value read, or '-' when it had none (no field v)
  ARGV[3]  'del': delete the key; 'set': replace the whole hash (pending entries dropped, field g, the
           generation, one higher than before, so an owner's compare-and-set with a token it read
           before the repair answers CONFLICT and reads again) with
  ARGV[4]  partition, ARGV[5] offset, ARGV[6] epoch (the partition's current epoch),
  ARGV[7]  '1' with a value in ARGV[8], '0' without (tombstone)
  Returns  1 rewritten; 0 the key changed since it was read (nothing written).
]]
local key = KEYS[1]
local read
if redis.call('EXISTS', key) == 0 then
  read = '-'
else
  local f = redis.call('HMGET', key, 'p', 'o', 'e')
  read = tostring(f[1]) .. ':' .. tostring(f[2]) .. ':' .. tostring(f[3] or '0')
end
if read ~= ARGV[1] then return 0 end
if read ~= '-' then
  local v = redis.call('HGET', key, 'v')
  local sha = v and redis.sha1hex(v) or '-'
  if sha ~= ARGV[2] then return 0 end
end
-- the generation: a token an owner read (or cached) before this write never matches after it
local g = (tonumber(redis.call('HGET', key, 'g') or '0') or 0) + 1
redis.call('DEL', key)
if ARGV[3] == 'set' then
  redis.call('HSET', key, 'p', ARGV[4], 'o', ARGV[5], 'e', ARGV[6], 'g', string.format('%d', g))
  if ARGV[7] == '1' then redis.call('HSET', key, 'v', ARGV[8]) end
end
return 1
