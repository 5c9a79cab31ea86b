--[[
  applyCore: the decision table of the fence, shared by applyRecords-1 (cluster fencing) and
  applyRecordsStrict-2 (strict fencing). Handles every record of ONE key from ONE partition batch,
  in offset order, atomically.

  Hash fields of a state key:
    v            the value (absent after a delete: tombstone)
    p            partition of the last applied record
    o            offset of the last applied record (the fence)
    e            epoch of the last writer (raised by replaying owners too)
    #<offset>    a pending entry for that offset, kept until the partition's committed offset passes it:
                   'o' .. bytes   an output to (re-)emit
                   'n'            a null (tombstone) output to (re-)emit
                   'd' .. reason  a dead letter to (re-)emit (the record was rejected)

  ARGV (see the scripts' headers):
    [1] protocol version, must be '3'
    [2] partition of every record in this call
    [3] caller epoch (the partition epoch the caller acquired)
    [4] watermark: the partition's committed offset (next offset to consume); -1 when unknown.
        Pending entries with offset < watermark are pruned.
    [5] TTL in milliseconds, refreshed on every write; 0 for none
    [6] n, the number of records
    then per record, in increasing offset order, 3 to 5 entries:
      offset, op .. mode, arg1, [expected token, only for cas], [output bytes, only for mode 1]
      op:   set (arg1 = value) | add (arg1 = integer) | addf (arg1 = float) | max (arg1) | min (arg1)
            | del (arg1 = '') | cas (arg1 = new value, then the expected fence token '<partition>:<offset>'
            or '-')
      mode (one digit appended to op): '0' no output | '1' the given bytes | '2' the value after this
            record | '3' a null output

  Returns {verdicts, number, previousPartition, payload...}
    verdicts: one letter per record, in order:
      'A' APPLY    'B' REBASE   'S' SKIP   'R' REEMIT   'F' FENCE (then every letter is F)
      'C' CONFLICT (compare-and-set: the fence moved; nothing written for that record)
      'X' REJECT   (the operation cannot apply to the stored value; the fence moves, a 'd' entry is kept)
    number: with F, the newer epoch that fenced the caller; else the key's offset before the call (-1: none)
    previousPartition: the key's partition before the call (-1: none)
    payload: one per record that has one, in order: R -> the stored entry; A/B with mode '2' -> the
      new entry; C -> the current fence token ('-' when none); X -> the reason
  Writes: all at the end, one HDEL (pruned entries, tombstone) and one HSET (value, fence, new entries),
  except when an operation needs Redis itself to decide (float add, integers beyond 2^53).
  Errors: 'RF_PROTOCOL ...' or 'RF_ARGS ...' on malformed arguments (nothing written).
]]
local RF_EXACT = 9007199254740992 -- 2^53: Lua numbers are exact integers below it

local function rf_int(s)
  if s == '0' or (s and string.find(s, '^-?[1-9]%d*$')) then
    local n = tonumber(s)
    if n and n > -RF_EXACT and n < RF_EXACT then
      return n
    end
  end
  return nil
end

local function rf_apply(stateKey, epochKey, argv)
  if argv[1] ~= '3' then
    return redis.error_reply('RF_PROTOCOL expected protocol 3, got ' .. tostring(argv[1]))
  end
  local partition = argv[2]
  local epoch = tonumber(argv[3])
  local watermark = tonumber(argv[4])
  local ttl = tonumber(argv[5])
  local n = tonumber(argv[6])
  if not (epoch and watermark and ttl and n) or #argv < 6 + n * 3 then
    return redis.error_reply('RF_ARGS malformed apply arguments')
  end

  -- Validate the argument layout before anything is read or written.
  local starts = {}
  local c = 7 -- cursor into argv
  for i = 1, n do
    local opMode = argv[c + 1]
    if not tonumber(argv[c]) or not opMode or argv[c + 2] == nil then
      return redis.error_reply('RF_ARGS record ' .. i .. ' is malformed')
    end
    starts[i] = c
    c = c + 3
    if string.sub(opMode, 1, 3) == 'cas' then
      c = c + 1
    end
    if string.sub(opMode, -1) == '1' then
      c = c + 1
    end
  end
  if c ~= #argv + 1 then
    return redis.error_reply('RF_ARGS malformed apply arguments')
  end

  -- Strict fencing: a single Redis can read the partition's epoch itself (another hash slot).
  if epochKey then
    local current = tonumber(redis.call('GET', epochKey) or '0')
    if epoch < current then
      return { string.rep('F', n), current, -1 }
    end
  end

  local p, o, e, v
  local pendingVal = {}
  local pendingList = {}
  local flat = redis.call('HGETALL', stateKey)
  for i = 1, #flat, 2 do
    local f = flat[i]
    if f == 'v' then
      v = flat[i + 1]
    elseif f == 'p' then
      p = flat[i + 1]
    elseif f == 'o' then
      o = tonumber(flat[i + 1])
    elseif f == 'e' then
      e = tonumber(flat[i + 1])
    elseif string.byte(f, 1) == 35 then -- '#'
      pendingVal[f] = flat[i + 1]
      pendingList[#pendingList + 1] = f
    end
  end

  -- Cluster fencing: the epoch of the key's last writer, when it wrote from the same partition.
  if e and p == partition and epoch < e then
    return { string.rep('F', n), e, -1 }
  end

  local reply = { '', o or -1, tonumber(p) or -1 }
  local letters = {}
  local hdel = {}
  local hset = {}

  -- Prune pending entries the committed offset has passed (same partition only).
  if p == partition and watermark >= 0 then
    for _, f in ipairs(pendingList) do
      if tonumber(string.sub(f, 2)) < watermark then
        hdel[#hdel + 1] = f
        pendingVal[f] = nil
      end
    end
  end

  local vDirty = false
  local function flushValue()
    if vDirty then
      if v == nil then
        redis.call('HDEL', stateKey, 'v')
      else
        redis.call('HSET', stateKey, 'v', v)
      end
      vDirty = false
    end
  end

  local fenceDirty = false
  for i = 1, n do
    c = starts[i]
    local offStr = argv[c]
    local off = tonumber(offStr)
    local opMode = argv[c + 1]
    local op = string.sub(opMode, 1, -2)
    local mode = string.sub(opMode, -1)
    local a1 = argv[c + 2]
    c = c + 3
    local expected, given
    if op == 'cas' then
      expected = argv[c]
      c = c + 1
    end
    if mode == '1' then
      given = argv[c]
      c = c + 1
    end

    local verdict
    if o == nil then
      verdict = 'A'
    elseif p ~= partition then
      verdict = 'B'
    elseif off > o then
      verdict = 'A'
    end

    if verdict == nil then
      -- offset <= fence on the same partition: already applied
      local stored = pendingVal['#' .. offStr]
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
      local reason, conflict
      if op == 'set' then
        v = a1
        vDirty = true
      elseif op == 'add' then
        local cur = (v == nil) and 0 or rf_int(v)
        local by = rf_int(a1)
        local sum = cur and by and (cur + by)
        if sum and sum > -RF_EXACT and sum < RF_EXACT then
          v = string.format('%d', sum)
          vDirty = true
        else
          -- Let Redis decide: 64-bit range, or an error on a non-integer value.
          flushValue()
          local r = redis.pcall('HINCRBY', stateKey, 'v', a1)
          if type(r) == 'table' and r.err then
            reason = 'add failed: ' .. r.err
          else
            v = redis.call('HGET', stateKey, 'v')
          end
        end
      elseif op == 'addf' then
        flushValue()
        local r = redis.pcall('HINCRBYFLOAT', stateKey, 'v', a1)
        if type(r) == 'table' and r.err then
          reason = 'addf failed: ' .. r.err
        else
          v = r
        end
      elseif op == 'max' or op == 'min' then
        local x = tonumber(a1)
        local cur = v and tonumber(v)
        if x == nil then
          reason = op .. ' failed: operand is not a number'
        elseif v ~= nil and cur == nil then
          reason = op .. ' failed: stored value is not a number'
        elseif cur == nil or (op == 'max' and x > cur) or (op == 'min' and x < cur) then
          v = a1
          vDirty = true
        end
      elseif op == 'del' then
        v = nil
        vDirty = true
      elseif op == 'cas' then
        local token = '-'
        if o ~= nil then
          token = p .. ':' .. string.format('%d', o)
        end
        if token ~= expected then
          conflict = token
        else
          v = a1
          vDirty = true
        end
      else
        return redis.error_reply('RF_ARGS unknown operation ' .. tostring(op) .. ' in record ' .. i)
      end

      if conflict then
        letters[i] = 'C'
        reply[#reply + 1] = conflict
      else
        if verdict == 'B' then
          -- Offsets of the old partition are incomparable with ours: its pending entries go.
          for _, f in ipairs(pendingList) do
            hdel[#hdel + 1] = f
          end
          pendingVal = {}
          pendingList = {}
        end
        p, o, e = partition, off, epoch
        fenceDirty = true
        local entry
        if reason then
          entry = 'd' .. reason
        elseif mode == '1' then
          entry = 'o' .. given
        elseif mode == '2' then
          entry = v == nil and 'n' or ('o' .. v)
        elseif mode == '3' then
          entry = 'n'
        end
        if entry then
          hset[#hset + 1] = '#' .. offStr
          hset[#hset + 1] = entry
        end
        if reason then
          letters[i] = 'X'
          reply[#reply + 1] = reason
        else
          letters[i] = verdict
          if mode == '2' then
            reply[#reply + 1] = entry
          end
        end
      end
    end
  end

  if vDirty then
    if v == nil then
      hdel[#hdel + 1] = 'v'
    else
      hset[#hset + 1] = 'v'
      hset[#hset + 1] = v
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
    redis.call('HDEL', stateKey, unpack(hdel))
  end
  if #hset > 0 then
    redis.call('HSET', stateKey, unpack(hset))
    if ttl > 0 then
      redis.call('PEXPIRE', stateKey, ttl)
    end
  end
  reply[1] = table.concat(letters)
  return reply
end

--[[
  rf_apply_many: rf_apply for many keys of ONE partition batch in one call (applyMany, applyManyStrict).
  keys[first..]: the state hashes. argv:
    [1] protocol '3', [2] partition, [3] caller epoch, [4] watermark, [5] TTL ms (as rf_apply)
    [6] '1': add each key that gets a pending output to indexKey (ZADD GT <offset of its last output>)
    then per key, in keys order: n, then its n records (as rf_apply)
  Every key's arguments are checked before anything is written. With epochKey (strict fencing) the
  partition's epoch is read once: a stale caller gets F for every record of every key.
  Returns one rf_apply reply per key, in keys order.
]]
local RF_OPS = { set = true, add = true, addf = true, max = true, min = true, del = true, cas = true }

local function rf_apply_many(keys, first, epochKey, indexKey, argv)
  if argv[1] ~= '3' then
    return redis.error_reply('RF_PROTOCOL expected protocol 3, got ' .. tostring(argv[1]))
  end
  local epoch = tonumber(argv[3])
  if not (tonumber(argv[2]) and epoch and tonumber(argv[4]) and tonumber(argv[5])) then
    return redis.error_reply('RF_ARGS malformed apply arguments')
  end
  local useIndex = argv[6] == '1' and indexKey ~= nil
  local subs = {}
  local tops = {}
  local c = 7
  for k = first, #keys do
    local which = 'key ' .. (k - first + 1)
    local n = tonumber(argv[c])
    if not n or n < 1 then
      return redis.error_reply('RF_ARGS ' .. which .. ': bad record count')
    end
    local sub = { argv[1], argv[2], argv[3], argv[4], argv[5], argv[c] }
    c = c + 1
    local top = -1
    for i = 1, n do
      local offStr = argv[c]
      local opMode = argv[c + 1]
      if not tonumber(offStr) or not opMode or argv[c + 2] == nil or not RF_OPS[string.sub(opMode, 1, -2)] then
        return redis.error_reply('RF_ARGS ' .. which .. ' record ' .. i .. ' is malformed')
      end
      local mode = string.sub(opMode, -1)
      local len = 3
      if string.sub(opMode, 1, 3) == 'cas' then
        len = len + 1
      end
      if mode == '1' then
        len = len + 1
      end
      if mode ~= '0' then
        top = tonumber(offStr)
      end
      for j = 0, len - 1 do
        if argv[c + j] == nil then
          return redis.error_reply('RF_ARGS ' .. which .. ' record ' .. i .. ' is malformed')
        end
        sub[#sub + 1] = argv[c + j]
      end
      c = c + len
    end
    subs[#subs + 1] = sub
    tops[#tops + 1] = top
  end
  if c ~= #argv + 1 then
    return redis.error_reply('RF_ARGS malformed apply arguments')
  end

  local out = {}
  if epochKey then
    local current = tonumber(redis.call('GET', epochKey) or '0')
    if epoch < current then
      for i, sub in ipairs(subs) do
        out[i] = { string.rep('F', tonumber(sub[6])), current, -1 }
      end
      return out
    end
  end
  local zadd = {}
  for i, sub in ipairs(subs) do
    local key = keys[first + i - 1]
    local r = rf_apply(key, nil, sub)
    if r.err then
      return r -- not reached: the arguments were checked above
    end
    out[i] = r
    if useIndex and tops[i] >= 0 and string.sub(r[1], 1, 1) ~= 'F' then
      zadd[#zadd + 1] = tops[i]
      zadd[#zadd + 1] = key
    end
  end
  if #zadd > 0 then
    redis.call('ZADD', indexKey, 'GT', unpack(zadd))
  end
  return out
end
