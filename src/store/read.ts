/**
 * Queryable state: one consistent read of a fence key's stores from any process that reaches Redis
 * (no RPC between instances). Every answer carries the key's stamp, the partition and offset of the
 * last record applied to the key, read in the same script as the values (lua/readKey-N.lua), so the
 * values are exactly what that record left.
 */
import { RedfenceError } from '../errors/index.js';
import type { RedisArg } from '../fence/index.js';
import { MAX_STORE_ID } from './codec.js';
import type { StoreKeys } from './keys.js';
import { decodeResults } from './reply.js';
import type { EffectResult } from './types.js';

/** At most this many windows in one read (a wider range is read in several). */
export const MAX_READ_WINDOWS = 10_000;

/** What to read of one fence key. */
export interface StoreReadRequest {
  /** The fence key (the record's key after grouping). */
  readonly key: string | Uint8Array;
  /** Key-value stores to read (store ids; 0 is the processor's own value). */
  readonly kv?: readonly number[];
  /** Windows of window stores to read, by their start (ms since the epoch). */
  readonly windows?: readonly { readonly store: number; readonly starts: readonly number[] }[];
  /** Session stores to read whole (store ids): every session of the key. */
  readonly sessions?: readonly number[];
  /** Window hashes to read whole (store ids): every window of the key kept as a field (sliding windows). */
  readonly hashes?: readonly number[];
  /**
   * Pending entries to read, by offset: the results a record applied to the key keeps until its
   * partition's commit passes it (what a REEMIT would return).
   */
  readonly pending?: readonly number[];
}

/** A pending entry: the record's effect results, or the reason its effects were refused. */
export type PendingEntry = { readonly results: readonly EffectResult[] } | { readonly deadLetter: string };

/** The record a read reflects: the last one applied to the key. */
export interface StateStamp {
  readonly partition: number;
  /** Its offset: the answer holds the effects of every record of the key up to it. */
  readonly offset: number;
  /** The partition epoch of its writer. */
  readonly epoch: number;
  /**
   * The key's generation (field `g`): bumped by every writer outside the owner (`redfence reconcile
   * --repair`), so a token read before such a write never matches after it. Absent: none (0).
   */
  readonly generation?: number;
}

export interface WindowValue {
  readonly store: number;
  readonly start: number;
  /** null: the window holds nothing (never written, expired, or deleted). */
  readonly value: Buffer | null;
  /** Its time field (`t`, written by `window` effects with `field: 'time'`); null: none. */
  readonly time: Buffer | null;
  /** Its final result has been emitted (emit-final). */
  readonly final: boolean;
}

export interface SessionValue {
  readonly store: number;
  /** The session's first and last record timestamps (both inclusive). */
  readonly start: number;
  readonly end: number;
  readonly value: Buffer;
}

export interface StoreReadAnswer {
  /** null: no record was ever applied to the key (or its state is gone). */
  readonly stamp: StateStamp | null;
  /** One value per `request.kv` entry, in order (null: none). */
  readonly kv: readonly (Buffer | null)[];
  /** The windows asked for that hold a value, in request order. */
  readonly windows: readonly WindowValue[];
  /** The sessions of the session stores asked for: by store in request order, then by end, then start. */
  readonly sessions: readonly SessionValue[];
  /** Per `request.hashes` entry, in order: its windows (start -> value). */
  readonly hashes: readonly ReadonlyMap<number, Buffer>[];
  /** Per `request.hashes` entry, in order: the starts of its windows marked final (fields `f<start>`). */
  readonly hashFinals: readonly ReadonlySet<number>[];
  /** Per `request.pending` offset, in order: its entry, or null (none kept). */
  readonly pending: readonly (PendingEntry | null)[];
}

export interface EncodedRead {
  readonly keys: string[];
  readonly args: RedisArg[];
  readonly kv: number[];
  readonly windows: { store: number; start: number }[];
  readonly sessions: number[];
  readonly hashes: number[];
  readonly pending: number[];
}

