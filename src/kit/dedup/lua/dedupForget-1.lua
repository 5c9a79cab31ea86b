--[[
  dedupForget: removes an id's mark, so the next sighting is treated as the first (the work it filtered
  failed and must be redone).

  KEYS[1]  mark          <base>:m
  Returns  1 removed; 0 there was none. Idempotent.
]]
return redis.call('DEL', KEYS[1])
