-- The writes at the end of a key call (included by keyCallCore.lua, after its state): the windows,
-- window hashes and sessions the call changed, then the fence hash.
-- Writes a key call's windows, window hashes and sessions (the fence hash: by the caller).
local function rf_write()
  local hashes = nil -- window hash KEYS indexes written (their expiry is set below)
  for d = 1, nDirty do
    local slot = DirtyL[d]
    local v = Wcur[slot]
    local x = DirtyX[d]
    local hk = Ehkey[x]
    if hk then -- a window hash's field (its slot: a string)
      hashes = hashes or {}
      hashes[hk] = true
      -- its final mark `f<start>` goes with the value
      if v and Wfinal[slot] then
        rcall('HSET', KEYS[hk], Efield[x], v, 'f' .. Efield[x], '1')
      elseif v then
        rcall('HSET', KEYS[hk], Efield[x], v)
      else
        rcall('HDEL', KEYS[hk], Efield[x], 'f' .. Efield[x])
      end
    else
      -- a window key: `v` (and `f` once final: the marker goes with the value) and `t`
      local key, tv = KEYS[slot], WcurT[slot]
      if v and tv then
        if Wfinal[slot] then
          rcall('HSET', key, 'v', v, 't', tv, 'f', '1')
        else
          rcall('HSET', key, 'v', v, 't', tv)
        end
      elseif v then
        if Wfinal[slot] then
          rcall('HSET', key, 'v', v, 'f', '1')
        else
          rcall('HSET', key, 'v', v)
        end
        if WhadT[slot] then
          rcall('HDEL', key, 't')
        end
      elseif tv then
        rcall('HSET', key, 't', tv)
        rcall('HDEL', key, 'v', 'f')
      else
        rcall('HDEL', key, 'v', 'f', 't')
      end
      if Exp[slot] then
        rcall('PEXPIREAT', key, Exp[slot])
      end
    end
  end
  if hashes then
    for hk in pairs(hashes) do
      if Exp[hk] then
        rcall('PEXPIREAT', KEYS[hk], Exp[hk])
      end
    end
  end
  sessionsWrite()
end

-- Writes the fence hash: its kv slots written, the pending entries to set and delete (Hset, Hdel), and
-- p, o and e when the call moved the fence, each only where its text changes (p0, o0, e0: stored).
local function rf_write_fence(hash, fenceDirty, p, o, e, oS, p0, o0, e0)
  if KVdirty then
    for slot in pairs(KVdirty) do
      local v = KV[slot]
      if v then
        Hset[nHset + 1], Hset[nHset + 2] = slot, v
        nHset = nHset + 2
      else
        nHdel = nHdel + 1
        Hdel[nHdel] = slot
      end
    end
  end
  if fenceDirty then
    -- (a digit text is canonical when it has one digit or starts at '1' or above: no call into C)
    if not (oS and #oS < 16 and (#oS == 1 or oS >= '1')) then
      oS = fmt('%d', o or -1)
    end
    if e ~= epochN then
      epochN, epochS = e, fmt('%d', e)
    end
    if p ~= p0 then
      Hset[nHset + 1], Hset[nHset + 2] = 'p', p
      nHset = nHset + 2
    end
    if oS ~= o0 then
      Hset[nHset + 1], Hset[nHset + 2] = 'o', oS
      nHset = nHset + 2
    end
    if epochS ~= e0 then
      Hset[nHset + 1], Hset[nHset + 2] = 'e', epochS
      nHset = nHset + 2
    end
  end
  -- (the common short lists passed as they are: unpack is a call into C)
  if nHdel == 1 then
    rcall('HDEL', hash, Hdel[1])
  elseif nHdel > 0 then
    rcall('HDEL', hash, unpack(Hdel, 1, nHdel))
  end
  if nHset == 4 then
    rcall('HSET', hash, Hset[1], Hset[2], Hset[3], Hset[4])
  elseif nHset == 2 then
    rcall('HSET', hash, Hset[1], Hset[2])
  elseif nHset > 0 then
    rcall('HSET', hash, unpack(Hset, 1, nHset))
  end
end
