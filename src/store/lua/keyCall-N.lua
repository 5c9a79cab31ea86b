--[[
  keyCall: one key call of the store interface (docs/architecture.md, "The store interface"): every
  record of one fence key from one partition batch, in increasing offset order, decided once against
  the key's fence (the decision table of src/fence/lua/includes/applyCore.lua, cluster fencing: the
  epoch of the key's last writer is kept in its hash) and, on APPLY/REBASE, every effect of the record
  on the key's stores made in order, all or none, the results kept pending when the record emits.
  Every key of a call is in the fence key's slot {<app>:<key>}, so it runs on Redis Cluster.

  KEYS[1]    the fence hash rf:{<app>:<key>}: p partition, o offset, e writer epoch, v the value of
             store 0, v:<store> the value of another key-value store, #<offset> pending entries
  KEYS[2..]  the window keys the call touches, rf:{<app>:<key>}:w:<store>:<start>: v the window's value,
             t its time field (e.g. its timestamp), f the final marker (kept with v), the session hashes, rf:{<app>:<key>}:s:<store>: one field
             '<start>:<end>' per session, its value, and the window hashes, rf:{<app>:<key>}:h:<store>:
             one field '<start>' per window, its value, and 'f<start>' its final marker (kept with
             '<start>'); each must start with KEYS[1] .. ':w:', ':s:'
             or ':h:' (checked: else RF_ARGS)
  ARGV[1]    protocol version, must be 's3'
  ARGV[2]    partition of every record in this call
  ARGV[3]    caller epoch (the partition epoch the caller acquired)
  ARGV[4]    committed offset of the partition (next offset to consume), -1 when unknown: pending
             entries below it are pruned
  ARGV[5]    expected token: '' none; '-' the key must have no fence; '<p>:<o>' the key's fence must be
             partition p, offset o (a read-then-write caller's check: else every record is C CONFLICT,
             nothing written, the current token returned)
  ARGV[6]    record text: per record '<offset>,<emit>,<n>;' followed by its n effects, each
             '<kind><op><target>,<expireAt>,<operand>;', or, for a record of exactly a window's value
             and time effects with one expireAt, '<offset>,<emit>,W<op><op><target>,<expireAt>,
             <operand>,<operand>;' (the two effects w and t in one text, read in one pattern find;
             protocol s3, s2 had only the general form)
               kind: k kv (target: the store id; 0 is field v) | w window (target: its KEYS index)
                     | t a window's time field t (target: its KEYS index)
                     | f final (target: the window's KEYS index, op '-', operand '' its value or
                       't' its time field: each once, the window marked final when the record's
                       effects are made, so one record takes both; or a
                       session hash's KEYS index and operand '<start>:<end>': that session's value,
                       nothing marked; or a window hash's KEYS index and operand 'h<start>': that
                       field's value, once, marked 'f<start>', or 't<start>': a timestamp field's
                       value, nothing marked)
                     | h a window hash's field (target: the hash's KEYS index; operand
                       '<operand>@<start>', the field)
                     | p a note (op 's', target 0): nothing changes, its result is its value
                     | s session (target: the session hash's KEYS index; op a, x, n, s or d; operand
                       '<operand>@<time>@<lowEnd>@<highStart>@<closeTime>@<dropBefore>': the sessions
                       with end >= lowEnd and start <= highStart merge with [time, time] (values summed
                       for a, extreme for x/n), then the op applies (s: the merged session takes the
                       set value, d: it is removed; the caller computed it from a read); a merged end
                       below closeTime is late (nothing changes); sessions ending before dropBefore
                       are removed)
               op: s set | a add (operand: a canonical integer) | x max | n min (operand: a number)
                   | d delete
               expireAt: window, window hash and session effects only, ms since the epoch: the key's
                 PEXPIREAT (a hash's: the largest of the call's)
  ARGV[7..]  the values of the set effects, in record and effect order
  Returns    {verdicts, number, previousPartition, payload...}
    verdicts: one letter per record: A APPLY, B REBASE, S SKIP, R REEMIT, X REJECT, F FENCE (all F),
      C CONFLICT (all C: the expected token differs; the one payload is the current token, '-' none)
    number: with F, the epoch that fenced the caller; else the key's offset before the call (-1: none)
    previousPartition: the key's partition before the call (-1: none)
    payload: per record that has one, in order: R -> its stored entry; A/B with emit 1 -> its new
      entry; X -> the reason. An entry is 'r' then per effect '-' (no value) or '<length>:<bytes>'
      (kv, window, window hash: the field's value after the effect; final: the window's field, once; a
      note: its value) or, for a session,
      's<length>:<start>,<end>,<state>[,<removed start>,<removed end>]*;<value>' (state 0: the merged
      value, 1: late, 2: deleted by d), or 'd' .. reason
  A record whose effect cannot apply (add on a value that is not an integer, a sum beyond 2^53, max or
  min on text) is REJECTed: none of its effects is made, the fence moves, a 'd' entry is kept.
  Errors: 'RF_PROTOCOL ...' or 'RF_ARGS ...' on malformed arguments (nothing read or written).

  The body is includes/keyCallCore.lua (shared with keyCallMany-N.lua, several keys per call on a
  single Redis); its parsing and checks are includes/keyCallParse.lua, the session effects
  includes/session.lua, the writes at the end includes/keyCallWrite.lua.

  Cost notes: the script's own Lua is a large part of Redis' time per record, so the body is lean: the
  record text is read once with anchored string.find into flat arrays (no ARGV entry per offset, op or
  number, no table per record or effect, no closure per key call: see includes/keyCallCore.lua); one
  HGETALL of the fence hash, one HMGET per window key touched (v and t at once; f as well when the
  script call has a window's final); writes at the end:
  one HDEL and one HSET on the fence hash (p, o and e only where their text changes), one HSET (or
  HDEL) and one PEXPIREAT per window key written (both fields in the one HSET). A call from Lua into
  a C function (tonumber, string.sub/byte/format, table.concat, unpack, type) costs about as much as a
  short pattern match: texts that repeat (integers, targets, counts) are turned into numbers once per
  script call, expireAt stays text, and the common cases avoid such calls (docs/benchmarks.md). A
  window pair record (the W text) is made by its own short path (includes/keyCallPair.lua), and the
  script's tables are made at a usual size (a table grown from empty is reallocated at each doubling).
]]
--@include "keyCallCore"

if ARGV[1] ~= 's3' then
  return rf_err('RF_PROTOCOL', 'expected protocol s3, got ' .. tostring(ARGV[1]))
end
local partition = ARGV[2]
local epoch = tonumber(ARGV[3])
local watermark = tonumber(ARGV[4])
local expect = ARGV[5]
local spec = ARGV[6]
if not (tonumber(partition) and epoch and watermark and expect and spec) then
  return rf_err('RF_ARGS', 'malformed key call arguments')
end
local r1, r2, nextArg = rf_parse(false, 1, #KEYS, spec, 7)
if not r1 then
  return r2
end
if nextArg ~= #ARGV + 1 then
  return rf_err('RF_ARGS', 'malformed key call arguments')
end
return rf_run(1, r1, r2, partition, epoch, watermark, expect)
