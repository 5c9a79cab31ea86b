--[[
  applyMany (cluster fencing): applyRecords for many keys of one partition batch in one call.
  On Redis Cluster every key must hash to the same slot (the client groups keys by slot).

  KEYS     the keys' state hashes                  rf:{<store>:<key>} ...
  ARGV     protocol, partition, caller epoch, watermark, ttl ms, '0' (no index here: the client adds
           the keys to the pending index itself, another slot), then per key: its record text and binary arguments
           -- see includes/applyCore.lua
  Returns  the applyRecords replies of the keys, in KEYS order, one after another in one flat list
]]
--@include "applyCore"
return rf_apply_many(KEYS, 1, #KEYS, nil, nil, ARGV)
