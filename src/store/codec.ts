/**
 * The key call's codec: a {@link KeyCall} checked, then encoded into the KEYS and ARGV of
 * lua/keyCall-N.lua (protocol s2: the expected token, one record text, the set values beside it), and the script's reply
 * read back into one result per record. Every check runs before any Redis call; an error names the
 * field (`records[2].effects[0].op`) and never shows a value or the key.
 */
import { RedfenceError } from '../errors/index.js';
import type { RedisArg } from '../fence/index.js';
import { checkPartition } from '../keys/index.js';
import type { StoreKeys } from './keys.js';
import type {
  Effect,
  EffectResult,
  KeyCall,
  KeyRecordResult,
  SessionResult,
  StoreOp,
  StoreToken,
  WindowField,
} from './types.js';

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

function decodeToken(b: Buffer): StoreToken | null {
  const t = b.toString('latin1');
  if (t === '-') return null;
  const m = /^(\d+):(\d+)$/.exec(t);
  if (m === null) throw badReply('a malformed token');
  return { partition: Number(m[1]), offset: Number(m[2]) };
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

function badReply(why: string): RedfenceError {
  return new RedfenceError('RF_BAD_REPLY', `keyCall replied in an unknown shape: ${why}`);
}

function text(v: unknown): string {
  if (Buffer.isBuffer(v)) return v.toString('latin1');
  if (typeof v === 'string') return v;
  throw badReply(`expected bytes, got ${typeof v}`);
}

/**
 * Reads a pending entry `r<result>...` as buffers; `n`: the number of effects it must hold (-1: any, for
 * a REEMIT, which returns the results the record had when applied, whatever the replay carries).
 */
export function decodeResults(entry: Buffer, n: number): EffectResult[] {
  if (entry[0] !== 0x72) throw badReply('a results entry must start with r');
  const out: EffectResult[] = [];
  let i = 1;
  while (i < entry.length) {
    if (entry[i] === 0x2d) {
      out.push(null);
      i++;
      continue;
    }
    const session = entry[i] === 0x73; // 's': a session's result
    const from = session ? i + 1 : i;
    const colon = entry.indexOf(0x3a, from);
    const len = colon < 0 ? Number.NaN : Number(entry.subarray(from, colon).toString('latin1'));
    if (!Number.isSafeInteger(len) || colon + 1 + len > entry.length) throw badReply('a malformed result');
    const bytes = Buffer.from(entry.subarray(colon + 1, colon + 1 + len));
    out.push(session ? decodeSession(bytes) : bytes);
    i = colon + 1 + len;
  }
  if (n >= 0 && out.length !== n) throw badReply(`${out.length} results for ${n} effects`);
  return out;
}

/**
 * '<start>,<end>,<state>[,<rs>,<re>]*;<value>' (see keyCall-N.lua) as a SessionResult; state 0: the
 * merged session holds the value, 1: late, 2: the merged session was deleted (value null).
 */
function decodeSession(b: Buffer): SessionResult {
  const semi = b.indexOf(0x3b);
  if (semi < 0) throw badReply('a malformed session result');
  const nums = b.subarray(0, semi).toString('latin1').split(',').map(Number);
  if (nums.length < 3 || nums.length % 2 === 0 || nums.some((n) => !Number.isSafeInteger(n)))
    throw badReply('a malformed session result');
  const [start, end, late] = nums as [number, number, number];
  const removed: { start: number; end: number }[] = [];
  for (let k = 3; k < nums.length; k += 2)
    removed.push({ start: nums[k] as number, end: nums[k + 1] as number });
  if (late !== 0 && late !== 1 && late !== 2) throw badReply('a malformed session result');
  return {
    start,
    end,
    value: late === 0 ? Buffer.from(b.subarray(semi + 1)) : null,
    removed,
    late: late === 1,
  };
}

function asBuffer(v: unknown): Buffer {
  if (Buffer.isBuffer(v)) return v;
  if (typeof v === 'string') return Buffer.from(v, 'latin1');
  throw badReply(`expected bytes, got ${typeof v}`);
}

/** Reads the script's reply into one result per record. */
export function decodeKeyCall(encoded: EncodedCall, reply: unknown): KeyRecordResult[] {
  if (!Array.isArray(reply) || reply.length < 3) throw badReply('not a list of at least 3');
  const letters = text(reply[0]);
  const { offsets, effects } = encoded;
  if (letters.length !== offsets.length)
    throw badReply(`${letters.length} verdicts for ${offsets.length} records`);
  const number = Number(reply[1]);
  const previous = Number(reply[2]);
  let at = 3;
  const next = (): Buffer => {
    if (at >= reply.length) throw badReply('a payload is missing');
    return asBuffer(reply[at++]);
  };
  const out: KeyRecordResult[] = [];
  let current: StoreToken | null | undefined;
  for (let i = 0; i < letters.length; i++) {
    const offset = offsets[i] as number;
    const n = effects[i] as number;
    switch (letters[i]) {
      case 'F':
        out.push({ verdict: 'FENCE', offset, epoch: number });
        break;
      case 'S':
        out.push({ verdict: 'SKIP', offset });
        break;
      case 'C':
        if (current === undefined) current = decodeToken(next());
        out.push({ verdict: 'CONFLICT', offset, current });
        break;
      case 'R': {
        const entry = next();
        if (entry[0] === 0x64)
          out.push({ verdict: 'REEMIT', offset, deadLetter: entry.subarray(1).toString('utf8') });
        else out.push({ verdict: 'REEMIT', offset, results: decodeResults(entry, -1) });
        break;
      }
      case 'X':
        out.push({ verdict: 'REJECT', offset, reason: next().toString('utf8') });
        break;
      case 'A':
      case 'B': {
        const emits = encoded.emits[i] === 1;
        const results = emits ? { results: decodeResults(next(), n) } : {};
        out.push(
          letters[i] === 'A'
            ? { verdict: 'APPLY', offset, ...results }
            : { verdict: 'REBASE', offset, previousPartition: previous, ...results },
        );
        break;
      }
      default:
        throw badReply(`unknown verdict ${JSON.stringify(letters[i])}`);
    }
  }
  if (at !== reply.length) throw badReply('more payloads than records');
  return out;
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

/** Reads a keyCallMany reply: one result list per call. */
export function decodeKeyCallMany(encoded: EncodedMany, reply: unknown): KeyRecordResult[][] {
  if (!Array.isArray(reply) || reply.length !== encoded.calls.length)
    throw badReply(`keyCallMany: expected ${encoded.calls.length} replies`);
  return encoded.calls.map((c, i) => decodeKeyCall(c, reply[i]));
}
