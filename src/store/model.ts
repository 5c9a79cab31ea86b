/**
 * A pure reference model of the key call (lua/keyCall-N.lua): the decision table of src/fence/model.ts
 * (cluster fencing; no compare-and-set, so no CONFLICT) extended with effects on key-value stores and
 * windows, emit-final, and pending entries that hold the effects' results. Tests run it beside the
 * script; it also documents the call in code.
 */
import type { Effect, EffectResult, KeyCall, KeyRecordResult, SessionResult, StoreOp } from './types.js';

/**
 * A window of one store (one key): its value (field `v`; null: none), its time field (`t`; null: none),
 * final marker (kept with the value) and expiry. It lives while it holds either field.
 */
export interface ModelWindow {
  value: Buffer | null;
  time: Buffer | null;
  final: boolean;
  expireAt: number;
}

type Pending = { results: EffectResult[] } | { deadLetter: string };

/** What the model keeps for one fence key. */
export interface KeyModelState {
  fence: { partition: number; offset: number; epoch: number } | null;
  /** store id -> value */
  kv: Map<number, Buffer>;
  /** `<store>:<start>` -> window */
  windows: Map<string, ModelWindow>;
  /** offset -> entry */
  pending: Map<number, Pending>;
  /** store id -> its sessions (`<start>:<end>` -> value) and the session hash's expiry */
  sessions: Map<number, { fields: Map<string, Buffer>; expireAt: number }>;
  /**
   * store id -> its window hash (window start -> value), the starts marked final (field `f<start>`,
   * gone with the value) and the hash's expiry
   */
  hashes: Map<number, { fields: Map<number, Buffer>; finals: Set<number>; expireAt: number }>;
}

export function emptyKeyState(): KeyModelState {
  return {
    fence: null,
    kv: new Map(),
    windows: new Map(),
    pending: new Map(),
    sessions: new Map(),
    hashes: new Map(),
  };
}

function clone(s: KeyModelState): KeyModelState {
  const windows = new Map<string, ModelWindow>();
  for (const [k, w] of s.windows) windows.set(k, { ...w });
  return {
    fence: s.fence === null ? null : { ...s.fence },
    kv: new Map(s.kv),
    windows,
    pending: new Map(s.pending),
    sessions: new Map(
      [...s.sessions].map(([id, x]) => [id, { fields: new Map(x.fields), expireAt: x.expireAt }]),
    ),
    hashes: new Map(
      [...s.hashes].map(([id, x]) => [
        id,
        { fields: new Map(x.fields), finals: new Set(x.finals), expireAt: x.expireAt },
      ]),
    ),
  };
}

const INT = /^(0|-?[1-9][0-9]*)$/;
const EXACT = 2n ** 53n;

function bytes(v: string | Uint8Array): Buffer {
  return typeof v === 'string' ? Buffer.from(v, 'utf8') : Buffer.from(v);
}

/** Lua's tonumber on decimal text; NaN where Lua gives nil. */
function luaNumber(s: string): number {
  return s.trim() === '' ? Number.NaN : Number(s);
}

/** The new value of an op, or why it cannot apply. */
function operate(v: Buffer | null, op: StoreOp): { value: Buffer | null } | { reason: string } {
  switch (op.op) {
    case 'set':
      return { value: bytes(op.value) };
    case 'add': {
      const cur = v === null ? '0' : v.toString('latin1');
      if (!INT.test(cur) || BigInt(cur) <= -EXACT || BigInt(cur) >= EXACT)
        return { reason: 'add failed: stored value is not an integer' };
      const sum = BigInt(cur) + BigInt(op.by);
      if (sum <= -EXACT || sum >= EXACT) return { reason: 'add failed: result beyond 2^53' };
      return { value: Buffer.from(sum.toString()) };
    }
    case 'max':
    case 'min': {
      const num = v === null ? undefined : luaNumber(v.toString('latin1'));
      if (num !== undefined && Number.isNaN(num))
        return { reason: `${op.op} failed: stored value is not a number` };
      if (num === undefined || (op.op === 'max' ? op.value > num : op.value < num))
        return { value: Buffer.from(String(op.value)) };
      return { value: v };
    }
    case 'delete':
      return { value: null };
  }
}

