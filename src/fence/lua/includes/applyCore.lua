--[[
  applyCore: the decision table of the fence, shared by the apply scripts (applyRecords-1 and
  applyMany-N: cluster fencing; applyRecordsStrict-3 and applyManyStrict-N: strict fencing). Handles
  every record of each key of ONE partition batch, in offset order, atomically.
  (Over 400 lines: the decision table and its ops are one body the apply scripts inline whole.)

  Hash fields of a state key:
    v            the value (absent after a delete: tombstone)
    p            partition of the last applied record
    o            offset of the last applied record (the fence)
    e            epoch of the last writer (raised by replaying owners too)
    #<offset>    a pending entry for that offset, kept until the partition's committed offset passes it:
                   'o' .. bytes   an output to (re-)emit
                   'n'            a null (tombstone) output to (re-)emit
                   'd' .. reason  a dead letter to (re-)emit (the record was rejected)

  ARGV (protocol 6, the same for the one-key and the many-key scripts):
    [1] protocol version, must be '6'
    [2] partition of every record in this call
    [3] caller epoch (the partition epoch the caller acquired)
    [4] watermark: the partition's committed offset (next offset to consume); -1 when unknown.
        Pending entries with offset < watermark are pruned.
    [5] TTL in milliseconds, refreshed on every write; 0 for none
    [6] '1': add each key that gets a pending output to the partition's pending index (ZADD GT <highest
        offset with an output>; only the strict scripts have the index key); '0': the caller does it
    then per key, in KEYS order (protocol 5 sent each key's number of records first: the text says it):
      the record text: per record, in increasing offset order, '<offset>,<op><mode>,<number>;'
        op (one letter): s set | a add (number = a canonical decimal integer) | f addf (a float)
              | x max | n min | d del | c cas; <number> is empty for s, d and c
        mode (one digit): '0' no output | '1' the given bytes | '2' the value after this record
              | '3' a null output | '4' a dead letter the caller made (its reducer threw), the given
              bytes its reason: the value is not changed, the fence moves, a 'd' entry is kept and the
              verdict is X (a cas still checks its token first), so a replay re-emits the dead letter
      then the records' binary arguments, in record order: s -> the value; c -> the new value, then the
        expected fence token '<partition>:<offset>', '<partition>:<offset>:<generation>' (the key has
        field g, written by a writer outside the owner: reconcile --repair) or '-'; mode 1 -> the output
        bytes, mode 4 -> the dead letter's reason (after those)
  Returns, per key, in KEYS order, one flat list (the one-key scripts: that key's part alone):
  verdicts, number, previousPartition, payload... -- the caller knows where a key's part ends from its
  verdicts and output modes (protocols 4 and before replied a list per key: Redis makes each table of a script's
  reply into RESP after looking it up for seven special fields, a tenth of the script's cost)
    verdicts: one letter per record, in order:
      'A' APPLY    'B' REBASE   'S' SKIP   'R' REEMIT   'F' FENCE (then every letter is F)
      'C' CONFLICT (compare-and-set: the fence moved; nothing written for that record)
      'X' REJECT   (the operation cannot apply to the stored value, or mode 4; the fence moves, a 'd'
                   entry is kept)
    number: with F, the newer epoch that fenced the caller; else the key's offset before the call (-1: none)
    previousPartition: the key's partition before the call (-1: none)
    payload: one per record that has one, in order: R -> the stored entry; A/B with mode '2' -> the
      new entry; C -> the current fence token ('-' when none); X -> the reason
  Writes per key: all at the end, one HDEL (pruned entries, tombstone) and one HSET (value, fence, new
  entries), except when an operation needs Redis itself to decide (float add, integers beyond 2^53).
  Every key's arguments are checked before anything is read or written. With the epoch key (strict
  fencing) the partition's epoch is read once: a stale caller gets F for every record of every key.
  Errors: 'RF_PROTOCOL ...' or 'RF_ARGS ...' on malformed arguments (nothing written).

  Cost notes (Redis CPU is mostly this script's Lua; the client's is mostly per argument): a record
  is one anchored string.find over the record text (no ARGV entries for offsets, ops and numbers),
  offsets are converted to numbers once, op and mode are bytes, and an integer value is parsed once
  per call and then carried as a number.
]]
local RF_EXACT = 9007199254740992 -- 2^53: Lua numbers are exact integers below it

-- A canonical decimal integer of the exact range, or nil (the stored value: any bytes).
local function rf_int(s)
  if s == '0' or (s and string.find(s, '^-?[1-9]%d*$')) then
    local n = s + 0 -- a decimal integer by the pattern: one conversion (tonumber makes two)
    if n > -RF_EXACT and n < RF_EXACT then
      return n
    end
  end
  return nil
end

local function rf_flush(key, v)
  if v == nil then
    redis.call('HDEL', key, 'v')
  else
    redis.call('HSET', key, 'v', v)
  end
end

-- Lists every key of a call fills and reads by its own count (never by #, ipairs or unpack without
-- bounds), so one of each serves all the call's keys: a table made per key is an allocation, its
-- reallocations as it grows, and collector work. Made anew by every script call (the script's body
-- runs per call), so nothing carries over from one call to the next.
local rf_pend = { false } -- indexes into a key's HGETALL reply of its pending entries' fields
local rf_letters = { false } -- a key's verdict letters
local rf_hdel = { false } -- fields a key's HDEL removes
-- room for one record's writes (its entry, the value, the fence): a table grown from empty by
-- appends is reallocated at 1, 2, 4 and 8 entries
local rf_hset = { false, false, false, false, false, false, false, false, false, false }
-- an add's operand text -> its number when an exact integer, else false: operands repeat in a call
-- (by 1 most of all), and tonumber converts a text twice
local rf_by = {}

-- One key: its n records are records j .. j + n - 1 of the split record texts (see rf_apply_many:
-- offsets as numbers and as text, op and mode bytes, arg1, cas tokens and output bytes; the last two
-- nil when no record has one). Appends the key's reply to out after its first nOut entries; returns
-- the new count and whether the key fenced the caller.
local function rf_key(out, nOut, key, j, n, offs, offStrs, obs, mbs, a1s, exps, givens, partition, partitionNum, epoch, epochStr, watermark, ttl)
  local p, o, e, v, g -- g: the generation, bumped by writers outside the owner (absent: none)
  local eSame = false -- the stored e is the caller's epoch argument, byte for byte
  local pend = rf_pend -- nPend of them
  local nPend = 0
  local pendingVal -- field -> entry, built on the first replay only
  local flat = redis.call('HGETALL', key)
  for i = 1, #flat, 2 do
    local f = flat[i]
    if f == 'v' then
      v = flat[i + 1]
    elseif f == 'p' then
      p = flat[i + 1]
    elseif f == 'o' then
      o = tonumber(flat[i + 1]) -- not `+ 0`: a stored o that is not a number reads as none, never an error
    elseif f == 'e' then
      local e0 = flat[i + 1]
      if e0 == epochStr then -- most often the caller's own epoch
        e, eSame = epoch, true
      else
        e = tonumber(e0)
      end
    elseif f == 'g' then
      g = flat[i + 1]
    elseif string.byte(f, 1) == 35 then -- '#'
      nPend = nPend + 1
      pend[nPend] = i
    end
  end

  local pSame = p == partition -- the stored p is this call's partition, byte for byte

  -- Cluster fencing: the epoch of the key's last writer, when it wrote from the same partition.
  if e and p == partition and epoch < e then
    out[nOut + 1], out[nOut + 2], out[nOut + 3] = string.rep('F', n), e, -1
    return nOut + 3, true
  end

  local at = nOut + 1 -- the letters' place, set at the end
  out[at], out[at + 1], out[at + 2] = false, o or -1, p == partition and partitionNum or tonumber(p) or -1
  nOut = at + 2
  local letters = rf_letters -- letters[1 .. n], every one set
  local hdel = rf_hdel -- nHdel of them
  local hset = rf_hset -- nHset of them
  local nHset = 0

  -- Prune pending entries the committed offset has passed (same partition only). Every pending entry
  -- is at or below the fence offset o (entries are written by records that move the fence, and a
  -- REBASE drops the old partition's), so a watermark above o prunes them all without reading one.
  local nHdel = 0
  if p == partition and watermark >= 0 and nPend > 0 then
    if watermark > o then
      for q = 1, nPend do
        hdel[q] = flat[pend[q]]
      end
      nHdel = nPend
      nPend = 0
    else
      local nKeep = 0 -- the kept ones move down in pend itself (nKeep <= q)
      for q = 1, nPend do
        local i = pend[q]
        local f = flat[i]
        if tonumber(string.sub(f, 2)) < watermark then
          nHdel = nHdel + 1
          hdel[nHdel] = f
        else
          nKeep = nKeep + 1
          pend[nKeep] = i
        end
      end
      nPend = nKeep
    end
  end

  local vDirty = false
  local vnum -- v as an exact integer (false: not one), nil until an add needs it
  -- fenceDirty: p, o and e move (a record applied: e is the caller's epoch, o the text offStr of the
  -- last one); eDirty: e alone (a replay by a newer epoch)
  local fenceDirty, eDirty = false, false
  local oStr
  for i = 1, n do
    local offStr = offStrs[j]
    local off = offs[j]
    local ob, mb = obs[j], mbs[j]
    local a1 = a1s[j]
    local expected = exps and exps[j]
    local given = givens and givens[j]
    j = j + 1

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
      if not pendingVal then
        pendingVal = {}
        for q = 1, nPend do
          local i = pend[q]
          pendingVal[flat[i]] = flat[i + 1]
        end
      end
      local stored = pendingVal['#' .. offStr]
      if stored then
        letters[i] = 'R'
        nOut = nOut + 1
        out[nOut] = stored
      else
        letters[i] = 'S'
      end
      if e == nil or epoch > e then
        e = epoch
        eDirty = true
      end
    else
      local reason, conflict
      if mb == 52 and ob ~= 99 then -- mode 4: a dead letter, the value kept (a cas checks its token below)
        reason = given
      elseif ob == 97 then -- a: add
        if vnum == nil then
          if v == nil then
            vnum = 0
          else
            vnum = rf_int(v) or false
          end
        end
        local by = rf_by[a1]
        if by == nil then
          by = tonumber(a1)
          if not (by and by % 1 == 0 and by > -RF_EXACT and by < RF_EXACT) then
            by = false
          end
          rf_by[a1] = by
        end
        local sum
        if vnum and by then
          sum = vnum + by
        end
        if sum and sum > -RF_EXACT and sum < RF_EXACT then
          vnum = sum
          v = string.format('%d', sum)
          vDirty = true
        else
          -- Let Redis decide: 64-bit range, or an error on a non-integer value.
          if vDirty then
            rf_flush(key, v)
            vDirty = false
          end
          vnum = nil
          local r = redis.pcall('HINCRBY', key, 'v', a1)
          if type(r) == 'table' and r.err then
            reason = 'add failed: ' .. r.err
          else
            v = redis.call('HGET', key, 'v')
          end
        end
      elseif ob == 115 then -- s: set
        v = a1
        vnum = nil
        vDirty = true
      elseif ob == 102 then -- f: addf
        if vDirty then
          rf_flush(key, v)
          vDirty = false
        end
        vnum = nil
        local r = redis.pcall('HINCRBYFLOAT', key, 'v', a1)
        if type(r) == 'table' and r.err then
          reason = 'addf failed: ' .. r.err
        else
          v = r
        end
      elseif ob == 120 or ob == 110 then -- x: max, n: min
        local name = ob == 120 and 'max' or 'min'
        local x = tonumber(a1)
        local cur = v and tonumber(v)
        if x == nil then
          reason = name .. ' failed: operand is not a number'
        elseif v ~= nil and cur == nil then
          reason = name .. ' failed: stored value is not a number'
        elseif cur == nil or (ob == 120 and x > cur) or (ob == 110 and x < cur) then
          v = a1
          vnum = nil
          vDirty = true
        end
      elseif ob == 100 then -- d: del
        v = nil
        vnum = nil
        vDirty = true
      else -- c: cas (the letters were checked before)
        local token = '-'
        if o ~= nil then
          token = p .. ':' .. string.format('%d', o)
          if g then
            token = token .. ':' .. g
          end
        end
        if token ~= expected then
          conflict = token
        elseif mb == 52 then
          reason = given
        else
          v = a1
          vnum = nil
          vDirty = true
        end
      end

      if conflict then
        letters[i] = 'C'
        nOut = nOut + 1
        out[nOut] = conflict
      else
        if verdict == 'B' then
          -- Offsets of the old partition are incomparable with ours: its pending entries go.
          for q = 1, nPend do
            nHdel = nHdel + 1
            hdel[nHdel] = flat[pend[q]]
          end
          nPend = 0
          pendingVal = {}
        end
        p, o, e, oStr = partition, off, epoch, offStr
        fenceDirty = true
        local entry
        if reason then
          entry = 'd' .. reason
        elseif mb == 50 then -- '2'
          entry = v == nil and 'n' or ('o' .. v)
        elseif mb == 49 then
          entry = 'o' .. given
        elseif mb == 51 then
          entry = 'n'
        end
        if entry then
          hset[nHset + 1] = '#' .. offStr
          hset[nHset + 2] = entry
          nHset = nHset + 2
        end
        if reason then
          letters[i] = 'X'
          nOut = nOut + 1
          out[nOut] = reason
        else
          letters[i] = verdict
          if mb == 50 then
            nOut = nOut + 1
            out[nOut] = entry
          end
        end
      end
    end
  end

  if vDirty then
    if v == nil then
      nHdel = nHdel + 1
      hdel[nHdel] = 'v'
    else
      hset[nHset + 1] = 'v'
      hset[nHset + 2] = v
      nHset = nHset + 2
    end
  end
  -- e is written only as the caller's epoch, so as its own argument's text (a number formatted once).
  -- p and e are written only when their stored text differs: most calls find the key last written by
  -- the same partition and epoch, and each field HSET sets is a listpack search and an argument.
  if fenceDirty then
    local h = nHset
    if not pSame then
      hset[h + 1], hset[h + 2] = 'p', p
      h = h + 2
    end
    hset[h + 1], hset[h + 2] = 'o', oStr
    h = h + 2
    if not eSame then
      hset[h + 1], hset[h + 2] = 'e', epochStr
      h = h + 2
    end
    nHset = h
  elseif eDirty then
    hset[nHset + 1], hset[nHset + 2] = 'e', epochStr
    nHset = nHset + 2
  end
  if nHdel == 1 then
    redis.call('HDEL', key, hdel[1])
  elseif nHdel > 0 then
    redis.call('HDEL', key, unpack(hdel, 1, nHdel))
  end
  if nHset > 0 then
    redis.call('HSET', key, unpack(hset, 1, nHset))
    if ttl > 0 then
      redis.call('PEXPIRE', key, ttl)
    end
  end
  out[at] = n == 1 and letters[1] or table.concat(letters, '', 1, n)
  return nOut, false
end

-- Binary arguments by op letter (s a f x n d c), before the output bytes; nil: unknown op.
local RF_EXTRA = { [115] = 1, [97] = 0, [102] = 0, [120] = 0, [110] = 0, [100] = 0, [99] = 2 }
-- A record's op letter and mode digit ('a2') as bytes, by table look-up (a call of string.byte costs
-- as much as a short pattern match); nil: an unknown op or a mode above 4.
-- stylua: ignore start
local RF_OB = { s0 = 115, s1 = 115, s2 = 115, s3 = 115, s4 = 115, a0 = 97, a1 = 97, a2 = 97, a3 = 97, a4 = 97, f0 = 102, f1 = 102, f2 = 102, f3 = 102, f4 = 102, x0 = 120, x1 = 120, x2 = 120, x3 = 120, x4 = 120, n0 = 110, n1 = 110, n2 = 110, n3 = 110, n4 = 110, d0 = 100, d1 = 100, d2 = 100, d3 = 100, d4 = 100, c0 = 99, c1 = 99, c2 = 99, c3 = 99, c4 = 99 }
local RF_MB = { s0 = 48, s1 = 49, s2 = 50, s3 = 51, s4 = 52, a0 = 48, a1 = 49, a2 = 50, a3 = 51, a4 = 52, f0 = 48, f1 = 49, f2 = 50, f3 = 51, f4 = 52, x0 = 48, x1 = 49, x2 = 50, x3 = 51, x4 = 52, n0 = 48, n1 = 49, n2 = 50, n3 = 51, n4 = 52, d0 = 48, d1 = 49, d2 = 50, d3 = 51, d4 = 52, c0 = 48, c1 = 49, c2 = 50, c3 = 51, c4 = 52 }
-- stylua: ignore end

--[[
  rf_apply_many: keys[first..last] are the state hashes, their records in argv (see above). epochKey:
  strict fencing (nil: cluster fencing); indexKey: the partition's pending index (nil: none).
  Returns the keys' replies as one flat list, or an error reply.
]]
local function rf_apply_many(keys, first, last, epochKey, indexKey, argv)
  if argv[1] ~= '6' then
    return redis.error_reply('RF_PROTOCOL expected protocol 6, got ' .. tostring(argv[1]))
  end
  local partition = argv[2]
  local partitionNum = tonumber(partition)
  local epoch = tonumber(argv[3])
  local watermark = tonumber(argv[4])
  local ttl = tonumber(argv[5])
  if not (partitionNum and epoch and watermark and ttl) then
    return redis.error_reply('RF_ARGS malformed apply arguments')
  end
  local useIndex = argv[6] == '1' and indexKey ~= nil

  -- Check every key's arguments before anything is read or written, and split the record texts.
  local offs, offStrs, obs, mbs, a1s = {}, {}, {}, {}, {}
  local exps, givens -- only when a record has one
  local firsts = {}
  local counts = {}
  local tops = {}
  local c = 7 -- cursor into argv
  local j = 1 -- record number over all keys
  for k = first, last do
    local spec = argv[c]
    if not spec or spec == '' then
      return redis.error_reply('RF_ARGS key ' .. (k - first + 1) .. ': no record text')
    end
    c = c + 1
    firsts[k] = j
    local pos = 1
    local size = #spec
    local top
    local i = 0
    repeat -- each record's find is anchored at pos and ends at its ';': the text is read to its end
      i = i + 1
      local _, e, offStr, om, num = string.find(spec, '^(%d+),(%a%d),([^;]*);', pos)
      local ob, mb
      if e then
        ob, mb = RF_OB[om], RF_MB[om]
      end
      local len = ob and RF_EXTRA[ob]
      if not len then
        return redis.error_reply('RF_ARGS key ' .. (k - first + 1) .. ' record ' .. i .. ' is malformed')
      end
      pos = e + 1
      offs[j], offStrs[j], obs[j], mbs[j] = offStr + 0, offStr, ob, mb -- digits: one conversion
      if len == 0 then
        a1s[j] = num
      else
        a1s[j] = argv[c]
        if ob == 99 then
          exps = exps or {}
          exps[j] = argv[c + 1]
        end
      end
      c = c + len
      if mb ~= 48 then
        top = offStr
        if mb == 49 or mb == 52 then
          givens = givens or {}
          givens[j] = argv[c]
          c = c + 1
        end
      end
      if argv[c - 1] == nil then
        return redis.error_reply('RF_ARGS key ' .. (k - first + 1) .. ' record ' .. i .. ' is malformed')
      end
      j = j + 1
    until pos > size
    counts[k] = i
    tops[k] = top
  end
  if c ~= #argv + 1 then
    return redis.error_reply('RF_ARGS malformed apply arguments')
  end

  local out = {}
  local nOut = 0
  if epochKey then
    local current = tonumber(redis.call('GET', epochKey) or '0')
    if epoch < current then
      for k = first, last do
        out[nOut + 1], out[nOut + 2], out[nOut + 3] = string.rep('F', counts[k]), current, -1
        nOut = nOut + 3
      end
      return out
    end
  end
  local zadd = {}
  local nZadd = 0
  local epochStr = argv[3]
  for k = first, last do
    local key = keys[k]
    local fenced
    nOut, fenced = rf_key(out, nOut, key, firsts[k], counts[k], offs, offStrs, obs, mbs, a1s, exps, givens, partition, partitionNum, epoch, epochStr, watermark, ttl)
    if useIndex and not fenced and tops[k] then
      zadd[nZadd + 1] = tops[k]
      zadd[nZadd + 2] = key
      nZadd = nZadd + 2
    end
  end
  if nZadd == 2 then
    redis.call('ZADD', indexKey, 'GT', zadd[1], zadd[2])
  elseif nZadd > 0 then
    redis.call('ZADD', indexKey, 'GT', unpack(zadd))
  end
  return out
end

-- The one-key scripts: the key's reply alone (or the error): the many-key reply of one key.
local function rf_apply_one(key, epochKey, indexKey, argv)
  return rf_apply_many({ key }, 1, 1, epochKey, indexKey, argv)
end
