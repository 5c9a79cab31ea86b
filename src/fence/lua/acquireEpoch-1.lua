--[[
  acquireEpoch: the new owner of a partition raises its epoch before processing any of its records.

  KEYS[1]  the partition's epoch counter   rf:{<store>:<topic>:<partition>}:epoch
  Returns  the new epoch (integer >= 1)
]]
return redis.call('INCR', KEYS[1])
