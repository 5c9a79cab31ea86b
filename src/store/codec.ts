/**
 * The key call's codec: a {@link KeyCall} checked, then encoded into the KEYS and ARGV of
 * lua/keyCall-N.lua (protocol s2: the expected token, one record text, the set values beside it); its
 * reply is read back in reply.ts. Every check runs before any Redis call; an error names the
 * field (`records[2].effects[0].op`) and never shows a value or the key.
 */
import { RedfenceError } from '../errors/index.js';
import type { RedisArg } from '../fence/index.js';
import { checkPartition } from '../keys/index.js';
import type { StoreKeys } from './keys.js';
import type { Effect, KeyCall, StoreOp, WindowField } from './types.js';

export const PROTOCOL = 's2';
/** Store ids are small integers: they are part of field and key names. */
export const MAX_STORE_ID = 65_535;
const EXACT = 2n ** 53n;

export interface EncodedCall {
  readonly keys: string[];
  readonly args: RedisArg[];
  /** Number of effects per record (to read the results back). */
  readonly effects: number[];
  readonly offsets: number[];
  /** Each record's emit flag. */
  readonly emits: number[];
}

function bad(path: string, why: string): RedfenceError {
  return new RedfenceError('RF_INVALID_ARGUMENT', `key call: ${path} ${why}`, { details: { field: path } });
}

/**
 * Where a field is, for an error: `records[r].effects[e].<field>` (r, e: -1 above them). Built only when
 * a check fails: the encoding runs for every record and effect, and nearly always passes.
 */
interface Where {
  readonly r: number;
  readonly e: number;
}
const TOP: Where = { r: -1, e: -1 };

function pathOf(w: Where, field: string): string {
  let p = w.r < 0 ? '' : `records[${w.r}]`;
  if (w.e >= 0) p += `.effects[${w.e}]`;
  return field === '' ? p : p === '' ? field : `${p}.${field}`;
}

function integer(v: unknown, w: Where, field: string, min: number): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min)
    throw bad(pathOf(w, field), `must be an integer >= ${min}`);
  return v;
}

const OP_LETTER: Record<StoreOp['op'], string> = { set: 's', add: 'a', max: 'x', min: 'n', delete: 'd' };

/** The op's letter and operand text; a set's value is pushed to `values`. */
function encodeOp(op: StoreOp, w: Where, values: RedisArg[]): [string, string] {
  if (op === null || typeof op !== 'object') throw bad(pathOf(w, 'op'), 'must be an operation object');
  switch (op.op) {
    case 'set':
      if (typeof op.value !== 'string' && !(op.value instanceof Uint8Array))
        throw bad(pathOf(w, 'op.value'), 'must be a string or a Uint8Array');
      values.push(typeof op.value === 'string' ? op.value : Buffer.from(op.value));
      return ['s', ''];
    case 'add': {
      const by = op.by;
      const ok =
        (typeof by === 'number' && Number.isSafeInteger(by)) ||
        (typeof by === 'bigint' && by > -EXACT && by < EXACT);
      if (!ok) throw bad(pathOf(w, 'op.by'), 'must be an integer of magnitude below 2^53');
      return ['a', String(by)];
    }
    case 'max':
    case 'min':
      if (typeof op.value !== 'number' || !Number.isFinite(op.value))
        throw bad(pathOf(w, 'op.value'), 'must be a finite number');
      return [OP_LETTER[op.op], String(op.value)];
    case 'delete':
      return ['d', ''];
    default:
      throw bad(
        pathOf(w, 'op.op'),
        `is unknown: ${JSON.stringify(String((op as { op: unknown }).op)).slice(0, 40)}`,
      );
  }
}

/** A window effect's field: absent or 'value' (field `v`), 'time' (field `t`). */
function windowField(f: unknown, w: Where): WindowField {
  if (f === undefined || f === 'value') return 'value';
  if (f === 'time') return 'time';
  throw bad(pathOf(w, 'field'), "must be 'value' or 'time'");
}

