--[[
  onceCheck: before a handler runs work under an idempotency id, is the id done already, and does
  the caller still own the partition?

  KEYS[1]  the partition's epoch counter   rf:{<name>:<topic>:<partition>}:epoch
  KEYS[2]  the id's done marker           rf:{<name>:<topic>:<partition>}:once:<id>
  ARGV[1]  the caller's epoch (taken when it was assigned the partition)
  Returns  -1 fenced (a newer owner raised the epoch), 1 done already, 0 not done
]]
local stored = tonumber(redis.call('GET', KEYS[1]) or '0')
if stored > tonumber(ARGV[1]) then return -1 end
if redis.call('EXISTS', KEYS[2]) == 1 then return 1 end
return 0
