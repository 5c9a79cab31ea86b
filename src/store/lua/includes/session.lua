-- Session effects of the key call (included by keyCallCore.lua, where KEYS, rcall, fmt, rf_int,
-- RF_EXACT, the effect arrays E*, S* and the journal are defined): the session hashes a call touches,
-- loaded once, changed in place, written at its end.
-- Session hashes, by KEYS index (unique in a script call): field '<start>:<end>' -> value (false:
-- removed in this call), the fields it held when loaded, the fields changed; SessL: the key call's.
local Sess, SessOrig, SessChanged, SessL = {}, {}, {}, {}
local nSess = 0
local function sessions(slot)
  local t = Sess[slot]
  if not t then
    local orig = {}
    t = {}
    SessOrig[slot], SessChanged[slot] = orig, {}
    local got = rcall('HGETALL', KEYS[slot])
    for i = 1, #got, 2 do
      t[got[i]] = got[i + 1]
      orig[got[i]] = true
    end
    Sess[slot] = t
    nSess = nSess + 1
    SessL[nSess] = slot
  end
  return t
end

-- Sets field f of session hash `slot` (its fields `all`) to v, journaling (slot, field, old value).
local function sessionPut(slot, all, f, v)
  Journal[nJournal + 1], Journal[nJournal + 2] = slot, f
  Journal[nJournal + 3] = all[f] or false -- never nil: the triple would lose its place
  nJournal = nJournal + 3
  all[f] = v
  SessChanged[slot][f] = true
end

local function sessionOrder(a, b)
  return a[2] < b[2] or (a[2] == b[2] and a[1] < b[1])
end

-- Session effect x: merges the overlapping sessions with [time, time] (journaled to undo). Returns the
-- result text '<start>,<end>,<state>[,<rs>,<re>]*;<value>' (state 0: the merged value, 1: late, 2:
-- deleted) or nil and the reason. Ops a, x, n merge the stored values; s and d write the value the
-- caller computed from a read (s: its value, d: none).
local function sessionOp(x)
  local slot, op, time = Eslot[x], Eop[x], Stime[x]
  local lo, hi, drop = Slo[x], Shi[x], Sdrop[x]
  local all = sessions(slot)
  local found = {}
  for f, v in pairs(all) do
    if v then
      local _, _, ss, se = find(f, '^(%-?%d+):(%-?%d+)$')
      ss, se = tonumber(ss), tonumber(se)
      if se < drop then
        sessionPut(slot, all, f, false)
      elseif se >= lo and ss <= hi then
        found[#found + 1] = { ss, se, f, v }
      end
    end
  end
  table.sort(found, sessionOrder)
  local given = op == 's' or op == 'd'
  local start, stop, acc, accText = time, time, nil, nil
  for i = 1, #found do
    local s = found[i]
    local n = given and 0 or (op == 'a' and rf_int(s[4]) or tonumber(s[4]))
    if n == nil then
      return nil, 'session merge failed: stored value is not ' .. (op == 'a' and 'an integer' or 'a number')
    end
    if acc == nil or (op == 'x' and n > acc) or (op == 'n' and n < acc) then
      acc, accText = n, s[4]
    elseif op == 'a' then
      acc = acc + n
    end
    start = math.min(start, s[1])
    stop = math.max(stop, s[2])
  end
  local bounds = fmt('%d,%d,', start, stop)
  if stop < Sclose[x] then
    return bounds .. '1;'
  end
  local parts = { bounds .. '0' }
  if start ~= time or stop ~= time then
    for i = 1, #found do
      local s = found[i]
      sessionPut(slot, all, s[3], false)
      parts[#parts + 1] = fmt('%d,%d', s[1], s[2])
    end
  end
  local new
  if op == 'd' then
    sessionPut(slot, all, fmt('%d:%d', start, stop), false)
    parts[1] = bounds .. '2'
    return concat(parts, ',') .. ';'
  elseif op == 's' then
    new = Evalue[x]
  elseif op == 'a' then
    local sum = (acc or 0) + Enum[x]
    if not (sum > -RF_EXACT and sum < RF_EXACT) then
      return nil, 'add failed: result beyond 2^53'
    end
    new = fmt('%d', sum)
  elseif acc == nil or (op == 'x' and Enum[x] > acc) or (op == 'n' and Enum[x] < acc) then
    new = Eoperand[x]
  else
    new = accText
  end
  sessionPut(slot, all, fmt('%d:%d', start, stop), new)
  return concat(parts, ',') .. ';' .. new
end

-- Writes the sessions the key call loaded: the changed fields, then the expiry.
local function sessionsWrite()
  for j = 1, nSess do
    local slot = SessL[j]
    local all, orig = Sess[slot], SessOrig[slot]
    local sset, sdel = {}, {}
    for f in pairs(SessChanged[slot]) do
      local v = all[f]
      if v then
        sset[#sset + 1] = f
        sset[#sset + 1] = v
      elseif orig[f] then
        sdel[#sdel + 1] = f
      end
    end
    if #sdel > 0 then
      rcall('HDEL', KEYS[slot], unpack(sdel))
    end
    if #sset > 0 then
      rcall('HSET', KEYS[slot], unpack(sset))
    end
    if Exp[slot] then
      rcall('PEXPIREAT', KEYS[slot], Exp[slot])
    end
  end
end