/** A session effect's text (its ops: add, max, min, set, delete; the bounds are any safe integers). */
function encodeSession(
  e: Extract<Effect, { kind: 'session' }>,
  w: Where,
  slot: number,
  values: RedisArg[],
): string {
  const time = integer(e.time, w, 'time', 0);
  const expireAt = integer(e.expireAt, w, 'expireAt', 1);
  const bounds = (['lowEnd', 'highStart', 'closeTime', 'dropBefore'] as const).map((f) => {
    const v = e[f];
    if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw bad(pathOf(w, f), 'must be an integer');
    return v;
  });
  const op = e.op as StoreOp;
  if (op === null || typeof op !== 'object' || !['add', 'max', 'min', 'set', 'delete'].includes(op.op))
    throw bad(pathOf(w, 'op'), "must be an 'add', 'max', 'min', 'set' or 'delete' operation");
  const [l, operand] = encodeOp(op, w, values);
  return `s${l}${slot},${expireAt},${operand}@${time}@${bounds.join('@')};`;
}

/** The expected token's text: '' no check, '-' no state, '<partition>:<offset>[:<generation>]'. */
function encodeExpect(expect: KeyCall['expect']): string {
  if (expect === undefined) return '';
  if (expect === null) return '-';
  if (typeof expect !== 'object')
    throw bad('expect', 'must be a token { partition, offset }, null or absent');
  try {
    checkPartition(expect.partition);
  } catch {
    throw bad('expect.partition', 'must be an integer in 0..2^31-1');
  }
  const text = `${expect.partition}:${integer(expect.offset, TOP, 'expect.offset', 0)}`;
  const g = expect.generation ?? 0;
  return g === 0 ? text : `${text}:${integer(g, TOP, 'expect.generation', 0)}`;
}

/** A call's KEYS: the fence hash, then each window key, window hash and session hash once, by first use. */
class Slots {
  readonly keys: string[];
  #windows: Map<string, number> | undefined;
  #hashes: Map<number, number> | undefined;
  #sessions: Map<number, number> | undefined;

  constructor(
    readonly names: StoreKeys,
    readonly fence: string,
  ) {
    this.keys = [fence];
  }

  #add(name: string): number {
    this.keys.push(name);
    return this.keys.length;
  }

  window(store: number, start: number): number {
    this.#windows ??= new Map();
    const id = `${store}:${start}`;
    let i = this.#windows.get(id);
    if (i === undefined) {
      i = this.#add(this.names.window(this.fence, store, start));
      this.#windows.set(id, i);
    }
    return i;
  }

  hash(store: number): number {
    this.#hashes ??= new Map();
    let i = this.#hashes.get(store);
    if (i === undefined) {
      i = this.#add(this.names.windowHash(this.fence, store));
      this.#hashes.set(store, i);
    }
    return i;
  }

  session(store: number): number {
    this.#sessions ??= new Map();
    let i = this.#sessions.get(store);
    if (i === undefined) {
      i = this.#add(this.names.session(this.fence, store));
      this.#sessions.set(store, i);
    }
    return i;
  }
}

/** One effect's text; a set's value is pushed to `values`. */
function encodeEffect(e: Effect, w: Where, slots: Slots, values: RedisArg[]): string {
  if (e === null || typeof e !== 'object') throw bad(pathOf(w, ''), 'must be an object');
  const store = integer(e.store, w, 'store', 0);
  if (store > MAX_STORE_ID) throw bad(pathOf(w, 'store'), `must be at most ${MAX_STORE_ID}`);
  switch (e.kind) {
    case 'kv': {
      const [l, operand] = encodeOp(e.op, w, values);
      return `k${l}${store},,${operand};`;
    }
    case 'window': {
      const start = integer(e.start, w, 'start', 0);
      const expireAt = integer(e.expireAt, w, 'expireAt', 1);
      const kind = windowField(e.field, w) === 'time' ? 't' : 'w';
      const [l, operand] = encodeOp(e.op, w, values);
      return `${kind}${l}${slots.window(store, start)},${expireAt},${operand};`;
    }
    case 'field': {
      const start = integer(e.start, w, 'start', 0);
      const expireAt = integer(e.expireAt, w, 'expireAt', 1);
      const [l, operand] = encodeOp(e.op, w, values);
      return `h${l}${slots.hash(store)},${expireAt},${operand}@${start};`;
    }
    case 'note': {
      if (typeof e.value !== 'string' && !(e.value instanceof Uint8Array))
        throw bad(pathOf(w, 'value'), 'must be a string or a Uint8Array');
      values.push(typeof e.value === 'string' ? e.value : Buffer.from(e.value));
      return 'ps0,,;';
    }
    case 'final': {
      const start = integer(e.start, w, 'start', 0);
      const field = windowField(e.field, w);
      if (e.hash !== undefined) {
        if (e.hash !== true || e.end !== undefined) throw bad(pathOf(w, 'hash'), 'must be true, without end');
        return `f-${slots.hash(store)},,${field === 'time' ? 't' : 'h'}${start};`;
      }
      if (e.end === undefined) return `f-${slots.window(store, start)},,${field === 'time' ? 't' : ''};`;
      if (e.field !== undefined) throw bad(pathOf(w, 'field'), "is for a window's final, not a session's");
      return `f-${slots.session(store)},,${start}:${integer(e.end, w, 'end', start)};`;
    }
    case 'session':
      return encodeSession(e, w, slots.session(store), values);
    default:
      throw bad(pathOf(w, 'kind'), "must be 'kv', 'window', 'field', 'note', 'final' or 'session'");
  }
}

