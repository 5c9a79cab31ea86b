-- Session effects of the key call (included by keyCall-N.lua, where KEYS, rf_int and RF_EXACT are
-- defined): the session hashes a call touches, loaded once, changed in place, written at its end.
-- Session hashes: loaded on first use; field '<start>:<end>' -> value (false: removed in this call).
local sess, sessOrig, sessChanged = {}, {}, {}
local function sessions(slot)
  local t = sess[slot]
  if not t then
    t, sessOrig[slot], sessChanged[slot] = {}, {}, {}
    local got = redis.call('HGETALL', KEYS[slot])
    for i = 1, #got, 2 do
      t[got[i]] = got[i + 1]
      sessOrig[slot][got[i]] = true
    end
    sess[slot] = t
  end
  return t
end

-- One session effect: merges the overlapping sessions with [time, time]; `journal` collects
-- (slot, field, old value) to undo. Returns the result text '<start>,<end>,<state>[,<rs>,<re>]*;<value>'
-- (state 0: the merged value, 1: late, 2: deleted) or nil and the reason. Ops a, x, n merge the stored
-- values; s and d write the value the caller computed from a read (s: its value, d: none).
local function sessionOp(eff, journal)
  local sw, slot = eff.sw, eff.slot
  local all = sessions(slot)
  local function put(f, v)
    journal[#journal + 1] = slot
    journal[#journal + 1] = f
    journal[#journal + 1] = all[f] or false -- never nil: the triple would lose its place
    all[f] = v
    sessChanged[slot][f] = true
  end
  local found = {}
  for f, v in pairs(all) do
    if v then
      local _, _, ss, se = string.find(f, '^(%-?%d+):(%-?%d+)$')
      ss, se = tonumber(ss), tonumber(se)
      if se < sw.drop then
        put(f, false)
      elseif se >= sw.lo and ss <= sw.hi then
        found[#found + 1] = { ss, se, f, v }
      end
    end
  end
  table.sort(found, function(a, b)
    return a[2] < b[2] or (a[2] == b[2] and a[1] < b[1])
  end)
  local given = eff.op == 's' or eff.op == 'd'
  local start, stop, acc, accText = sw.time, sw.time, nil, nil
  for _, x in ipairs(found) do
    local n = given and 0 or (eff.op == 'a' and rf_int(x[4]) or tonumber(x[4]))
    if n == nil then
      return nil, 'session merge failed: stored value is not ' .. (eff.op == 'a' and 'an integer' or 'a number')
    end
    if acc == nil or (eff.op == 'x' and n > acc) or (eff.op == 'n' and n < acc) then
      acc, accText = n, x[4]
    elseif eff.op == 'a' then
      acc = acc + n
    end
    start = math.min(start, x[1])
    stop = math.max(stop, x[2])
  end
  local bounds = string.format('%d,%d,', start, stop)
  if stop < sw.close then
    return bounds .. '1;'
  end
  local parts = { bounds .. '0' }
  if start ~= sw.time or stop ~= sw.time then
    for _, x in ipairs(found) do
      put(x[3], false)
      parts[#parts + 1] = string.format('%d,%d', x[1], x[2])
    end
  end
  local new
  if eff.op == 'd' then
    put(string.format('%d:%d', start, stop), false)
    parts[1] = bounds .. '2'
    return table.concat(parts, ',') .. ';'
  elseif eff.op == 's' then
    new = eff.value
  elseif eff.op == 'a' then
    local sum = (acc or 0) + eff.num
    if not (sum > -RF_EXACT and sum < RF_EXACT) then
      return nil, 'add failed: result beyond 2^53'
    end
    new = string.format('%d', sum)
  elseif acc == nil or (eff.op == 'x' and eff.num > acc) or (eff.op == 'n' and eff.num < acc) then
    new = eff.operand
  else
    new = accText
  end
  put(string.format('%d:%d', start, stop), new)
  return table.concat(parts, ',') .. ';' .. new
end
