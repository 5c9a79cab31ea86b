--[[
  prunePending: drop a key's pending entries that its partition's committed offset has passed.
  Used by the sweeper for keys that are not written again (writes prune on their own).

  KEYS[1]  the key's state hash            rf:{<store>:<key>}
  ARGV[1]  partition
  ARGV[2]  watermark: the partition's committed offset; entries with offset < watermark go
  Returns  the number of pending entries removed
]]
local partition = ARGV[1]
local watermark = tonumber(ARGV[2])
if not watermark then
  return redis.error_reply('RF_ARGS watermark is not a number')
end
if redis.call('HGET', KEYS[1], 'p') ~= partition then
  return 0
end
local prune = {}
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.byte(f, 1) == 35 and tonumber(string.sub(f, 2)) < watermark then
    prune[#prune + 1] = f
  end
end
if #prune > 0 then
  redis.call('HDEL', KEYS[1], unpack(prune))
end
return #prune
