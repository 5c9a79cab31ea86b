/**
 * The key call's codec: a {@link KeyCall} checked, then encoded into the KEYS and ARGV of
 * lua/keyCall-N.lua (protocol s3: the expected token, one record text, the set values beside it), or
 * several calls of one partition batch straight into those of lua/keyCallMany-N.lua; the reply is read
 * back in reply.ts. Every check runs before any Redis call; an error names the
 * field (`records[2].effects[0].op`) and never shows a value or the key.
 */
import { RedfenceError } from '../errors/index.js';
import type { RedisArg } from '../fence/index.js';
import { checkPartition } from '../keys/index.js';
import type { StoreKeys } from './keys.js';
import { Slots } from './slots.js';
import type { Effect, KeyCall, StoreOp, WindowField } from './types.js';

export const PROTOCOL = 's3';
/** Store ids are small integers: they are part of field and key names. */
export const MAX_STORE_ID = 65_535;
const EXACT = 2n ** 53n;

function bad(path: string, why: string): RedfenceError {
  return new RedfenceError('RF_INVALID_ARGUMENT', `key call: ${path} ${why}`, { details: { field: path } });
}

/**
 * Where a field is, for an error: `records[r].effects[e].<field>` (r, e: -1 above them). Built only when
 * a check fails: the encoding runs for every record and effect, and nearly always passes (so the place
 * travels as two numbers, not an object per record and effect).
 */
function pathOf(r: number, e: number, field: string): string {
  let p = r < 0 ? '' : `records[${r}]`;
  if (e >= 0) p += `.effects[${e}]`;
  return field === '' ? p : p === '' ? field : `${p}.${field}`;
}

function integer(v: unknown, r: number, e: number, field: string, min: number): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min)
    throw bad(pathOf(r, e, field), `must be an integer >= ${min}`);
  return v;
}

const OP_LETTER: Record<StoreOp['op'], string> = { set: 's', add: 'a', max: 'x', min: 'n', delete: 'd' };

/**
 * The operand text of the op {@link opLetter} read last: set there, read right after (the encoding is
 * synchronous), so an effect's op costs no pair of strings in a new array.
 */
let operand = '';

/** The op's letter; its operand text goes to {@link operand}; a set's value is pushed to `values`. */
function opLetter(op: StoreOp, r: number, e: number, values: RedisArg[]): string {
  if (op === null || typeof op !== 'object') throw bad(pathOf(r, e, 'op'), 'must be an operation object');
  switch (op.op) {
    case 'set':
      if (typeof op.value !== 'string' && !(op.value instanceof Uint8Array))
        throw bad(pathOf(r, e, 'op.value'), 'must be a string or a Uint8Array');
      values.push(typeof op.value === 'string' ? op.value : Buffer.from(op.value));
      operand = '';
      return 's';
    case 'add': {
      const by = op.by;
      const ok =
        (typeof by === 'number' && Number.isSafeInteger(by)) ||
        (typeof by === 'bigint' && by > -EXACT && by < EXACT);
      if (!ok) throw bad(pathOf(r, e, 'op.by'), 'must be an integer of magnitude below 2^53');
      operand = by === 1 ? '1' : String(by);
      return 'a';
    }
    case 'max':
    case 'min':
      if (typeof op.value !== 'number' || !Number.isFinite(op.value))
        throw bad(pathOf(r, e, 'op.value'), 'must be a finite number');
      operand = String(op.value);
      return OP_LETTER[op.op];
    case 'delete':
      operand = '';
      return 'd';
    default:
      throw bad(
        pathOf(r, e, 'op.op'),
        `is unknown: ${JSON.stringify(String((op as { op: unknown }).op)).slice(0, 40)}`,
      );
  }
}

/** A window effect's field: absent or 'value' (field `v`), 'time' (field `t`). */
function windowField(f: unknown, r: number, e: number): WindowField {
  if (f === undefined || f === 'value') return 'value';
  if (f === 'time') return 'time';
  throw bad(pathOf(r, e, 'field'), "must be 'value' or 'time'");
}

const BOUNDS = ['lowEnd', 'highStart', 'closeTime', 'dropBefore'] as const;
const SESSION_OPS = ['add', 'max', 'min', 'set', 'delete'];

/** A session effect's text (its ops: add, max, min, set, delete; the bounds are any safe integers). */
function encodeSession(
  s: Extract<Effect, { kind: 'session' }>,
  r: number,
  e: number,
  slot: number,
  values: RedisArg[],
): string {
  const time = integer(s.time, r, e, 'time', 0);
  const expireAt = integer(s.expireAt, r, e, 'expireAt', 1);
  let bounds = '';
  for (const f of BOUNDS) {
    const v = s[f];
    if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw bad(pathOf(r, e, f), 'must be an integer');
    bounds += `@${v}`;
  }
  const op = s.op as StoreOp;
  if (op === null || typeof op !== 'object' || !SESSION_OPS.includes(op.op))
    throw bad(pathOf(r, e, 'op'), "must be an 'add', 'max', 'min', 'set' or 'delete' operation");
  const l = opLetter(op, r, e, values);
  return `s${l}${slot},${expireAt},${operand}@${time}${bounds};`;
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
  const text = `${expect.partition}:${integer(expect.offset, -1, -1, 'expect.offset', 0)}`;
  const g = expect.generation ?? 0;
  return g === 0 ? text : `${text}:${integer(g, -1, -1, 'expect.generation', 0)}`;
}

