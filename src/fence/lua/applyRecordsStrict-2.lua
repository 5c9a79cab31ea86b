--[[
  applyRecordsStrict (strict fencing, single Redis only): as applyRecords, and also fences every
  caller whose epoch is below the partition's current epoch, even on keys it never wrote.
  Its two keys live in different hash slots: Redis Cluster rejects it (use applyRecords there).

  KEYS[1]  the key's state hash            rf:{<store>:<key>}
  KEYS[2]  the partition's epoch counter   rf:{<store>:<topic>:<partition>}:epoch
  ARGV     as applyRecords -- see includes/applyCore.lua
  Returns  as applyRecords
]]
--@include "applyCore"
return rf_apply(KEYS[1], KEYS[2], ARGV)
