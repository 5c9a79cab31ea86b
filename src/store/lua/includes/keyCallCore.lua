-- The key call's body (included by keyCall-N.lua and keyCallMany-N.lua): the parsing and its checks
-- (includes/keyCallParse.lua: rf_parse), then rf_run (the decision and the effects of one key; the
-- writes at its end: includes/keyCallWrite.lua). Sessions are an include, and so are a window's load
-- and the window pair records (includes/keyCallPair.lua).
-- Lean by design: per record, this Lua is a large part of Redis' time. Every function is made once per
-- script call, none per key call or record; a key call's state is kept in script-level tables keyed by
-- KEYS index (unique in a script call: never reset) or in arrays whose count is reset per key call.
--@include "keyCallParse"

-- Script-level state of the key calls, keyed by slot (window: its KEYS index; window hash field: its
-- 'h..' text): the value (false: none), time field `t`, whether the key held `t` before the call, the
-- final marker, loaded, expireAt (also of a window hash or session: by KEYS index), the record that took
-- the window's final value / time field, listed as written.
local Wcur, WcurT, WhadT, Wfinal = rf_slots(), rf_slots(), rf_slots(), rf_slots()
local Wloaded, Exp = rf_slots(), rf_slots()
local TookV, TookT, Dirty = {}, {}, rf_slots()
-- One key call's lists (counts reset per call): the slots written and the effect that wrote each,
-- the fence hash's fields to set and delete, the verdict letters, the pending entries' HGETALL indexes.
local DirtyL, DirtyX, Hset, Hdel, Letters, Pend = {}, {}, {}, {}, {}, {}
local nDirty, nHset, nHdel, nPend = 0, 0, 0, 0
local KV, KVdirty -- one key call's kv slots: field -> value (false: none); field -> true when written
-- One record's scratch: the effects' results, the undo log (slot, old value, old time field, ...),
-- the session journal (slot, field, old value, ...), the windows its finals take, an entry's parts.
local Res, Undo, Journal, Marks, Parts = {}, {}, {}, {}, {}
local nJournal = 0
local LenS = {} -- n -> n .. ':' (a result's length prefix)
local epochN, epochS -- the last epoch written and its text
local epochArg, partitionN = ARGV[3], tonumber(ARGV[2]) -- the caller's epoch text, its partition's number
local IntS = {} -- n -> fmt('%d', n) (an add's result: small counts repeat)
local PruneS -- '#' .. the committed offset's text (one per script call: every call shares it)

--@include "session"

-- One effect's new value from v (false: none), or nil and the reason it cannot apply.
local function rf_op(x, v)
  local op = Eop[x]
  if op == 's' then
    return Evalue[x]
  elseif op == 'a' then
    local base = 0
    if v then
      base = rf_int(v)
    end
    if base == nil then
      return nil, 'add failed: stored value is not an integer'
    end
    local sum = base + Enum[x]
    if not (sum > -RF_EXACT and sum < RF_EXACT) then
      return nil, 'add failed: result beyond 2^53'
    end
    local text = IntS[sum]
    if not text then
      text = fmt('%d', sum)
      IntS[sum] = text
    end
    return text
  elseif op == 'x' or op == 'n' then
    local num
    if v then
      num = tonumber(v)
      if num == nil then
        return nil, (op == 'x' and 'max' or 'min') .. ' failed: stored value is not a number'
      end
    end
    if num == nil or (op == 'x' and Enum[x] > num) or (op == 'n' and Enum[x] < num) then
      return Eoperand[x]
    end
    return v
  end
  return false
end

--@include "keyCallPair"

-- A window hash field's final (effect x of record r): its value as the call has it so far (its slot is
-- the `h` effects'), once: the field's mark is the hash's field `f<start>`. Returns the value (the
-- caller marks the field once every effect of the record is made) or false, and whether it took it. A
-- timestamp's (operand 't<start>') is read as it is, nothing marked.
local function hashFinal(x, slot, r)
  if not Wloaded[slot] then
    Wcur[slot] = rcall('HGET', KEYS[Ehkey[x]], Efield[x]) or false
    Wloaded[slot] = true
  end
  if Ehplain[x] then
    return Wcur[slot] or false, false
  end
  local m = Wfinal[slot]
  if m == nil then
    m = rcall('HEXISTS', KEYS[Ehkey[x]], 'f' .. Efield[x]) == 1
    Wfinal[slot] = m
  end
  if m or not Wcur[slot] or TookV[slot] == r then
    return false
  end
  TookV[slot] = r
  return Wcur[slot], true
end

-- Undoes a record's changes: the first nUndo entries of Undo and the session journal.
local function rollback(nUndo)
  for u = nUndo - 2, 1, -3 do
    local slot = Undo[u]
    if type(slot) == 'string' and byte(slot, 1) == 118 then -- 'v': a kv slot
      KV = KV or {}
      KV[slot] = Undo[u + 1]
    else
      Wcur[slot], WcurT[slot] = Undo[u + 1], Undo[u + 2]
    end
  end
  for u = nJournal - 2, 1, -3 do
    Sess[Journal[u]][Journal[u + 1]] = Journal[u + 2]
  end
end

-- Record r's effects (x1 .. x1 + n - 1), made in place; on a failing effect the ones before it are
-- undone (all or none); the windows its finals took are marked final once every effect is made.
-- The results (value or false per effect) are Res[1..n]; returns nil, or the reason it cannot apply.
local function operate(x1, n, r)
  local nUndo, nMarks = 0, 0
  nJournal = 0
  for k = 1, n do
    local x = x1 + k - 1
    local kind, slot = Ekind[x], Eslot[x]
    if kind == 's' then
      local text, reason = sessionOp(x)
      if text == nil then
        rollback(nUndo)
        return reason
      end
      Res[k] = text
    elseif kind == 'p' then
      Res[k] = Evalue[x]
    elseif kind == 'f' and Ehkey[x] then
      local v, took = hashFinal(x, slot, r)
      Res[k] = v
      if took then
        nMarks = nMarks + 1
        Marks[nMarks] = slot
      end
    elseif kind == 'f' and Efield[x] then
      Res[k] = sessions(slot)[Efield[x]] or false
    else
      local v
      if kind == 'k' then
        v = KV and KV[slot] or false
      else
        if not Wloaded[slot] then
          if kind == 'h' then
            Wcur[slot] = rcall('HGET', KEYS[Ehkey[x]], Efield[x]) or false
            Wloaded[slot] = true
          else
            loadWindow(slot)
          end
        end
        v = Wcur[slot] or false
      end
      Undo[nUndo + 1], Undo[nUndo + 2], Undo[nUndo + 3] = slot, v, WcurT[slot] or false
      nUndo = nUndo + 3
      if kind == 'f' then
        local tf = Etf[x]
        if Wfinal[slot] or not v or (tf and TookT[slot] == r) or (not tf and TookV[slot] == r) then
          Res[k] = false
        else
          if tf then
            Res[k] = WcurT[slot] or false
            TookT[slot] = r
          else
            Res[k] = v
            TookV[slot] = r
          end
          nMarks = nMarks + 1
          Marks[nMarks] = slot
        end
      else
        local tf = Etf[x]
        local new, reason
        if tf then
          new, reason = rf_op(x, WcurT[slot] or false)
        else
          new, reason = rf_op(x, v)
        end
        if new == nil then
          rollback(nUndo)
          return reason
        end
        if tf then
          WcurT[slot] = new
        elseif kind == 'k' then
          KV = KV or {}
          KV[slot] = new
        else
          Wcur[slot] = new
        end
        Res[k] = new
      end
    end
  end
  for m = 1, nMarks do
    Wfinal[Marks[m]] = true
  end
  for x = x1, x1 + n - 1 do
    local kind, slot = Ekind[x], Eslot[x]
    -- a window hash field's final is written (its mark) when it took the value
    local took = Ehkey[x] and not Ehplain[x] and Res[x - x1 + 1]
    if slot and kind ~= 's' and not (kind == 'f' and Efield[x] and not took) then
      if kind == 'k' then
        KVdirty = KVdirty or {}
        KVdirty[slot] = true
      elseif not Dirty[slot] then
        Dirty[slot] = true
        nDirty = nDirty + 1
        DirtyL[nDirty], DirtyX[nDirty] = slot, x
      end
    end
    local ex = Eexp[x]
    if ex then
      local s = Ehkey[x] or slot -- a window hash expires as a whole
      local had = Exp[s]
      if had == nil or (ex ~= had and (#ex > #had or (#ex == #had and ex > had))) then
        Exp[s] = ex
      end
    end
  end
  return nil
end

-- Record's pending entry from its results Res[1..n] (effects x1 ..): 'r' then per effect '-' or
-- '<length>:<bytes>' ('s<length>:<text>' for a session).
local function rf_entry(x1, n)
  if n == 2 and Ekind[x1] ~= 's' and Ekind[x1 + 1] ~= 's' then
    return rf_entry2(Res[1], Res[2])
  end
  Parts[1] = 'r'
  for k = 1, n do
    local v = Res[k]
    if v then
      local l = #v
      local ls = LenS[l]
      if not ls then
        ls = l .. ':'
        LenS[l] = ls
      end
      if Ekind[x1 + k - 1] == 's' then
        Parts[k + 1] = 's' .. ls .. v
      else
        Parts[k + 1] = ls .. v
      end
    else
      Parts[k + 1] = '-'
    end
  end
  return concat(Parts, '', 1, n + 1)
end

--@include "keyCallWrite"

-- Decides and makes one key's call (records r1 .. r2, the fence hash KEYS[k1]); returns its reply.
-- (Over 120 lines: the fence decision, then the verdict per record and what it does, in order.)
local function rf_run(k1, r1, r2, partition, epoch, watermark, expect)
  local p, o, e, oS -- oS: the offset's text when it is a record's (canonical below 2^53)
  local p0, o0, e0 -- the fence fields' stored text (a field whose text does not change is not rewritten)
  local g -- the generation (field g), bumped by writers outside the owner; absent: none
  local hash = KEYS[k1]
  KV, KVdirty = nil, nil
  nDirty, nHset, nHdel, nPend, nSess = 0, 0, 0, 0, 0
  local flat = rcall('HGETALL', hash)
  -- (the fixed fields by equality first: a call into C, byte(), only for the others)
  for i = 1, #flat, 2 do
    local f = flat[i]
    if f == 'p' then
      p = flat[i + 1]
      p0 = p
    elseif f == 'o' then
      o0 = flat[i + 1]
      o = tonumber(o0) -- not `+ 0`: a stored o that is not a number reads as none, never an error
    elseif f == 'e' then
      e0 = flat[i + 1]
      e = e0 == epochArg and epoch or tonumber(e0) -- most often the caller's own epoch
    elseif f == 'g' then
      g = flat[i + 1]
    else
      local b = byte(f, 1)
      if b == 35 then -- '#'
        nPend = nPend + 1
        Pend[nPend] = i
      elseif b == 118 then -- 'v', 'v:<store>'
        KV = KV or {}
        KV[f] = flat[i + 1]
      end
    end
  end

  if e and p == partition and epoch < e then
    return { string.rep('F', r2 - r1 + 1), e, -1 }
  end
  if expect ~= '' then
    local token = '-'
    if o then
      token = p .. ':' .. fmt('%d', o)
      if g then
        token = token .. ':' .. g
      end
    end
    if token ~= expect then
      return { string.rep('C', r2 - r1 + 1), -1, -1, token }
    end
  end

  -- room for one payload (a trailing nil: the reply ends at its last value; a table grown past its
  -- constructor's size is reallocated)
  local reply = { '', o or -1, (p == partition and partitionN) or tonumber(p) or -1, nil }
  local nReply = 3

  -- Prune pending entries the committed offset has passed (same partition only). Their names and
  -- '#<watermark>' are canonical digit texts, compared by length and then as text (no call into C per
  -- entry); a name with leading zeros (not the codec's) is compared as a number.
  if p == partition and watermark >= 0 then
    local keep = 0
    if not PruneS then
      PruneS = '#' .. fmt('%d', watermark)
    end
    local ws, wl = PruneS, #PruneS
    for j = 1, nPend do
      local i = Pend[j]
      local f = flat[i]
      local lf = #f
      local below
      if lf > 2 and f < '#1' then
        below = tonumber(sub(f, 2)) < watermark
      elseif lf ~= wl then
        below = lf < wl
      else
        below = f < ws
      end
      if below then
        nHdel = nHdel + 1
        Hdel[nHdel] = flat[i]
      else
        keep = keep + 1
        Pend[keep] = i
      end
    end
    nPend = keep
  end

  local pendingVal
  local fenceDirty = false
  for r = r1, r2 do
    local i = r - r1 + 1
    local verdict
    if o == nil then
      verdict = 'A'
    elseif p ~= partition then
      verdict = 'B'
    elseif Roff[r] > o then
      verdict = 'A'
    end
    if verdict == nil then
      if not pendingVal then
        pendingVal = {}
        for j = 1, nPend do
          pendingVal[flat[Pend[j]]] = flat[Pend[j] + 1]
        end
      end
      local stored = pendingVal['#' .. RoffS[r]]
      if stored then
        Letters[i] = 'R'
        nReply = nReply + 1
        reply[nReply] = stored
      else
        Letters[i] = 'S'
      end
      if e == nil or epoch > e then
        e = epoch
        fenceDirty = true
      end
    else
      local x1, n = Rx[r], Rn[r] -- n -1: a window pair (includes/keyCallPair.lua)
      local reason
      if n == -1 then
        reason = operatePair(x1)
      else
        reason = operate(x1, n, r)
      end
      if verdict == 'B' then
        for j = 1, nPend do
          nHdel = nHdel + 1
          Hdel[nHdel] = flat[Pend[j]]
        end
        nPend = 0
        pendingVal = {}
      end
      p, o, e, oS = partition, Roff[r], epoch, RoffS[r]
      fenceDirty = true
      local entry
      if reason then
        Letters[i] = 'X'
        entry = 'd' .. reason
        nReply = nReply + 1
        reply[nReply] = reason
      else
        Letters[i] = verdict
        if Remit[r] then
          entry = n == -1 and rf_entry2(Res[1], Res[2]) or rf_entry(x1, n)
          nReply = nReply + 1
          reply[nReply] = entry
        end
      end
      if entry then
        local f = '#' .. RoffS[r]
        Hset[nHset + 1], Hset[nHset + 2] = f, entry
        nHset = nHset + 2
        if pendingVal then
          pendingVal[f] = entry
        end
      end
    end
  end

  rf_write()
  rf_write_fence(hash, fenceDirty, p, o, e, oS, p0, o0, e0)
  reply[1] = r1 == r2 and Letters[1] or concat(Letters, '', 1, r2 - r1 + 1)
  return reply
end
