--[[
  applyRecords (cluster fencing): apply every record of one key from one partition batch.
  Touches one hash slot only, so it runs on Redis Cluster. Zombies are fenced by the epoch of the
  key's last writer, kept in the state hash.

  KEYS[1]  the key's state hash            rf:{<store>:<key>}
  ARGV     protocol, partition, caller epoch, watermark, ttl ms, n, then 6 per record
           (offset, op, arg1, arg2, output mode, output bytes) -- see includes/applyCore.lua
  Returns  3 entries per record: verdict letter, number, payload -- see includes/applyCore.lua
]]
--@include "applyCore"
return rf_apply(KEYS[1], nil, ARGV)
