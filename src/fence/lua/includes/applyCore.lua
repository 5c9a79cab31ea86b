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
    [1] protocol version, must be '1'
    [2] partition of every record in this call
    [3] caller epoch (the partition epoch the caller acquired)
    [4] watermark: the partition's committed offset (next offset to consume); -1 when unknown.
        Pending entries with offset < watermark are pruned.
    [5] TTL in milliseconds, refreshed on every write; 0 for none
    [6] n, the number of records
    then 6 entries per record, in increasing offset order:
      offset, op, arg1, arg2, output mode, output bytes
      op:   set (arg1 = value) | add (arg1 = integer) | addf (arg1 = float) | max (arg1) | min (arg1)
            | del | cas (arg1 = new value, arg2 = expected fence token '<partition>:<offset>' or '-')
      mode: '0' no output | '1' the given bytes | '2' the value after this record | '3' a null output

  Returns a flat array, 3 entries per record: verdict, number, payload
    'A' APPLY   number = offset gap (offset - last - 1; -1 for a new key), payload = output when mode '2'
    'B' REBASE  number = previous partition, payload = output when mode '2'
    'S' SKIP    number = 0
    'R' REEMIT  number = 0, payload = the stored pending entry (kind byte + bytes)
    'F' FENCE   number = the newer epoch that fenced the caller (every record of the call)
    'C' CONFLICT number = 0, payload = the current fence token ('-' when none)
    'X' REJECT  number = 0, payload = the reason; the fence moves and a 'd' pending entry is kept
  Errors: 'RF_PROTOCOL ...' or 'RF_ARGS ...' on malformed arguments (nothing written).
]]
local function rf_apply(stateKey, epochKey, argv)
  if argv[1] ~= '1' then
    return redis.error_reply('RF_PROTOCOL expected protocol 1, got ' .. tostring(argv[1]))
  end
  local partition = argv[2]
  local epoch = tonumber(argv[3])
  local watermark = tonumber(argv[4])
  local ttl = tonumber(argv[5])
  local n = tonumber(argv[6])
  if not (epoch and watermark and ttl and n) or #argv ~= 6 + n * 6 then
    return redis.error_reply('RF_ARGS malformed apply arguments')
  end

  local reply = {}
  local function fenceAll(by)
    for i = 1, n do
      reply[#reply + 1] = 'F'
      reply[#reply + 1] = by
      reply[#reply + 1] = false
    end
    return reply
  end

  -- Strict fencing: a single Redis can read the partition's epoch itself (another hash slot).
  if epochKey then
    local current = tonumber(redis.call('GET', epochKey) or '0')
    if epoch < current then
      return fenceAll(current)
    end
  end

  local p, o, e, v
  local pendingFields = {}
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
      pendingFields[#pendingFields + 1] = f
    end
  end

  -- Cluster fencing: the epoch of the key's last writer, when it wrote from the same partition.
  if e and p == partition and epoch < e then
    return fenceAll(e)
  end

  -- Prune pending entries the committed offset has passed (same partition only).
  local pending = {}
  if #pendingFields > 0 and p == partition then
    local prune = {}
    for _, f in ipairs(pendingFields) do
      if watermark >= 0 and tonumber(string.sub(f, 2)) < watermark then
        prune[#prune + 1] = f
      else
        pending[f] = true
      end
    end
    if #prune > 0 then
      redis.call('HDEL', stateKey, unpack(prune))
    end
  end

  local wrote = false
  local fenceDirty = false
  for i = 1, n do
    local b = 6 + (i - 1) * 6
    local offStr = argv[b + 1]
    local off = tonumber(offStr)
    local op = argv[b + 2]
    local a1 = argv[b + 3]
    local a2 = argv[b + 4]
    local mode = argv[b + 5]
    if not off then
      return redis.error_reply('RF_ARGS offset of record ' .. i .. ' is not a number')
    end

    local verdict, number = nil, 0
    if o == nil then
      verdict, number = 'A', -1
    elseif p ~= partition then
      verdict, number = 'B', tonumber(p) or -1
    elseif off > o then
      verdict, number = 'A', off - o - 1
    end

    if verdict == nil then
      -- offset <= fence on the same partition: already applied
      local field = '#' .. offStr
      local stored = pending[field] and redis.call('HGET', stateKey, field)
      if stored then
        reply[#reply + 1] = 'R'
        reply[#reply + 1] = 0
        reply[#reply + 1] = stored
      else
        reply[#reply + 1] = 'S'
        reply[#reply + 1] = 0
        reply[#reply + 1] = false
      end
      if e == nil or epoch > e then
        e = epoch
        fenceDirty = true
      end
    else
      local reason = nil
      local conflict = nil
      if op == 'set' then
        v = a1
        redis.call('HSET', stateKey, 'v', v)
      elseif op == 'add' or op == 'addf' then
        local r = redis.pcall(op == 'add' and 'HINCRBY' or 'HINCRBYFLOAT', stateKey, 'v', a1)
        if type(r) == 'table' and r.err then
          reason = op .. ' failed: ' .. r.err
        else
          v = redis.call('HGET', stateKey, 'v') -- exact text; Lua numbers would round past 2^53
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
          redis.call('HSET', stateKey, 'v', v)
        end
      elseif op == 'del' then
        if v ~= nil then
          redis.call('HDEL', stateKey, 'v')
        end
        v = nil
      elseif op == 'cas' then
        local token = '-'
        if o ~= nil then
          token = p .. ':' .. string.format('%d', o)
        end
        if token ~= a2 then
          conflict = token
        else
          v = a1
          redis.call('HSET', stateKey, 'v', v)
        end
      else
        return redis.error_reply('RF_ARGS unknown operation ' .. tostring(op) .. ' in record ' .. i)
      end

      if conflict then
        reply[#reply + 1] = 'C'
        reply[#reply + 1] = 0
        reply[#reply + 1] = conflict
      else
        if verdict == 'B' then
          -- Offsets of the old partition are incomparable with ours: its pending entries go.
          if #pendingFields > 0 then
            redis.call('HDEL', stateKey, unpack(pendingFields))
          end
          pending = {}
          pendingFields = {}
        end
        p, o, e = partition, off, epoch
        fenceDirty = true
        wrote = true

        local entry = false
        if reason then
          entry = 'd' .. reason
        elseif mode == '1' then
          entry = 'o' .. argv[b + 6]
        elseif mode == '2' then
          entry = v == nil and 'n' or ('o' .. v)
        elseif mode == '3' then
          entry = 'n'
        end
        if entry then
          redis.call('HSET', stateKey, '#' .. offStr, entry)
          pending['#' .. offStr] = true
        end

        if reason then
          reply[#reply + 1] = 'X'
          reply[#reply + 1] = 0
          reply[#reply + 1] = reason
        else
          reply[#reply + 1] = verdict
          reply[#reply + 1] = number
          reply[#reply + 1] = (mode == '2') and entry or false
        end
      end
    end
  end

  if fenceDirty then
    redis.call('HSET', stateKey, 'p', p, 'o', string.format('%d', o or -1), 'e', string.format('%d', e))
    wrote = true
  end
  if wrote and ttl > 0 then
    redis.call('PEXPIRE', stateKey, ttl)
  end
  return reply
end
