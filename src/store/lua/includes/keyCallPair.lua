-- A window's load and a window pair record's effects (included by keyCallCore.lua, after its state
-- and rf_op; loadWindow serves operate too). A window pair is a record of exactly one window's value
-- and time with one expireAt (the pair text of includes/keyCallParse.lua, its effect count Rn -1),
-- the time-windowed topologies' record. Its two effects w and t are made as operate makes them, with
-- less work per record: both new values are found before either is kept (nothing to undo), no finals
-- to mark, the window marked written and its expireAt kept once; its entry is made by rf_entry2.

-- Reads window key KEYS[slot] once per script call: its value, time field and (when the script call
-- has a window's final) final marker.
local function loadWindow(slot)
  local got
  if WFinals then
    got = rcall('HMGET', KEYS[slot], 'v', 't', 'f')
    Wfinal[slot] = got[3] and true
  else
    got = rcall('HMGET', KEYS[slot], 'v', 't')
  end
  Wcur[slot] = got[1] or false
  WcurT[slot], WhadT[slot] = got[2] or false, got[2] and true
  Wloaded[slot] = true
end

-- The pair x (value) and x + 1 (time) of one record, on window KEYS[Eslot[x]]: results Res[1], Res[2];
-- returns nil, or the reason it cannot apply (nothing changed).
local function operatePair(x)
  local slot = Eslot[x]
  if not Wloaded[slot] then
    loadWindow(slot)
  end
  local new, reason = rf_op(x, Wcur[slot] or false)
  if new == nil then
    return reason
  end
  local newT
  newT, reason = rf_op(x + 1, WcurT[slot] or false)
  if newT == nil then
    return reason
  end
  Wcur[slot], WcurT[slot] = new, newT
  Res[1], Res[2] = new, newT
  if not Dirty[slot] then
    Dirty[slot] = true
    nDirty = nDirty + 1
    DirtyL[nDirty], DirtyX[nDirty] = slot, x
  end
  local ex, had = Eexp[x], Exp[slot]
  if had == nil or (ex ~= had and (#ex > #had or (#ex == #had and ex > had))) then
    Exp[slot] = ex
  end
  return nil
end

-- A two-effect pending entry, no session (results v and w, false: none): 'r' then each '-' or
-- '<length>:<bytes>', made by one concatenation (one new text), no call into C.
local function rf_entry2(v, w)
  local a, b = '-', '-'
  if v then
    a = LenS[#v]
    if not a then
      a = #v .. ':'
      LenS[#v] = a
    end
  end
  if w then
    b = LenS[#w]
    if not b then
      b = #w .. ':'
      LenS[#w] = b
    end
  end
  if v and w then
    return 'r' .. a .. v .. b .. w
  elseif v then
    return 'r' .. a .. v .. b
  elseif w then
    return 'r' .. a .. b .. w
  end
  return 'r--'
end
