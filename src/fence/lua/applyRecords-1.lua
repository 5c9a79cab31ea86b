--[[
  applyRecords (cluster fencing): apply every record of one key from one partition batch.
  Touches one hash slot only, so it runs on Redis Cluster. Zombies are fenced by the epoch of the
  key's last writer, kept in the state hash.

  KEYS[1]  the key's state hash            rf:{<store>:<key>}
  ARGV     protocol, partition, caller epoch, watermark, ttl ms, '0' (no index here: the client adds
           the key to the pending index itself, another slot), n, then the n records
           -- see includes/applyCore.lua
  Returns  the key's reply: verdict letters, number, previous partition, payloads
           -- see includes/applyCore.lua
]]
--@include "applyCore"
return rf_apply_one(KEYS[1], nil, nil, ARGV)
