-- The key call's parsing (included by keyCallCore.lua): helpers and rf_parse, the checks of one key's
-- call before anything is read or written. The record text is parsed once into flat arrays (R*: per
-- record, E*: per effect, S*: a session effect's bounds; their indexes count over every call of the
-- script call), so there is no table per record or effect.
local RF_EXACT = 9007199254740992 -- 2^53: Lua numbers are exact integers below it
local KEYS, ARGV = KEYS, ARGV
local find, sub, byte, fmt = string.find, string.sub, string.byte, string.format
local concat, rcall, tonumber = table.concat, redis.call, tonumber

local INT = {} -- rf_int's answers by text (false: not one), for the script call: texts repeat
local NUM = {} -- a target's or effect count's text -> its number (the same few texts in every record)

-- A canonical decimal integer of the exact range, or nil.
local function rf_int(s)
  if s == nil then
    return nil
  end
  local n = INT[s]
  if n == nil then
    n = false
    if s == '0' or find(s, '^-?[1-9]%d*$') then
      local v = tonumber(s)
      if v and v > -RF_EXACT and v < RF_EXACT then
        n = v
      end
    end
    INT[s] = n
  end
  return n or nil
end

-- An operand's check for op `op`: ok, and its number for a, x and n (nil for s and d).
local function rf_operand(op, s)
  if op == 'a' then
    local v = rf_int(s)
    return v ~= nil, v
  elseif op == 'x' or op == 'n' then
    local v = tonumber(s)
    return v ~= nil, v
  end
  return true, nil
end

local function rf_err(kind, msg)
  return redis.error_reply(kind .. ' ' .. msg)
end

