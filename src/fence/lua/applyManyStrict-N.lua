--[[
  applyManyStrict (strict fencing, single Redis only): applyRecordsStrict for many keys of one
  partition batch in one call, and the pending-index update in the same call.

  KEYS[1]  the partition's epoch counter          rf:{<store>:<topic>:<partition>}:epoch
  KEYS[2]  the partition's pending index           rf:{<store>:<topic>:<partition>}:pending
  KEYS[3..] the keys' state hashes                 rf:{<store>:<key>} ...
  ARGV     protocol, partition, caller epoch, watermark, ttl ms, index flag ('1': ZADD GT each key
           with a new pending output), then per key: its record text and binary arguments
           -- see includes/applyCore.lua
  Returns  the applyRecords replies of the state keys, in KEYS order, one after another in one flat list
]]
--@include "applyCore"
return rf_apply_many(KEYS, 3, #KEYS, KEYS[1], KEYS[2], ARGV)
