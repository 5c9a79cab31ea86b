-- The key call's body (included by keyCall-N.lua and keyCallMany-N.lua): helpers, rf_parse (the
-- checks, before anything is read or written) and rf_run (the decision and the writes of one key).
-- (Over 400 lines: one call's parsing, decision, effects and writes; sessions are an include.)
local RF_EXACT = 9007199254740992 -- 2^53: Lua numbers are exact integers below it

-- A canonical decimal integer of the exact range, or nil.
local function rf_int(s)
  if s == '0' or (s and string.find(s, '^-?[1-9]%d*$')) then
    local n = tonumber(s)
    if n and n > -RF_EXACT and n < RF_EXACT then
      return n
    end
  end
  return nil
end

local function rf_err(kind, msg)
  return redis.error_reply(kind .. ' ' .. msg)
end

-- Parses and checks one key's call before anything is read or written: KEYS[k1] is its fence hash,
-- KEYS[k1 + 1 .. kn] its window and session keys, `spec` its record text, its set values from
-- ARGV[c0]. Returns {recs, next (the ARGV index after its values)} or nil and an error reply.
local function rf_parse(label, k1, kn, spec, c0)
  local hash = KEYS[k1]
  local kindOf = {} -- KEYS index -> ':w:' (a window), ':s:' (a session hash) or ':h:' (a window hash)
  for i = 2, kn - k1 + 1 do
    local key = KEYS[k1 + i - 1]
    local infix = string.sub(key, #hash + 1, #hash + 3)
    if string.sub(key, 1, #hash) ~= hash or (infix ~= ':w:' and infix ~= ':s:' and infix ~= ':h:') then
      return nil, rf_err('RF_ARGS', label .. 'KEYS[' .. (k1 + i - 1) .. '] is not a window key of KEYS[' .. k1 .. ']')
    end
    kindOf[i] = infix
  end

  -- Parse and check every record before anything is read or written.
  local OPS = { s = true, a = true, x = true, n = true, d = true }
  local recs = {}
  local pos, c, last = 1, c0, nil
  while pos <= #spec do
    local r = #recs + 1
    local _, e, offStr, emit, n = string.find(spec, '^(%d+),([01]),(%d+);', pos)
    if not e then
      return nil, rf_err('RF_ARGS', label .. 'record ' .. r .. ' is malformed')
    end
    pos = e + 1
    local off = tonumber(offStr)
    if last and off <= last then
      return nil, rf_err('RF_ARGS', label .. 'record ' .. r .. ': offsets must increase')
    end
    last = off
    local effs = {}
    for k = 1, tonumber(n) do
      local _, e2, kind, op, target, exp, operand = string.find(spec, '^([kwtfshp])([saxnd%-])(%d+),(%d*),([^;]*);', pos)
      local ok = e2 ~= nil
      local t = ok and tonumber(target)
      local sw, field
      if ok and kind == 'p' then
        ok = op == 's'
      elseif ok and kind == 'h' then
        local _, _, o2, st = string.find(operand, '^([^@]*)@(%d+)$')
        ok = o2 ~= nil and kindOf[t] == ':h:' and OPS[op] and exp ~= ''
        if ok and op == 'a' then
          ok = rf_int(o2) ~= nil
        elseif ok and (op == 'x' or op == 'n') then
          ok = tonumber(o2) ~= nil
        end
        if ok then
          operand, field = o2, st
        end
      elseif ok and kind == 'f' then
        -- a window's final (operand '' its value, 't' its time), or a session's value (operand
        -- '<start>:<end>', the field)
        ok = op == '-' and ((kindOf[t] == ':w:' and (operand == '' or operand == 't'))
          or (kindOf[t] == ':s:' and string.find(operand, '^%d+:%d+$') ~= nil))
        if ok and kindOf[t] == ':s:' then
          field = operand
        end
      elseif ok and kind == 's' then
        local _, _, o2, tm, lo, hi, cl, dr =
          string.find(operand, '^([^@]*)@(%d+)@(%-?%d+)@(%-?%d+)@(%-?%d+)@(%-?%d+)$')
        ok = o2 ~= nil and OPS[op] and kindOf[t] == ':s:' and exp ~= ''
        if ok and op == 'a' then
          ok = rf_int(o2) ~= nil
        elseif ok and (op == 's' or op == 'd') then
          ok = o2 == ''
        elseif ok then
          ok = tonumber(o2) ~= nil
        end
        if ok then
          operand = o2
          sw = { time = tonumber(tm), lo = tonumber(lo), hi = tonumber(hi), close = tonumber(cl), drop = tonumber(dr) }
        end
      elseif ok and (kind == 'w' or kind == 't') then
        ok = kindOf[t] == ':w:' and OPS[op] and exp ~= ''
        if ok and op == 'a' then
          ok = rf_int(operand) ~= nil
        elseif ok and (op == 'x' or op == 'n') then
          ok = tonumber(operand) ~= nil
        end
      elseif ok then
        ok = OPS[op] and kind == 'k'
        if ok and op == 'a' then
          ok = rf_int(operand) ~= nil
        elseif ok and (op == 'x' or op == 'n') then
          ok = tonumber(operand) ~= nil
        end
      end
      if not ok then
        return nil, rf_err('RF_ARGS', label .. 'record ' .. r .. ' effect ' .. k .. ' is malformed')
      end
      pos = e2 + 1
      local eff = { kind = kind, op = op, exp = tonumber(exp), operand = operand, num = tonumber(operand), sw = sw }
      if kind == 't' or (kind == 'f' and operand == 't') then
        eff.tf = true -- the window's time field `t`
      end
      if kind == 'k' then
        eff.slot = target == '0' and 'v' or ('v:' .. target)
      elseif kind == 'h' then
        eff.hkey = k1 + t - 1 -- the window hash's KEYS index
        eff.field = field
        eff.slot = 'h' .. eff.hkey .. '@' .. field
      elseif kind == 'p' then
        eff.slot = false
      elseif kind == 'f' and field then
        eff.slot = k1 + t - 1 -- the session hash's KEYS index
        eff.sfield = field
      else
        eff.slot = k1 + t - 1 -- its KEYS index
      end
      if op == 's' then
        eff.value = ARGV[c]
        c = c + 1
        if eff.value == nil then
          return nil, rf_err('RF_ARGS', label .. 'record ' .. r .. ' effect ' .. k .. ': no value')
        end
      end
      effs[k] = eff
    end
    recs[r] = { off = off, offStr = offStr, emit = emit == '1', effs = effs }
  end
  if #recs == 0 then
    return nil, rf_err('RF_ARGS', label .. 'no records')
  end
  return { recs = recs, next = c }
end

-- Decides and makes one key's parsed call; returns its reply.
local function rf_run(k1, recs, partition, epoch, watermark, expect)
  local p, o, e
  local cur = {} -- slot -> value (false: none); kv slots from the hash, window slots loaded on first use
  local curT = {} -- window slot -> its time field `t` (false: none)
  local hadT = {} -- window slot -> true when its key held `t` before the call
  local final = {} -- window slot -> true when final
  local loaded = {}
  local pend = {}
  local hash = KEYS[k1]
  local flat = redis.call('HGETALL', hash)
  for i = 1, #flat, 2 do
    local f = flat[i]
    local b = string.byte(f, 1)
    if f == 'p' then
      p = flat[i + 1]
    elseif f == 'o' then
      o = tonumber(flat[i + 1])
    elseif f == 'e' then
      e = tonumber(flat[i + 1])
    elseif b == 35 then -- '#'
      pend[#pend + 1] = i
    elseif b == 118 then -- 'v', 'v:<store>'
      cur[f] = flat[i + 1]
    end
  end

  if e and p == partition and epoch < e then
    return { string.rep('F', #recs), e, -1 }
  end
  if expect ~= '' then
    local token = '-'
    if o then
      token = p .. ':' .. string.format('%d', o)
    end
    if token ~= expect then
      return { string.rep('C', #recs), -1, -1, token }
    end
  end

  local reply = { '', o or -1, tonumber(p) or -1 }
  local letters = {}
  local hdel, hset = {}, {}

  -- Prune pending entries the committed offset has passed (same partition only).
  if p == partition and watermark >= 0 then
    local keep = {}
    for _, i in ipairs(pend) do
      if tonumber(string.sub(flat[i], 2)) < watermark then
        hdel[#hdel + 1] = flat[i]
      else
        keep[#keep + 1] = i
      end
    end
    pend = keep
  end

  local function value(slot, eff)
    if type(slot) == 'number' and not loaded[slot] then
      local got = redis.call('HMGET', KEYS[slot], 'v', 'f', 't')
      cur[slot] = got[1] or false
      final[slot] = got[2] and true or nil
      curT[slot] = got[3] or false
      hadT[slot] = got[3] and true or nil
      loaded[slot] = true
    elseif eff.hkey and not loaded[slot] then
      cur[slot] = redis.call('HGET', KEYS[eff.hkey], eff.field) or false
      loaded[slot] = true
    end
    return cur[slot] or false
  end

  -- One effect's new value from v (false: none), or nil and the reason it cannot apply.
  local function rf_op(eff, v)
    local op = eff.op
    if op == 's' then
      return eff.value
    elseif op == 'a' then
      local base = 0
      if v then
        base = rf_int(v)
      end
      if base == nil then
        return nil, 'add failed: stored value is not an integer'
      end
      local sum = base + eff.num
      if not (sum > -RF_EXACT and sum < RF_EXACT) then
        return nil, 'add failed: result beyond 2^53'
      end
      return string.format('%d', sum)
    elseif op == 'x' or op == 'n' then
      local num
      if v then
        num = tonumber(v)
        if num == nil then
          return nil, (op == 'x' and 'max' or 'min') .. ' failed: stored value is not a number'
        end
      end
      if num == nil or (op == 'x' and eff.num > num) or (op == 'n' and eff.num < num) then
        return eff.operand
      end
      return v
    end
    return false
  end

  local dirty = {} -- slot -> true
  local expires = {} -- window or session slot -> expireAt

--@include "session"

  -- One record's effects, made in place on cur/curT; on a failing effect the ones before it are undone
  -- (all or none); the windows its finals took are marked final once every effect is made. Returns the
  -- results (value or false per effect), or nil and the reason.
  local function operate(effs)
    local results = {}
    local undo = {} -- kv/window slots: slot, old value, old time field, ...
    local journal = {} -- session changes: slot, field, old value, ...
    local marks = {} -- window slots the record's finals take
    local took = {} -- '<slot>' / '<slot>t': the window fields a final of this record took
    local function rollback()
      for u = #undo - 2, 1, -3 do
        cur[undo[u]] = undo[u + 1]
        curT[undo[u]] = undo[u + 2] or nil
      end
      for u = #journal - 2, 1, -3 do
        sess[journal[u]][journal[u + 1]] = journal[u + 2]
      end
    end
    for k, eff in ipairs(effs) do
      local slot = eff.slot
      if eff.kind == 's' then
        local text, reason = sessionOp(eff, journal)
        if text == nil then
          rollback()
          return nil, reason
        end
        results[k] = text
      elseif eff.kind == 'p' then
        results[k] = eff.value
      elseif eff.sfield then
        results[k] = sessions(slot)[eff.sfield] or false
      else
        local v = value(slot, eff)
        undo[#undo + 1] = slot
        undo[#undo + 1] = v
        undo[#undo + 1] = curT[slot] or false
        if eff.kind == 'f' then
          local id = eff.tf and (slot .. 't') or slot
          if final[slot] or not v or took[id] then
            results[k] = false
          else
            if eff.tf then
              results[k] = curT[slot] or false
            else
              results[k] = v
            end
            took[id] = true
            marks[#marks + 1] = slot
          end
        elseif eff.tf then
          local new, reason = rf_op(eff, curT[slot] or false)
          if new == nil then
            rollback()
            return nil, reason
          end
          curT[slot] = new
          results[k] = new
        else
          local new, reason = rf_op(eff, v)
          if new == nil then
            rollback()
            return nil, reason
          end
          cur[slot] = new
          results[k] = new
        end
      end
    end
    for _, slot in ipairs(marks) do
      final[slot] = true
    end
    for _, eff in ipairs(effs) do
      local slot = eff.hkey or eff.slot -- a window hash expires as a whole
      if eff.slot and eff.kind ~= 's' and not eff.sfield then
        dirty[eff.slot] = true
      end
      if eff.exp and (expires[slot] == nil or eff.exp > expires[slot]) then
        expires[slot] = eff.exp
      end
    end
    return results
  end

  local pendingVal
  local fenceDirty = false
  for i, rec in ipairs(recs) do
    local verdict
    if o == nil then
      verdict = 'A'
    elseif p ~= partition then
      verdict = 'B'
    elseif rec.off > o then
      verdict = 'A'
    end
    if verdict == nil then
      if not pendingVal then
        pendingVal = {}
        for _, j in ipairs(pend) do
          pendingVal[flat[j]] = flat[j + 1]
        end
      end
      local stored = pendingVal['#' .. rec.offStr]
      if stored then
        letters[i] = 'R'
        reply[#reply + 1] = stored
      else
        letters[i] = 'S'
      end
      if e == nil or epoch > e then
        e = epoch
        fenceDirty = true
      end
    else
      local results, reason = operate(rec.effs)
      if verdict == 'B' then
        for _, j in ipairs(pend) do
          hdel[#hdel + 1] = flat[j]
        end
        pend = {}
        pendingVal = {}
      end
      p, o, e = partition, rec.off, epoch
      fenceDirty = true
      local entry
      if reason then
        letters[i] = 'X'
        entry = 'd' .. reason
        reply[#reply + 1] = reason
      else
        letters[i] = verdict
        if rec.emit then
          local parts = { 'r' }
          for k = 1, #rec.effs do
            local v = results[k]
            if rec.effs[k].kind == 's' then
              parts[k + 1] = 's' .. #v .. ':' .. v
            else
              parts[k + 1] = v and (#v .. ':' .. v) or '-'
            end
          end
          entry = table.concat(parts)
          reply[#reply + 1] = entry
        end
      end
      if entry then
        hset[#hset + 1] = '#' .. rec.offStr
        hset[#hset + 1] = entry
        if pendingVal then
          pendingVal['#' .. rec.offStr] = entry
        end
      end
    end
  end

  local hashes = {} -- window hash KEYS index -> true (written: its expiry is set below)
  for slot in pairs(dirty) do
    local v = cur[slot]
    local hk, hf = nil, nil
    if type(slot) == 'string' then
      hk, hf = string.match(slot, '^h(%d+)@(%d+)$')
    end
    if hk then
      hk = tonumber(hk)
      hashes[hk] = true
      if v then
        redis.call('HSET', KEYS[hk], hf, v)
      else
        redis.call('HDEL', KEYS[hk], hf)
      end
    elseif type(slot) == 'string' then
      if v then
        hset[#hset + 1] = slot
        hset[#hset + 1] = v
      else
        hdel[#hdel + 1] = slot
      end
    else
      -- a window key: `v` (and `f` once final: the marker goes with the value) and `t`
      local key, tv = KEYS[slot], curT[slot]
      if v and tv then
        if final[slot] then
          redis.call('HSET', key, 'v', v, 't', tv, 'f', '1')
        else
          redis.call('HSET', key, 'v', v, 't', tv)
        end
      elseif v then
        if final[slot] then
          redis.call('HSET', key, 'v', v, 'f', '1')
        else
          redis.call('HSET', key, 'v', v)
        end
        if hadT[slot] then
          redis.call('HDEL', key, 't')
        end
      elseif tv then
        redis.call('HSET', key, 't', tv)
        redis.call('HDEL', key, 'v', 'f')
      else
        redis.call('HDEL', key, 'v', 'f', 't')
      end
      if expires[slot] then
        redis.call('PEXPIREAT', key, expires[slot])
      end
    end
  end
  for hk in pairs(hashes) do
    if expires[hk] then
      redis.call('PEXPIREAT', KEYS[hk], expires[hk])
    end
  end
  for slot, changed in pairs(sessChanged) do
    local all, orig = sess[slot], sessOrig[slot]
    local sset, sdel = {}, {}
    for f in pairs(changed) do
      local v = all[f]
      if v then
        sset[#sset + 1] = f
        sset[#sset + 1] = v
      elseif orig[f] then
        sdel[#sdel + 1] = f
      end
    end
    if #sdel > 0 then
      redis.call('HDEL', KEYS[slot], unpack(sdel))
    end
    if #sset > 0 then
      redis.call('HSET', KEYS[slot], unpack(sset))
    end
    if expires[slot] then
      redis.call('PEXPIREAT', KEYS[slot], expires[slot])
    end
  end
  if fenceDirty then
    hset[#hset + 1] = 'p'
    hset[#hset + 1] = p
    hset[#hset + 1] = 'o'
    hset[#hset + 1] = string.format('%d', o or -1)
    hset[#hset + 1] = 'e'
    hset[#hset + 1] = string.format('%d', e)
  end
  if #hdel > 0 then
    redis.call('HDEL', hash, unpack(hdel))
  end
  if #hset > 0 then
    redis.call('HSET', hash, unpack(hset))
  end
  reply[1] = table.concat(letters)
  return reply
end