/** Checks and encodes one key call. */
export function encodeKeyCall(names: StoreKeys, call: KeyCall): EncodedCall {
  if (call === null || typeof call !== 'object') throw bad('call', 'must be an object');
  try {
    checkPartition(call.partition);
  } catch {
    throw bad('partition', 'must be an integer in 0..2^31-1');
  }
  integer(call.epoch, TOP, 'epoch', 0);
  integer(call.committedOffset, TOP, 'committedOffset', -1);
  if (typeof call.key !== 'string' && !(call.key instanceof Uint8Array))
    throw bad('key', 'must be a string or a Uint8Array');
  if (!Array.isArray(call.records) || call.records.length === 0)
    throw bad('records', 'must be a non-empty array');
  const fence = names.fence(call.key);
  const slots = new Slots(names, fence);
  const keys = slots.keys;
  const values: RedisArg[] = [];
  const effects: number[] = [];
  const offsets: number[] = [];
  const emits: number[] = [];
  let text = '';
  let last = -1;
  for (let ri = 0; ri < call.records.length; ri++) {
    const r = call.records[ri] as KeyCall['records'][number];
    const rw: Where = { r: ri, e: -1 };
    if (r === null || typeof r !== 'object') throw bad(pathOf(rw, ''), 'must be an object');
    const offset = integer(r.offset, rw, 'offset', 0);
    if (offset <= last) throw bad(pathOf(rw, 'offset'), 'must be larger than the previous record offset');
    last = offset;
    if (r.emit !== 0 && r.emit !== 1) throw bad(pathOf(rw, 'emit'), 'must be 0 or 1');
    if (!Array.isArray(r.effects)) throw bad(pathOf(rw, 'effects'), 'must be an array');
    text += `${offset},${r.emit},${r.effects.length};`;
    for (let ei = 0; ei < r.effects.length; ei++)
      text += encodeEffect(r.effects[ei] as Effect, { r: ri, e: ei }, slots, values);
    effects.push(r.effects.length);
    offsets.push(offset);
    emits.push(r.emit);
  }
  const args: RedisArg[] = [
    PROTOCOL,
    String(call.partition),
    String(call.epoch),
    String(call.committedOffset),
    encodeExpect(call.expect),
    text,
    ...values,
  ];
  return { keys, args, effects, offsets, emits };
}

/** The protocol of keyCallMany-N.lua. */
export const MANY_PROTOCOL = 'm2';

/** Several encoded key calls of one partition batch as one keyCallMany script call. */
export interface EncodedMany {
  readonly keys: string[];
  readonly args: RedisArg[];
  readonly calls: readonly EncodedCall[];
}

/**
 * Joins encoded calls into one keyCallMany call (a single Redis only: their keys are in several
 * slots). They must share the partition, epoch and committed offset (one partition batch).
 */
export function encodeKeyCallMany(calls: readonly EncodedCall[]): EncodedMany {
  const first = calls[0];
  if (first === undefined) throw bad('calls', 'must not be empty');
  const [, partition, epoch, committed] = first.args;
  const keys: string[] = [];
  const args: RedisArg[] = [
    MANY_PROTOCOL,
    partition as RedisArg,
    epoch as RedisArg,
    committed as RedisArg,
    String(calls.length),
  ];
  for (let i = 0; i < calls.length; i++) {
    const c = calls[i] as EncodedCall;
    if (c.args[1] !== partition || c.args[2] !== epoch || c.args[3] !== committed)
      throw bad(`calls[${i}]`, 'must have the partition, epoch and committed offset of the first call');
    for (const k of c.keys) keys.push(k);
    args.push(String(c.keys.length));
    for (let j = 4; j < c.args.length; j++) args.push(c.args[j] as RedisArg);
  }
  return { keys, args, calls };
}