-- An error's prefix naming the call: 'call <i>: ' (keyCallMany's i-th), '' (false: keyCall's one call).
-- Made only on an error: a number made text per key call is a call into C's formatting.
local function rf_label(call)
  return call and ('call ' .. call .. ': ') or ''
end

local OPS = { s = true, a = true, x = true, n = true, d = true }
-- A table whose array part has room for 128 entries (its constructor's nils size it; none is set): the
-- tables indexed by KEYS index (window and fence indexes interleave, so half of them stay unused and a
-- table grown from empty goes through its hash part, reallocated at each doubling) and the per-record
-- and per-effect arrays (no reallocation while a script call's first records are parsed).
-- stylua: ignore start
local function rf_slots()
  return {
    nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
    nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
    nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
    nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
    nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
    nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
    nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
    nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil
  }
end
-- stylua: ignore end
-- true once a window's final effect is parsed: a window's final marker `f` is read only then (a write
-- without the marker leaves a stored one as it is)
local WFinals = false
local KIND = rf_slots() -- KEYS index -> ':w:' (a window), ':s:' (a session hash) or ':h:' (a window hash)
-- Per record r: its offset, the offset's text, emit (true/false), its first effect index, its effect count
-- (-1: a window pair, two effects: includes/keyCallPair.lua).
local Roff, RoffS, Remit, Rx, Rn = rf_slots(), rf_slots(), rf_slots(), rf_slots(), rf_slots()
local nR = 0
-- Per effect x: kind and op letters, slot (window/session: its KEYS index; kv: its field 'v' or
-- 'v:<store>'; window hash field: 'h<hash KEYS index>@<field>'; note: false), expireAt (its canonical
-- text: compared by length, then as text; sent to PEXPIREAT as it is, no number conversion), operand text,
-- its number, set value, field (window hash: its field; a session's final: '<start>:<end>'), the window
-- hash's KEYS index, true when it is a window's time field `t`.
local Ekind, Eop, Eslot = rf_slots(), rf_slots(), rf_slots()
local Eexp, Eoperand, Enum = rf_slots(), rf_slots(), rf_slots()
local Evalue = {}
local Efield, Ehkey, Etf, Ehplain = {}, {}, rf_slots(), {}
local Stime, Slo, Shi, Sclose, Sdrop = {}, {}, {}, {}, {} -- a session effect's bounds
local nE = 0
local EFFECT = '^([kwtfshp])([saxnd%-])(%d+),(%d*),([^;]*);'
-- A record of one window's value and time effects with one expireAt (the topology's time-windowed
-- records): header and both effects in one find, with 8 captures where the general form takes three
-- finds and 13 (a find and each capture are calls into C; docs/benchmarks.md).
local PAIR = '^(%d+),([01]),W([saxnd])([saxnd])(%d+),(%d+),([^,;]*),([^;]*);'
-- The same with a second operand of digits (a time field's max: the record's timestamp), tried first:
-- its number is then made by arithmetic (one conversion; tonumber, a call into C, converts twice).
local PAIRD = '^(%d+),([01]),W([saxnd])([saxnd])(%d+),(%d+),([^,;]*),(%d+);'
local HEAD = '^(%d+),([01]),(%d+);'
local SESSION = '^([^@]*)@(%d+)@(%-?%d+)@(%-?%d+)@(%-?%d+)@(%-?%d+)$'

-- A window pair record's two effects (kinds w and t on the window KEYS index k1 + target - 1, ops op1 and
-- op2, one expireAt, operands o1 and o2) checked and kept as effects nE + 1 and nE + 2, as the general
-- form keeps them; their set values from ARGV[c]. Returns the ARGV index after them, or nil: malformed.
local function rf_pair(k1, nk, op1, op2, target, exp, o1, o2, c, digits)
  local t = NUM[target]
  if not t then
    t = tonumber(target)
    NUM[target] = t
  end
  local g = k1 + t - 1
  if not (t >= 2 and t <= nk and KIND[g] == ':w:') then
    return nil
  end
  local ok1, num1 = rf_operand(op1, o1)
  local ok2, num2
  if digits and (op2 == 'x' or op2 == 'n') then
    ok2, num2 = true, o2 + 0 -- digits: a number (as tonumber makes it)
  else
    ok2, num2 = rf_operand(op2, o2)
  end
  if not (ok1 and ok2) then
    return nil
  end
  if #exp > 1 and exp < '1' then -- leading zeros (a digit text below '1'): the canonical text
    exp = fmt('%d', tonumber(exp))
  end
  local x, y = nE + 1, nE + 2
  nE = y
  -- (what includes/keyCallPair.lua reads: its kinds, the time effect's slot and expireAt go without
  -- saying)
  Eop[x], Eexp[x], Eoperand[x], Enum[x], Eslot[x] = op1, exp, o1, num1, g
  Eop[y], Eoperand[y], Enum[y] = op2, o2, num2
  if op1 == 's' then
    Evalue[x] = ARGV[c]
    c = c + 1
  end
  if op2 == 's' then
    Evalue[y] = ARGV[c]
    c = c + 1
  end
  if (op1 == 's' and Evalue[x] == nil) or (op2 == 's' and Evalue[y] == nil) then
    return nil
  end
  return c
end

-- Parses and checks one key's call before anything is read or written (`call`: its number in a
-- keyCallMany, false in a keyCall, for errors): KEYS[k1] is its fence hash,
-- KEYS[k1 + 1 .. kn] its window and session keys, `spec` its record text, its set values from
-- ARGV[c0]. Returns its first and last record index and the ARGV index after its values, or nil and an
-- error reply. (Over 120 lines: the record text's grammar is checked in one pass, effect kind by
-- effect kind, so that nothing is read or written before all of it is known good.)
local function rf_parse(call, k1, kn, spec, c0)
  local hash = KEYS[k1]
  local hl = #hash
  local hw, hs, hh -- the fence hash's name with each infix (made when a key needs it: one sub per key)
  for i = k1 + 1, kn do
    local head = sub(KEYS[i], 1, hl + 3)
    hw = hw or hash .. ':w:'
    local infix
    if head == hw then
      infix = ':w:'
    else
      hs, hh = hs or hash .. ':s:', hh or hash .. ':h:'
      infix = (head == hs and ':s:') or (head == hh and ':h:') or nil
    end
    if not infix then
      local what = 'KEYS[' .. i .. '] is not a window key of KEYS[' .. k1 .. ']'
      return nil, rf_err('RF_ARGS', rf_label(call) .. what)
    end
    KIND[i] = infix
  end
  local nk = kn - k1 + 1
  local r0, pos, c, last, len = nR, 1, c0, nil, #spec
  while pos <= len do
    local r = nR - r0 + 1
    -- the window pair first (nearly every record of a time-windowed topology); else the general form
    local _, e, offStr, emit, op1, op2, target, exp, o1, o2 = find(spec, PAIRD, pos)
    local n
    local digits = e ~= nil
    if not e then
      _, e, offStr, emit, op1, op2, target, exp, o1, o2 = find(spec, PAIR, pos)
    end
    if not e then
      _, e, offStr, emit, n = find(spec, HEAD, pos)
      if not e then
        return nil, rf_err('RF_ARGS', rf_label(call) .. 'record ' .. r .. ' is malformed')
      end
    end
    pos = e + 1
    local off = offStr + 0 -- digits (the pattern's): a number by arithmetic, one conversion
    if last and off <= last then
      return nil, rf_err('RF_ARGS', rf_label(call) .. 'record ' .. r .. ': offsets must increase')
    end
    last = off
    local x0 = nE + 1
    local todo -- effects left to parse in the general form
    if n == nil then
      c = rf_pair(k1, nk, op1, op2, target, exp, o1, o2, c, digits)
      if not c then
        return nil, rf_err('RF_ARGS', rf_label(call) .. 'record ' .. r .. ' effect 1 is malformed')
      end
      n, todo = -1, 0 -- -1: a window pair, effects x0 and x0 + 1 (made by includes/keyCallPair.lua)
    else
      local nn = NUM[n]
      if not nn then
        nn = tonumber(n)
        NUM[n] = nn
      end
      n, todo = nn, nn
    end
    for k = 1, todo do
      local _, e2, kind, op, target, exp, operand = find(spec, EFFECT, pos)
      local ok = e2 ~= nil
      local t = ok and NUM[target]
      if ok and not t then
        t = tonumber(target)
        NUM[target] = t
      end
      local g = ok and k1 + t - 1 -- its KEYS index, for a window, session or window hash key
      local kt = ok and t >= 2 and t <= nk and KIND[g] -- that key's kind
      local field, sl, num -- num: the operand's number (ops a, x, n), from its check
      if ok and kind == 'p' then
        ok = op == 's'
      elseif ok and kind == 'h' then
        local _, _, o2, st = find(operand, '^([^@]*)@(%d+)$')
        ok = o2 ~= nil and kt == ':h:' and OPS[op] and exp ~= ''
        if ok and op == 'a' then
          num = rf_int(o2)
          ok = num ~= nil
        elseif ok and (op == 'x' or op == 'n') then
          num = tonumber(o2)
          ok = num ~= nil
        end
        if ok then
          operand, field = o2, st
        end
      elseif ok and kind == 'f' then
        -- a window's final (operand '' its value, 't' its time), a session's value (operand
        -- '<start>:<end>', the field) or a window hash field's value (operand 'h<start>': once,
        -- marked; 't<start>': a timestamp, as it is)
        ok = op == '-' and ((kt == ':w:' and (operand == '' or operand == 't'))
          or (kt == ':s:' and find(operand, '^%d+:%d+$') ~= nil)
          or (kt == ':h:' and find(operand, '^[ht]%d+$') ~= nil))
        if ok and kt == ':w:' then
          WFinals = true
        elseif ok and kt == ':s:' then
          field = operand
        elseif ok and kt == ':h:' then
          field = sub(operand, 2)
          if byte(operand, 1) == 116 then -- 't': read as it is, nothing marked
            Ehplain[nE + 1] = true
          end
        end
      elseif ok and kind == 's' then
        local _, _, o2, tm, lo, hi, cl, dr = find(operand, SESSION)
        ok = o2 ~= nil and OPS[op] and kt == ':s:' and exp ~= ''
        if ok and op == 'a' then
          num = rf_int(o2)
          ok = num ~= nil
        elseif ok and (op == 's' or op == 'd') then
          ok = o2 == ''
        elseif ok then
          num = tonumber(o2)
          ok = num ~= nil
        end
        if ok then
          operand = o2
          sl = nE + 1
          Stime[sl], Slo[sl], Shi[sl], Sclose[sl], Sdrop[sl] =
            tonumber(tm), tonumber(lo), tonumber(hi), tonumber(cl), tonumber(dr)
        end
      elseif ok and (kind == 'w' or kind == 't') then
        ok = kt == ':w:' and OPS[op] and exp ~= ''
        if ok and op == 'a' then
          num = rf_int(operand)
          ok = num ~= nil
        elseif ok and (op == 'x' or op == 'n') then
          num = tonumber(operand)
          ok = num ~= nil
        end
      elseif ok then
        ok = OPS[op] and kind == 'k'
        if ok and op == 'a' then
          num = rf_int(operand)
          ok = num ~= nil
        elseif ok and (op == 'x' or op == 'n') then
          num = tonumber(operand)
          ok = num ~= nil
        end
      end
      if not ok then
        return nil, rf_err('RF_ARGS', rf_label(call) .. 'record ' .. r .. ' effect ' .. k .. ' is malformed')
      end
      pos = e2 + 1
      nE = nE + 1
      local x = nE
      if exp == '' then
        exp = nil
      elseif #exp > 1 and exp < '1' then -- leading zeros (a digit text below '1'): the canonical text
        exp = fmt('%d', tonumber(exp))
      end
      Ekind[x], Eop[x], Eexp[x], Eoperand[x], Enum[x] = kind, op, exp, operand, num
      if kind == 't' or (kind == 'f' and operand == 't') then
        Etf[x] = true
      end
      if kind == 'k' then
        Eslot[x] = target == '0' and 'v' or ('v:' .. target)
      elseif kind == 'h' or (kind == 'f' and kt == ':h:') then
        Ehkey[x], Efield[x], Eslot[x] = g, field, 'h' .. g .. '@' .. field
      elseif kind == 'p' then
        Eslot[x] = false
      else
        Eslot[x], Efield[x] = g, field -- field: a session's final only
      end
      if op == 's' then
        local v = ARGV[c]
        c = c + 1
        if v == nil then
          return nil, rf_err('RF_ARGS', rf_label(call) .. 'record ' .. r .. ' effect ' .. k .. ': no value')
        end
        Evalue[x] = v
      end
    end
    nR = nR + 1
    Roff[nR], RoffS[nR], Remit[nR], Rx[nR], Rn[nR] = off, offStr, emit == '1', x0, n
  end
  if nR == r0 then
    return nil, rf_err('RF_ARGS', rf_label(call) .. 'no records')
  end
  return r0 + 1, nR, c
end