function bad(path: string, why: string): RedfenceError {
  return new RedfenceError('RF_INVALID_ARGUMENT', `state read: ${path} ${why}`, { details: { field: path } });
}

function storeId(v: unknown, path: string): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > MAX_STORE_ID)
    throw bad(path, `must be a store id, an integer 0..${MAX_STORE_ID}`);
  return v;
}

/** Checks a read and turns it into the script's KEYS and ARGV (nothing sent). */
export function encodeRead(keys: StoreKeys, req: StoreReadRequest): EncodedRead {
  if (req === null || typeof req !== 'object') throw bad('request', 'must be an object');
  if (typeof req.key !== 'string' && !(req.key instanceof Uint8Array))
    throw bad('key', 'must be a string or a Uint8Array');
  const fence = keys.fence(req.key);
  const kv = (req.kv ?? []).map((s, i) => storeId(s, `kv[${i}]`));
  const windows: { store: number; start: number }[] = [];
  const windowKeys: string[] = [];
  for (const [i, w] of (req.windows ?? []).entries()) {
    const store = storeId(w?.store, `windows[${i}].store`);
    if (!Array.isArray(w.starts)) throw bad(`windows[${i}].starts`, 'must be an array of window starts');
    for (const [j, start] of w.starts.entries()) {
      if (typeof start !== 'number' || !Number.isSafeInteger(start))
        throw bad(`windows[${i}].starts[${j}]`, 'must be an integer (ms since the epoch)');
      windows.push({ store, start });
      windowKeys.push(keys.window(fence, store, start));
    }
  }
  if (windows.length > MAX_READ_WINDOWS)
    throw bad('windows', `ask for ${windows.length} windows; at most ${MAX_READ_WINDOWS} in one read`);
  if (req.sessions !== undefined && !Array.isArray(req.sessions))
    throw bad('sessions', 'must be an array of store ids');
  const sessions = (req.sessions ?? []).map((s, i) => storeId(s, `sessions[${i}]`));
  const hashes = (req.hashes ?? []).map((s, i) => storeId(s, `hashes[${i}]`));
  const pending = (req.pending ?? []).map((o, i) => {
    if (typeof o !== 'number' || !Number.isSafeInteger(o) || o < 0)
      throw bad(`pending[${i}]`, 'must be an offset, an integer >= 0');
    return o;
  });
  const args: RedisArg[] = [
    'r1',
    ...kv.map((s) => (s === 0 ? 'v' : `v:${s}`)),
    ...pending.map((o) => `#${o}`),
  ];
  // the window keys first, then whole hashes (the script's order)
  const hashKeys = hashes.map((s) => keys.windowHash(fence, s));
  const sessionKeys = sessions.map((s) => keys.session(fence, s));
  return {
    keys: [fence, ...windowKeys, ...hashKeys, ...sessionKeys],
    args,
    kv,
    windows,
    sessions,
    hashes,
    pending,
  };
}

function num(v: unknown): number | undefined {
  if (v === null || v === undefined) return undefined;
  const n = Number(Buffer.isBuffer(v) ? v.toString() : v);
  return Number.isSafeInteger(n) ? n : Number.NaN;
}

function value(v: unknown): Buffer | null {
  if (v === null || v === undefined) return null;
  if (Buffer.isBuffer(v)) return v;
  if (typeof v === 'string') return Buffer.from(v);
  throw new RedfenceError('RF_BAD_REPLY', `state read: a value of type ${typeof v}`);
}

