--[[
  cacheInvalidateMany: cacheInvalidate (src/kit/cache/lua/cacheInvalidate-2.lua) for several entries in
  one call, on a standalone Redis (on a Cluster each entry is its own slot: cacheInvalidate runs per
  entry). Each entry is dropped and its generation moved, so a load that took its lease before this
  call cannot write its (older) value afterwards. The caller keeps calls small (at most 100 entries),
  so one call never holds the server for long.

  KEYS[2i-1]  entry hash    <base>:v   of entry i
  KEYS[2i]    generation    <base>:g   of entry i
  ARGV[1]     generationTtlMs  how long each generation is kept (longer than any lease)
  Returns     the number of entries. Idempotent in effect, like cacheInvalidate.
]]
if #KEYS % 2 ~= 0 then return redis.error_reply('RF_ARGS cacheInvalidateMany takes pairs of keys') end
for i = 1, #KEYS, 2 do
  redis.call('DEL', KEYS[i])
  redis.call('INCR', KEYS[i + 1])
  redis.call('PEXPIRE', KEYS[i + 1], ARGV[1])
end
return #KEYS / 2
