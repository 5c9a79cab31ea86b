--[[
  applyRecordsStrict (strict fencing, single Redis only): as applyRecords, and also fences every
  caller whose epoch is below the partition's current epoch, even on keys it never wrote; with the
  index flag '1' it adds the key to the partition's pending index in the same call.
  Its keys live in different hash slots: Redis Cluster rejects it (use applyRecords there).

  KEYS[1]  the key's state hash            rf:{<store>:<key>}
  KEYS[2]  the partition's epoch counter   rf:{<store>:<topic>:<partition>}:epoch
  KEYS[3]  the partition's pending index   rf:{<store>:<topic>:<partition>}:pending
  ARGV     as applyRecords, with the index flag -- see includes/applyCore.lua
  Returns  as applyRecords
]]
--@include "applyCore"
return rf_apply_one(KEYS[1], KEYS[2], KEYS[3], ARGV)
