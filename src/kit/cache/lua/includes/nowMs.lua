-- Redis server time in milliseconds (every kit clock is Redis's, never a client's).
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