const windowId = (e: { store: number; start: number }) => `${e.store}:${e.start}`;

type SessionEffect = Extract<Effect, { kind: 'session' }>;

/** Exact integer text of the key call's range, or undefined. */
function exactInt(t: string): bigint | undefined {
  if (!INT.test(t)) return undefined;
  const n = BigInt(t);
  return n > -EXACT && n < EXACT ? n : undefined;
}

/**
 * A session effect on `fields` (mutated): the overlapping sessions merge with [time, time]; the
 * result, or why it cannot apply (then `fields` may be half changed: the caller works on a copy).
 */
function sessionEffect(
  fields: Map<string, Buffer>,
  e: SessionEffect,
): { result: SessionResult } | { reason: string } {
  const found: { start: number; end: number; field: string; text: string }[] = [];
  for (const [field, v] of [...fields]) {
    const [start, end] = field.split(':').map(Number) as [number, number];
    if (end < e.dropBefore) fields.delete(field);
    else if (end >= e.lowEnd && start <= e.highStart)
      found.push({ start, end, field, text: v.toString('latin1') });
  }
  found.sort((a, b) => a.end - b.end || a.start - b.start);
  const op = e.op;
  let start = e.time;
  let end = e.time;
  let acc: bigint | number | undefined;
  let accText: string | undefined;
  const given = op.op === 'set' || op.op === 'delete';
  for (const f of found) {
    const n = given ? 0 : op.op === 'add' ? exactInt(f.text) : luaNumber(f.text);
    if (n === undefined || Number.isNaN(n))
      return {
        reason: `session merge failed: stored value is not ${op.op === 'add' ? 'an integer' : 'a number'}`,
      };
    if (acc === undefined || (op.op === 'max' && n > acc) || (op.op === 'min' && n < acc)) {
      acc = n;
      accText = f.text;
    } else if (op.op === 'add') acc = (acc as bigint) + (n as bigint);
    start = Math.min(start, f.start);
    end = Math.max(end, f.end);
  }
  if (end < e.closeTime) return { result: { start, end, value: null, removed: [], late: true } };
  const removed: { start: number; end: number }[] = [];
  if (start !== e.time || end !== e.time)
    for (const f of found) {
      fields.delete(f.field);
      removed.push({ start: f.start, end: f.end });
    }
  if (op.op === 'delete') {
    fields.delete(`${start}:${end}`);
    return { result: { start, end, value: null, removed, late: false } };
  }
  if (op.op === 'set') {
    const set = Buffer.from(op.value);
    fields.set(`${start}:${end}`, set);
    return { result: { start, end, value: set, removed, late: false } };
  }
  let value: string;
  if (op.op === 'add') {
    const sum = ((acc as bigint | undefined) ?? 0n) + BigInt(op.by);
    if (sum <= -EXACT || sum >= EXACT) return { reason: 'add failed: result beyond 2^53' };
    value = sum.toString();
  } else if (acc === undefined || (op.op === 'max' ? op.value > acc : op.value < acc))
    value = String(op.value);
  else value = accText as string;
  const bytes = Buffer.from(value, 'latin1');
  fields.set(`${start}:${end}`, bytes);
  return { result: { start, end, value: bytes, removed, late: false } };
}

