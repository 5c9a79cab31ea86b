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

function integer(v: unknown, path: string, min: number): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min)
    throw bad(path, `must be an integer >= ${min}`);
  return v;
}

const OP_LETTER: Record<StoreOp['op'], string> = { set: 's', add: 'a', max: 'x', min: 'n', delete: 'd' };

/** The op's letter and operand text; a set's value is pushed to `values`. */
function encodeOp(op: StoreOp, path: string, values: RedisArg[]): [string, string] {
  if (op === null || typeof op !== 'object') throw bad(path, 'must be an operation object');
  switch (op.op) {
    case 'set':
      if (typeof op.value !== 'string' && !(op.value instanceof Uint8Array))
        throw bad(`${path}.value`, 'must be a string or a Uint8Array');
      values.push(typeof op.value === 'string' ? op.value : Buffer.from(op.value));
      return ['s', ''];
    case 'add': {
      const by = op.by;
      const ok =
        (typeof by === 'number' && Number.isSafeInteger(by)) ||
        (typeof by === 'bigint' && by > -EXACT && by < EXACT);
      if (!ok) throw bad(`${path}.by`, 'must be an integer of magnitude below 2^53');
      return ['a', String(by)];
    }
    case 'max':
    case 'min':
      if (typeof op.value !== 'number' || !Number.isFinite(op.value))
        throw bad(`${path}.value`, 'must be a finite number');
      return [OP_LETTER[op.op], String(op.value)];
    case 'delete':
      return ['d', ''];
    default:
      throw bad(
        `${path}.op`,
        `is unknown: ${JSON.stringify(String((op as { op: unknown }).op)).slice(0, 40)}`,
      );
  }
}

/** A window effect's field: absent or 'value' (field `v`), 'time' (field `t`). */
function windowField(f: unknown, path: string): WindowField {
  if (f === undefined || f === 'value') return 'value';
  if (f === 'time') return 'time';
  throw bad(path, "must be 'value' or 'time'");
}

/** A session effect's text (its ops: add, max, min, set, delete; the bounds are any safe integers). */
function encodeSession(
  e: Extract<Effect, { kind: 'session' }>,
  ep: string,
  slot: number,
  values: RedisArg[],
): string {
  const time = integer(e.time, `${ep}.time`, 0);
  const expireAt = integer(e.expireAt, `${ep}.expireAt`, 1);
  const bounds = (['lowEnd', 'highStart', 'closeTime', 'dropBefore'] as const).map((f) => {
    const v = e[f];
    if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw bad(`${ep}.${f}`, 'must be an integer');
    return v;
  });
  const op = e.op as StoreOp;
  if (op === null || typeof op !== 'object' || !['add', 'max', 'min', 'set', 'delete'].includes(op.op))
    throw bad(`${ep}.op`, "must be an 'add', 'max', 'min', 'set' or 'delete' operation");
  const [l, operand] = encodeOp(op, `${ep}.op`, values);
  return `s${l}${slot},${expireAt},${operand}@${time}@${bounds.join('@')};`;
}

/** The expected token's text: '' no check, '-' no state, '<partition>:<offset>'. */
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
  return `${expect.partition}:${integer(expect.offset, 'expect.offset', 0)}`;
}

