--[[
  The fence as first sketched (seed 000, section 5): the key's last offset only, re-emit only when
  offset == lastOffset. The benchmark's naive contender runs it once per record (a copy of test/fence/fixtures/seed-sketch.lua).

  KEYS[1]  state hash (value, offset, partition)
  KEYS[2]  the partition's epoch counter
  ARGV[1]  partition, ARGV[2] offset, ARGV[3] caller epoch, ARGV[4] new value
  Returns  {'FENCE'} | {'APPLY'} | {'REBASE'} | {'APPLY', gap} | {'REEMIT', value} | {'SKIP'}
]]
local curEpoch = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[3]) < curEpoch then
  return {'FENCE'}
end
local lastOffset = redis.call('HGET', KEYS[1], 'offset')
local lastPartition = redis.call('HGET', KEYS[1], 'partition')
local offset = tonumber(ARGV[2])
if lastOffset == false then
  redis.call('HSET', KEYS[1], 'value', ARGV[4], 'offset', ARGV[2], 'partition', ARGV[1])
  return {'APPLY'}
end
if lastPartition ~= ARGV[1] then
  redis.call('HSET', KEYS[1], 'value', ARGV[4], 'offset', ARGV[2], 'partition', ARGV[1])
  return {'REBASE'}
end
lastOffset = tonumber(lastOffset)
if offset > lastOffset then
  redis.call('HSET', KEYS[1], 'value', ARGV[4], 'offset', ARGV[2])
  return {'APPLY', tostring(offset - lastOffset)}
elseif offset == lastOffset then
  return {'REEMIT', redis.call('HGET', KEYS[1], 'value')}
end
return {'SKIP'}