/** One record's effects on `s` (mutated only when every effect applies): its results, or the reason. */
function applyEffects(
  s: KeyModelState,
  effects: readonly Effect[],
  expires: Map<string, number>,
): { results: EffectResult[] } | { reason: string } {
  const kv = new Map(s.kv);
  const windows = new Map<string, ModelWindow>();
  const win = (id: string): ModelWindow => {
    let w = windows.get(id);
    if (w === undefined) {
      const old = s.windows.get(id);
      w = old === undefined ? { value: null, time: null, final: false, expireAt: 0 } : { ...old };
      windows.set(id, w);
    }
    return w;
  };
  const exp = new Map<string, number>();
  const sessions = new Map<number, Map<string, Buffer>>();
  const hashes = new Map<number, Map<number, Buffer>>();
  const hashFinals = new Map<number, Set<number>>();
  const finalsOf = (store: number): Set<number> => {
    let f = hashFinals.get(store);
    if (f === undefined) {
      f = new Set(s.hashes.get(store)?.finals ?? []);
      hashFinals.set(store, f);
    }
    return f;
  };
  const hashMarks: [number, number][] = []; // the hash fields the record's finals take
  const results: EffectResult[] = [];
  const marks: ModelWindow[] = []; // the windows the record's finals take: marked once every effect is made
  const took = new Set<string>(); // `<window id>:<field>`: what a final of this record took
  for (const e of effects) {
    if (e.kind === 'note') {
      results.push(bytes(e.value));
      continue;
    }
    if (e.kind === 'field') {
      let fields = hashes.get(e.store);
      if (fields === undefined) {
        fields = new Map(s.hashes.get(e.store)?.fields ?? []);
        hashes.set(e.store, fields);
      }
      const out = operate(fields.get(e.start) ?? null, e.op);
      if ('reason' in out) return out;
      if (out.value === null) {
        fields.delete(e.start);
        finalsOf(e.store).delete(e.start); // HDEL <start> f<start>
      } else fields.set(e.start, out.value);
      results.push(out.value);
      const id = `h:${e.store}`;
      exp.set(id, Math.max(exp.get(id) ?? 0, e.expireAt));
      continue;
    }
    if (e.kind === 'session') {
      let fields = sessions.get(e.store);
      if (fields === undefined) {
        fields = new Map(s.sessions.get(e.store)?.fields ?? []);
        sessions.set(e.store, fields);
      }
      const out = sessionEffect(fields, e);
      if ('reason' in out) return out;
      results.push(out.result);
      const id = `s:${e.store}`;
      exp.set(id, Math.max(exp.get(id) ?? 0, e.expireAt));
      continue;
    }
    if (e.kind === 'final' && e.hash === true) {
      // a window hash field's value as the call has it so far, once (marked `f<start>`)
      const fields = hashes.get(e.store) ?? s.hashes.get(e.store)?.fields;
      const v = fields?.get(e.start) ?? null;
      const id = `h:${e.store}:${e.start}`;
      if (e.field === 'time')
        results.push(v); // a timestamp hash's field: as it is, nothing marked
      else if (v === null || finalsOf(e.store).has(e.start) || took.has(id)) results.push(null);
      else {
        results.push(v);
        took.add(id);
        hashMarks.push([e.store, e.start]);
      }
      continue;
    }
    if (e.kind === 'final' && e.end !== undefined) {
      const fields = sessions.get(e.store) ?? s.sessions.get(e.store)?.fields;
      results.push(fields?.get(`${e.start}:${e.end}`) ?? null);
      continue;
    }
    if (e.kind === 'final') {
      const w = win(windowId(e));
      const id = `${windowId(e)}:${e.field ?? 'value'}`;
      if (w.final || w.value === null || took.has(id)) results.push(null);
      else {
        results.push(e.field === 'time' ? w.time : w.value);
        took.add(id);
        marks.push(w);
      }
      continue;
    }
    const w = e.kind === 'window' ? win(windowId(e)) : null;
    const time = e.kind === 'window' && e.field === 'time';
    const cur = w === null ? (kv.get(e.store) ?? null) : time ? w.time : w.value;
    const out = operate(cur, e.op);
    if ('reason' in out) return out;
    if (w !== null && e.kind === 'window') {
      if (time) w.time = out.value;
      else w.value = out.value;
      const id = windowId(e);
      exp.set(id, Math.max(exp.get(id) ?? 0, e.expireAt));
    } else if (out.value === null) kv.delete(e.store);
    else kv.set(e.store, out.value);
    results.push(out.value);
  }
  for (const w of marks) w.final = true;
  for (const [store, start] of hashMarks) finalsOf(store).add(start);
  s.kv = kv;
  for (const [id, w] of windows) s.windows.set(id, w);
  for (const [store, fields] of sessions) {
    // the hash's expiry is set at the end of the call (as PEXPIREAT is): kept until then
    if (fields.size === 0) s.sessions.delete(store);
    else s.sessions.set(store, { fields, expireAt: s.sessions.get(store)?.expireAt ?? 0 });
  }
  for (const store of hashFinals.keys())
    if (!hashes.has(store)) hashes.set(store, new Map(s.hashes.get(store)?.fields ?? []));
  for (const [store, fields] of hashes) {
    // as sessions: the expiry is set at the end of the call; a mark lives with its field's value
    const finals = new Set([...(hashFinals.get(store) ?? s.hashes.get(store)?.finals ?? [])]);
    for (const start of finals) if (!fields.has(start)) finals.delete(start);
    if (fields.size === 0) s.hashes.delete(store);
    else s.hashes.set(store, { fields, finals, expireAt: s.hashes.get(store)?.expireAt ?? 0 });
  }
  for (const [id, x] of exp) expires.set(id, Math.max(expires.get(id) ?? 0, x));
  return { results };
}

