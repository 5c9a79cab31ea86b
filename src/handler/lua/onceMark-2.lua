--[[
  onceMark: marks an idempotency id done after its work succeeded, only if the caller still owns the
  partition (a zombie's mark would make the new owner skip work whose outcome nobody committed).
  The check and the write are one script: no newer owner can take the partition in between.

  KEYS[1]  the partition's epoch counter   rf:{<name>:<topic>:<partition>}:epoch
  KEYS[2]  the id's done marker           rf:{<name>:<topic>:<partition>}:once:<id>
  ARGV[1]  the caller's epoch
  ARGV[2]  how long the marker is kept, in milliseconds
  Returns  1 marked, -1 fenced (nothing written)
]]
local stored = tonumber(redis.call('GET', KEYS[1]) or '0')
if stored > tonumber(ARGV[1]) then return -1 end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return 1