/** Reads the script's reply back into an answer. */
export function decodeRead(encoded: EncodedRead, reply: unknown): StoreReadAnswer {
  const fields = encoded.kv.length + encoded.pending.length;
  const want = 4 + fields + 3 * encoded.windows.length + encoded.hashes.length + encoded.sessions.length;
  if (!Array.isArray(reply) || reply.length !== want)
    throw new RedfenceError(
      'RF_BAD_REPLY',
      `state read: expected ${want} reply entries, got ${Array.isArray(reply) ? reply.length : typeof reply}`,
    );
  const [p, o, e, g] = [num(reply[0]), num(reply[1]), num(reply[2]), num(reply[3])];
  if ([p, o, e, g].some((n) => Number.isNaN(n)))
    throw new RedfenceError('RF_BAD_REPLY', 'state read: the fence fields are not integers');
  const stamp =
    p === undefined || o === undefined
      ? null
      : { partition: p, offset: o, epoch: e ?? 0, ...(g === undefined || g === 0 ? {} : { generation: g }) };
  const kv = encoded.kv.map((_, i) => value(reply[4 + i]));
  const pending = encoded.pending.map((_, i) => {
    const v = value(reply[4 + encoded.kv.length + i]);
    if (v === null) return null;
    if (v[0] === 0x64) return { deadLetter: v.subarray(1).toString('utf8') };
    return { results: decodeResults(v, -1) };
  });
  const windows: WindowValue[] = [];
  const base = 4 + fields;
  for (const [i, w] of encoded.windows.entries()) {
    const v = value(reply[base + 3 * i]);
    const final = reply[base + 3 * i + 1] != null;
    if (v !== null) windows.push({ ...w, value: v, time: value(reply[base + 3 * i + 2]), final });
  }
  const hbase = base + 3 * encoded.windows.length;
  const hashFinals = encoded.hashes.map(() => new Set<number>());
  const hashes = encoded.hashes.map((_, i) => windowHashOf(reply[hbase + i], hashFinals[i] as Set<number>));
  const sessions: SessionValue[] = [];
  const at = hbase + encoded.hashes.length;
  for (const [i, store] of encoded.sessions.entries()) sessions.push(...sessionsOf(store, reply[at + i]));
  return { stamp, kv, windows, sessions, hashes, hashFinals, pending };
}

/** A window hash as HGETALL gives it (field `<start>`): start -> value; the final marks (`f<start>`) to `finals`. */
function windowHashOf(flat: unknown, finals: Set<number>): Map<number, Buffer> {
  if (!Array.isArray(flat) || flat.length % 2 !== 0)
    throw new RedfenceError('RF_BAD_REPLY', 'state read: a window hash is not a field list');
  const m = new Map<number, Buffer>();
  for (let j = 0; j < flat.length; j += 2) {
    const f = value(flat[j]);
    if (f !== null && f[0] === 0x66) {
      // 'f<start>': the window's final mark
      const marked = Number(f.subarray(1).toString('latin1'));
      if (!Number.isSafeInteger(marked))
        throw new RedfenceError('RF_BAD_REPLY', 'state read: a window hash mark is not a window start');
      finals.add(marked);
      continue;
    }
    const start = num(flat[j]);
    const v = value(flat[j + 1]);
    if (start === undefined || Number.isNaN(start) || v === null)
      throw new RedfenceError('RF_BAD_REPLY', 'state read: a window hash field is not a window start');
    m.set(start, v);
  }
  return m;
}

/** A session hash as HGETALL gives it (field `<start>:<end>`), by end then start. */
function sessionsOf(store: number, flat: unknown): SessionValue[] {
  if (!Array.isArray(flat) || flat.length % 2 !== 0)
    throw new RedfenceError('RF_BAD_REPLY', 'state read: a session hash is not a list of fields and values');
  const out: SessionValue[] = [];
  for (let i = 0; i < flat.length; i += 2) {
    const m = /^(-?\d+):(-?\d+)$/.exec(String(flat[i]));
    const v = value(flat[i + 1]);
    if (m === null || v === null)
      throw new RedfenceError('RF_BAD_REPLY', 'state read: a session field is not <start>:<end>');
    out.push({ store, start: Number(m[1]), end: Number(m[2]), value: v });
  }
  return out.sort((a, b) => a.end - b.end || a.start - b.start);
}
