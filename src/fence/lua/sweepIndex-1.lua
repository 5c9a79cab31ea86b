--[[
  sweepIndex: remove swept members from a partition's pending index, but only those whose score
  (highest pending offset) is still below the watermark: a member re-added by a newer write keeps
  its place.

  KEYS[1]  the partition's pending index   rf:{<store>:<topic>:<partition>}:pending
  ARGV[1]  watermark: the partition's committed offset
  ARGV[2..] members (state key names) that were pruned
  Returns  the number of members removed
]]
local watermark = tonumber(ARGV[1])
if not watermark then
  return redis.error_reply('RF_ARGS watermark is not a number')
end
local removed = 0
for i = 2, #ARGV do
  local score = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[i]))
  if score and score < watermark then
    removed = removed + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return removed