/** Checks and encodes one key call. */
export function encodeKeyCall(names: StoreKeys, call: KeyCall): EncodedCall {
  if (call === null || typeof call !== 'object') throw bad('call', 'must be an object');
  try {
    checkPartition(call.partition);
  } catch {
    throw bad('partition', 'must be an integer in 0..2^31-1');
  }
  integer(call.epoch, 'epoch', 0);
  integer(call.committedOffset, 'committedOffset', -1);
  if (typeof call.key !== 'string' && !(call.key instanceof Uint8Array))
    throw bad('key', 'must be a string or a Uint8Array');
  if (!Array.isArray(call.records) || call.records.length === 0)
    throw bad('records', 'must be a non-empty array');
  const fence = names.fence(call.key);
  const keys = [fence];
  const windowIndex = new Map<string, number>();
  const windowOf = (store: number, start: number): number => {
    const id = `${store}:${start}`;
    let i = windowIndex.get(id);
    if (i === undefined) {
      keys.push(names.window(fence, store, start));
      i = keys.length;
      windowIndex.set(id, i);
    }
    return i;
  };
  const hashIndex = new Map<number, number>();
  const hashOf = (store: number): number => {
    let i = hashIndex.get(store);
    if (i === undefined) {
      keys.push(names.windowHash(fence, store));
      i = keys.length;
      hashIndex.set(store, i);
    }
    return i;
  };
  const sessionIndex = new Map<number, number>();
  const sessionOf = (store: number): number => {
    let i = sessionIndex.get(store);
    if (i === undefined) {
      keys.push(names.session(fence, store));
      i = keys.length;
      sessionIndex.set(store, i);
    }
    return i;
  };
  const values: RedisArg[] = [];
  const effects: number[] = [];
  const offsets: number[] = [];
  const emits: number[] = [];
  let text = '';
  let last = -1;
  call.records.forEach((r, ri) => {
    const at = `records[${ri}]`;
    if (r === null || typeof r !== 'object') throw bad(at, 'must be an object');
    const offset = integer(r.offset, `${at}.offset`, 0);
    if (offset <= last) throw bad(`${at}.offset`, 'must be larger than the previous record offset');
    last = offset;
    if (r.emit !== 0 && r.emit !== 1) throw bad(`${at}.emit`, 'must be 0 or 1');
    if (!Array.isArray(r.effects)) throw bad(`${at}.effects`, 'must be an array');
    text += `${offset},${r.emit},${r.effects.length};`;
    r.effects.forEach((e: Effect, ei: number) => {
      const ep = `${at}.effects[${ei}]`;
      if (e === null || typeof e !== 'object') throw bad(ep, 'must be an object');
      const store = integer(e.store, `${ep}.store`, 0);
      if (store > MAX_STORE_ID) throw bad(`${ep}.store`, `must be at most ${MAX_STORE_ID}`);
      switch (e.kind) {
        case 'kv': {
          const [l, operand] = encodeOp(e.op, `${ep}.op`, values);
          text += `k${l}${store},,${operand};`;
          return;
        }
        case 'window': {
          const start = integer(e.start, `${ep}.start`, 0);
          const expireAt = integer(e.expireAt, `${ep}.expireAt`, 1);
          const kind = windowField(e.field, `${ep}.field`) === 'time' ? 't' : 'w';
          const [l, operand] = encodeOp(e.op, `${ep}.op`, values);
          text += `${kind}${l}${windowOf(store, start)},${expireAt},${operand};`;
          return;
        }
        case 'field': {
          const start = integer(e.start, `${ep}.start`, 0);
          const expireAt = integer(e.expireAt, `${ep}.expireAt`, 1);
          const [l, operand] = encodeOp(e.op, `${ep}.op`, values);
          text += `h${l}${hashOf(store)},${expireAt},${operand}@${start};`;
          return;
        }
        case 'note': {
          if (typeof e.value !== 'string' && !(e.value instanceof Uint8Array))
            throw bad(`${ep}.value`, 'must be a string or a Uint8Array');
          values.push(typeof e.value === 'string' ? e.value : Buffer.from(e.value));
          text += 'ps0,,;';
          return;
        }
        case 'final': {
          const start = integer(e.start, `${ep}.start`, 0);
          const field = windowField(e.field, `${ep}.field`);
          if (e.hash !== undefined) {
            if (e.hash !== true || e.end !== undefined) throw bad(`${ep}.hash`, 'must be true, without end');
            text += `f-${hashOf(store)},,${field === 'time' ? 't' : 'h'}${start};`;
          } else if (e.end === undefined)
            text += `f-${windowOf(store, start)},,${field === 'time' ? 't' : ''};`;
          else if (e.field !== undefined)
            throw bad(`${ep}.field`, "is for a window's final, not a session's");
          else text += `f-${sessionOf(store)},,${start}:${integer(e.end, `${ep}.end`, start)};`;
          return;
        }
        case 'session': {
          text += encodeSession(e, ep, sessionOf(store), values);
          return;
        }
        default:
          throw bad(`${ep}.kind`, "must be 'kv', 'window', 'field', 'note', 'final' or 'session'");
      }
    });
    effects.push(r.effects.length);
    offsets.push(offset);
    emits.push(r.emit);
  });
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
  const shared = first.args.slice(1, 4);
  const keys: string[] = [];
  const args: RedisArg[] = [MANY_PROTOCOL, ...shared, String(calls.length)];
  calls.forEach((c, i) => {
    if (c.args.slice(1, 4).some((a, j) => a !== shared[j]))
      throw bad(`calls[${i}]`, 'must have the partition, epoch and committed offset of the first call');
    keys.push(...c.keys);
    args.push(String(c.keys.length), ...c.args.slice(4));
  });
  return { keys, args, calls };
}
