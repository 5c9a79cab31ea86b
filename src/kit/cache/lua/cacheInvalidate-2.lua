--[[
  cacheInvalidate: drops an entry and moves its generation, so a load that took its lease before this
  call cannot write its (older) value afterwards.

  KEYS[1]  entry hash    <base>:v
  KEYS[2]  generation    <base>:g
  ARGV[1]  generationTtlMs  how long the generation is kept (longer than any lease)
  Returns  the new generation. Idempotent in effect: a second run moves the generation again and
           deletes nothing more.
]]
redis.call('DEL', KEYS[1])
local g = redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return g
