--[[
  fencedRead: reads a fenced store's resource.

  KEYS[1]  resource hash   <base>:data   fields n, d
  Returns  { n, d }, or { nil } when absent.
]]
local v = redis.call('HMGET', KEYS[1], 'n', 'd')
if not v[1] then return { false } end
return { tonumber(v[1]), v[2] }
