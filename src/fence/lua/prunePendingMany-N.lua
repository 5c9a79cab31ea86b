--[[
  prunePendingMany: prunePending for many keys of one partition in one call (the sweeper's batches).
  On Redis Cluster every key must hash to the same slot (the client groups keys by slot).

  KEYS     the keys' state hashes                  rf:{<store>:<key>} ...
  ARGV[1]  partition
  ARGV[2]  watermark: the partition's committed offset; entries with offset < watermark go
  Returns  the number of pending entries removed, over all keys
]]
local partition = ARGV[1]
local watermark = tonumber(ARGV[2])
if not watermark then
  return redis.error_reply('RF_ARGS watermark is not a number')
end
local removed = 0
for _, key in ipairs(KEYS) do
  if redis.call('HGET', key, 'p') == partition then
    local prune = {}
    for _, f in ipairs(redis.call('HKEYS', key)) do
      if string.byte(f, 1) == 35 and tonumber(string.sub(f, 2)) < watermark then
        prune[#prune + 1] = f
      end
    end
    if #prune > 0 then
      redis.call('HDEL', key, unpack(prune))
      removed = removed + #prune
    end
  end
end
return removed