/**
 * Decides one key call against `state` (not mutated): the results per record and the new state. A
 * stale epoch on the key's partition FENCEs the whole call; pending entries below the committed offset
 * are pruned; per record: a duplicate REEMITs its pending entry or SKIPs, a record past the fence (or
 * from another partition: REBASE) APPLYs its effects all or none (REJECT: none, fence moved).
 */
export function decideKeyCall(
  state: KeyModelState | null,
  call: KeyCall,
): { results: KeyRecordResult[]; state: KeyModelState } {
  const { partition, epoch, committedOffset, records } = call;
  const s = clone(state ?? emptyKeyState());
  const f0 = s.fence;
  if (f0 !== null && f0.partition === partition && epoch < f0.epoch) {
    return {
      results: records.map((r) => ({ verdict: 'FENCE', offset: r.offset, epoch: f0.epoch })),
      state: clone(state ?? emptyKeyState()),
    };
  }
  if (call.expect !== undefined) {
    const current = f0 === null ? null : { partition: f0.partition, offset: f0.offset };
    const same =
      current === null || call.expect === null
        ? current === call.expect
        : current.partition === call.expect.partition && current.offset === call.expect.offset;
    if (!same)
      return {
        results: records.map((r) => ({ verdict: 'CONFLICT', offset: r.offset, current })),
        state: clone(state ?? emptyKeyState()),
      };
  }
  if (f0 !== null && f0.partition === partition && committedOffset >= 0)
    for (const off of [...s.pending.keys()]) if (off < committedOffset) s.pending.delete(off);
  const previous = f0 === null ? -1 : f0.partition;
  const expires = new Map<string, number>();
  const results: KeyRecordResult[] = [];
  for (const r of records) {
    const f = s.fence;
    if (f !== null && f.partition === partition && r.offset <= f.offset) {
      const entry = s.pending.get(r.offset);
      if (entry === undefined) results.push({ verdict: 'SKIP', offset: r.offset });
      else if ('deadLetter' in entry)
        results.push({ verdict: 'REEMIT', offset: r.offset, deadLetter: entry.deadLetter });
      else results.push({ verdict: 'REEMIT', offset: r.offset, results: entry.results });
      if (epoch > f.epoch) f.epoch = epoch;
      continue;
    }
    const rebase = f !== null && f.partition !== partition;
    if (rebase) s.pending.clear();
    const out = applyEffects(s, r.effects, expires);
    s.fence = { partition, offset: r.offset, epoch };
    if ('reason' in out) {
      s.pending.set(r.offset, { deadLetter: out.reason });
      results.push({ verdict: 'REJECT', offset: r.offset, reason: out.reason });
      continue;
    }
    if (r.emit === 1) s.pending.set(r.offset, { results: out.results });
    const extra = r.emit === 1 ? { results: out.results } : {};
    results.push(
      rebase
        ? { verdict: 'REBASE', offset: r.offset, previousPartition: previous, ...extra }
        : { verdict: 'APPLY', offset: r.offset, ...extra },
    );
  }
  for (const [id, x] of expires) {
    const w = id.startsWith('s:')
      ? s.sessions.get(Number(id.slice(2)))
      : id.startsWith('h:')
        ? s.hashes.get(Number(id.slice(2)))
        : s.windows.get(id);
    if (w !== undefined) w.expireAt = x;
  }
  // a window without a value loses its final marker (HDEL v f); without either field it is gone
  for (const [id, w] of s.windows) {
    if (w.value === null) w.final = false;
    if (w.value === null && w.time === null) s.windows.delete(id);
  }
  return { results, state: s };
}
