--[[
  projectionGet: reads a projection entry.

  KEYS[1]  entry hash   <base>:p
  Returns  { version, data, tombstone } or { nil } when absent.
]]
local e = redis.call('HMGET', KEYS[1], 'v', 'd', 't')
if not e[1] then return { false } end
return { e[1], e[2] or '', e[3] or '0' }
