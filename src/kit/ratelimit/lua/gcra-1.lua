--[[
  gcra: the generic cell rate algorithm on Redis's clock. The key holds the theoretical arrival time
  (TAT, µs): when the next call would be due if calls came exactly at the rate. A call of cost c is
  admitted when TAT + c x interval - burst x interval <= now, which admits `burst` calls at once and
  then `rate` per period, and never more.

  KEYS[1]  TAT            <base>:tat   integer µs, PX until it no longer matters
  ARGV[1]  intervalUs     period / rate, in µs (may be fractional)
  ARGV[2]  burst          calls admitted at once (>= 1)
  ARGV[3]  cost           this call's cost (0: only look)
  Returns  { allowed (1/0), remaining, retry_after_ms, reset_after_ms }
           remaining: calls of cost 1 admitted now after this one; retry_after: when this call would
           be admitted (0 when it was); reset_after: when the limiter is back to a full burst.
           Not idempotent: a second run of an admitted call charges it twice.
]]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local limit = interval * tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local newTat = tat + interval * cost
local allowAt = newTat - limit
if allowAt > now then
  return { 0, math.max(0, math.floor((limit - (tat - now)) / interval)), math.ceil((allowAt - now) / 1000),
    math.ceil((tat - now) / 1000) }
end
if cost > 0 then
  redis.call('SET', KEYS[1], string.format('%.0f', newTat), 'PX', math.ceil((newTat - now) / 1000) + 1)
end
return { 1, math.floor((limit - (newTat - now)) / interval), 0, math.ceil((newTat - now) / 1000) }
