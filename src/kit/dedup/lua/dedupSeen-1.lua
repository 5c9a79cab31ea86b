--[[
  dedupSeen: marks an id as seen for a window; answers whether it was already marked. A front filter:
  the mark is not atomic with the work it filters, and it is gone after the window or when Redis loses it.

  KEYS[1]  mark          <base>:m   holds the token of the sighting that set it
  ARGV[1]  windowMs      how long the mark lives
  ARGV[2]  token         random, one per sighting
  Returns  1 already seen (inside the window); 0 first sighting (now marked).
           A second run with the same token answers 0 again, so retrying a call whose reply was lost
           never turns a first sighting into a duplicate.
]]
if redis.call('SET', KEYS[1], ARGV[2], 'NX', 'PX', ARGV[1]) then return 0 end
if redis.call('GET', KEYS[1]) == ARGV[2] then return 0 end
return 1