const slots = new Slots();

/** The last expireAt written and its text (a window's value and time effects carry the same one). */
let expNumber = -1;
let expText = '';
function expireText(n: number): string {
  if (n !== expNumber) {
    expNumber = n;
    expText = String(n);
  }
  return expText;
}

/** One effect's text; a set's value is pushed to `values`. */
function encodeEffect(x: Effect, r: number, e: number, values: RedisArg[]): string {
  if (x === null || typeof x !== 'object') throw bad(pathOf(r, e, ''), 'must be an object');
  const store = integer(x.store, r, e, 'store', 0);
  if (store > MAX_STORE_ID) throw bad(pathOf(r, e, 'store'), `must be at most ${MAX_STORE_ID}`);
  switch (x.kind) {
    case 'kv': {
      const l = opLetter(x.op, r, e, values);
      return `k${l}${store},,${operand};`;
    }
    case 'window': {
      const start = integer(x.start, r, e, 'start', 0);
      const expireAt = expireText(integer(x.expireAt, r, e, 'expireAt', 1));
      const kind = windowField(x.field, r, e) === 'time' ? 't' : 'w';
      const l = opLetter(x.op, r, e, values);
      return `${kind}${l}${slots.window(store, start)},${expireAt},${operand};`;
    }
    case 'field': {
      const start = integer(x.start, r, e, 'start', 0);
      const expireAt = integer(x.expireAt, r, e, 'expireAt', 1);
      const l = opLetter(x.op, r, e, values);
      return `h${l}${slots.hash(store)},${expireAt},${operand}@${start};`;
    }
    case 'note': {
      if (typeof x.value !== 'string' && !(x.value instanceof Uint8Array))
        throw bad(pathOf(r, e, 'value'), 'must be a string or a Uint8Array');
      values.push(typeof x.value === 'string' ? x.value : Buffer.from(x.value));
      return 'ps0,,;';
    }
    case 'final': {
      const start = integer(x.start, r, e, 'start', 0);
      const field = windowField(x.field, r, e);
      if (x.hash !== undefined) {
        if (x.hash !== true || x.end !== undefined)
          throw bad(pathOf(r, e, 'hash'), 'must be true, without end');
        return `f-${slots.hash(store)},,${field === 'time' ? 't' : 'h'}${start};`;
      }
      if (x.end === undefined) return `f-${slots.window(store, start)},,${field === 'time' ? 't' : ''};`;
      if (x.field !== undefined) throw bad(pathOf(r, e, 'field'), "is for a window's final, not a session's");
      return `f-${slots.session(store)},,${start}:${integer(x.end, r, e, 'end', start)};`;
    }
    case 'session':
      return encodeSession(x, r, e, slots.session(store), values);
    default:
      throw bad(pathOf(r, e, 'kind'), "must be 'kv', 'window', 'field', 'note', 'final' or 'session'");
  }
}

type WindowEffect = Extract<Effect, { kind: 'window' }>;

/**
 * A record's two effects that are one window's value and time with one expireAt (a time-windowed
 * aggregation's record): sent as one `W` text, which the script reads in one pattern find.
 */
function isWindowPair(a: Effect, b: Effect): boolean {
  return (
    a !== null &&
    b !== null &&
    typeof a === 'object' &&
    typeof b === 'object' &&
    a.kind === 'window' &&
    b.kind === 'window' &&
    (a.field === undefined || a.field === 'value') &&
    b.field === 'time' &&
    a.store === b.store &&
    a.start === b.start &&
    a.expireAt === b.expireAt
  );
}

/** A window pair's text `W<op><op><target>,<expireAt>,<operand>,<operand>;` (checked as two effects). */
function encodePair(a: WindowEffect, b: WindowEffect, r: number, values: RedisArg[]): string {
  const store = integer(a.store, r, 0, 'store', 0);
  if (store > MAX_STORE_ID) throw bad(pathOf(r, 0, 'store'), `must be at most ${MAX_STORE_ID}`);
  const start = integer(a.start, r, 0, 'start', 0);
  const expireAt = expireText(integer(a.expireAt, r, 0, 'expireAt', 1));
  const l1 = opLetter(a.op, r, 0, values);
  const o1 = operand;
  const l2 = opLetter(b.op, r, 1, values);
  return `W${l1}${l2}${slots.window(store, start)},${expireAt},${o1},${operand};`;
}

/** Per record of encoded calls, in order: its offset, its number of effects and its emit flag (to read replies). */
export interface CallShape {
  readonly offsets: number[];
  readonly effects: number[];
  readonly emits: number[];
}

export interface EncodedCall extends CallShape {
  readonly keys: string[];
  readonly args: RedisArg[];
}

/** The checks of a call's partition, epoch and committed offset (shared by a keyCallMany's calls). */
function checkBatch(call: KeyCall): void {
  if (call === null || typeof call !== 'object') throw bad('call', 'must be an object');
  try {
    checkPartition(call.partition);
  } catch {
    throw bad('partition', 'must be an integer in 0..2^31-1');
  }
  integer(call.epoch, -1, -1, 'epoch', 0);
  integer(call.committedOffset, -1, -1, 'committedOffset', -1);
}

/**
 * Checks and encodes one call's key and records: its fence hash and other keys appended to `keys`, its
 * expected token, record text and set values to `args`, each record's offset, effect count and emit flag
 * to `shape`. Returns how many keys it appended.
 */
function encodeRecords(names: StoreKeys, call: KeyCall, keys: string[], args: RedisArg[], shape: CallShape) {
  if (typeof call.key !== 'string' && !(call.key instanceof Uint8Array))
    throw bad('key', 'must be a string or a Uint8Array');
  const records = call.records;
  if (!Array.isArray(records) || records.length === 0) throw bad('records', 'must be a non-empty array');
  const fence = names.fence(call.key);
  const base = keys.length;
  keys.push(fence);
  slots.reset(names, fence, keys, base);
  args.push(encodeExpect(call.expect));
  const at = args.length;
  args.push('');
  let text = '';
  let last = -1;
  for (let ri = 0; ri < records.length; ri++) {
    const r = records[ri] as KeyCall['records'][number];
    if (r === null || typeof r !== 'object') throw bad(pathOf(ri, -1, ''), 'must be an object');
    const offset = integer(r.offset, ri, -1, 'offset', 0);
    if (offset <= last) throw bad(pathOf(ri, -1, 'offset'), 'must be larger than the previous record offset');
    last = offset;
    if (r.emit !== 0 && r.emit !== 1) throw bad(pathOf(ri, -1, 'emit'), 'must be 0 or 1');
    const effects = r.effects;
    if (!Array.isArray(effects)) throw bad(pathOf(ri, -1, 'effects'), 'must be an array');
    if (effects.length === 2 && isWindowPair(effects[0] as Effect, effects[1] as Effect))
      text += `${offset},${r.emit},${encodePair(effects[0] as WindowEffect, effects[1] as WindowEffect, ri, args)}`;
    else {
      text += `${offset},${r.emit},${effects.length};`;
      for (let ei = 0; ei < effects.length; ei++) text += encodeEffect(effects[ei] as Effect, ri, ei, args);
    }
    shape.effects.push(effects.length);
    shape.offsets.push(offset);
    shape.emits.push(r.emit);
  }
  args[at] = text;
  slots.release();
  return keys.length - base;
}

/** Checks and encodes one key call. */
export function encodeKeyCall(names: StoreKeys, call: KeyCall): EncodedCall {
  checkBatch(call);
  const keys: string[] = [];
  const args: RedisArg[] = [
    PROTOCOL,
    String(call.partition),
    String(call.epoch),
    String(call.committedOffset),
  ];
  const encoded: EncodedCall = { keys, args, offsets: [], effects: [], emits: [] };
  encodeRecords(names, call, keys, args, encoded);
  return encoded;
}

/** The protocol of keyCallMany-N.lua. */
export const MANY_PROTOCOL = 'm3';

/** Several key calls of one partition batch as one keyCallMany script call. */
export interface EncodedMany extends CallShape {
  readonly keys: string[];
  readonly args: RedisArg[];
  /** Call i's records are the shape's records starts[i] .. starts[i + 1] - 1. */
  readonly starts: number[];
}

/**
 * Checks and encodes key calls of one partition batch as one keyCallMany call (a single Redis only:
 * their keys are in several slots), straight into its KEYS and ARGV (no call's own lists to join). They
 * must share the partition, epoch and committed offset.
 */
export function encodeKeyCallMany(names: StoreKeys, calls: readonly KeyCall[]): EncodedMany {
  const first = calls[0];
  if (first === undefined) throw bad('calls', 'must not be empty');
  checkBatch(first);
  const keys: string[] = [];
  const args: RedisArg[] = [
    MANY_PROTOCOL,
    String(first.partition),
    String(first.epoch),
    String(first.committedOffset),
    String(calls.length),
  ];
  const starts: number[] = new Array(calls.length + 1);
  const encoded: EncodedMany = { keys, args, starts, offsets: [], effects: [], emits: [] };
  for (let i = 0; i < calls.length; i++) {
    const c = calls[i] as KeyCall;
    if (c === null || typeof c !== 'object') throw bad(`calls[${i}]`, 'must be an object');
    if (
      c.partition !== first.partition ||
      c.epoch !== first.epoch ||
      c.committedOffset !== first.committedOffset
    )
      throw bad(`calls[${i}]`, 'must have the partition, epoch and committed offset of the first call');
    starts[i] = encoded.offsets.length;
    const at = args.length;
    args.push('');
    args[at] = String(encodeRecords(names, c, keys, args, encoded));
  }
  starts[calls.length] = encoded.offsets.length;
  return encoded;
}
