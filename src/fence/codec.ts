/**
 * The one place that encodes apply arguments and translates script replies into typed verdicts.
 * The wire format is documented in lua/includes/applyCore.lua.
 */
import { RedfenceError } from '../errors/index.js';
import type { RedisArg } from './redis-port.js';
import type {
  ApplyRequest,
  FenceToken,
  Operation,
  Output,
  PendingEntry,
  RecordResult,
  StoredState,
} from './types.js';

export const PROTOCOL = '6';

function bad(message: string): RedfenceError {
  return new RedfenceError('RF_INVALID_ARGUMENT', message);
}

function checkOffset(offset: unknown, what: string): number {
  if (typeof offset !== 'number' || !Number.isSafeInteger(offset) || offset < 0) {
    throw bad(`${what} must be a non-negative safe integer, got ${String(offset)}`);
  }
  return offset;
}

export function bytes(value: string | Uint8Array, i: number, what: string): string | Buffer {
  if (typeof value === 'string') return value;
  if (value instanceof Uint8Array)
    return Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  throw bad(
    `records[${i}].${what} must be a string or a Uint8Array/Buffer, got ${value === null ? 'null' : typeof value}`,
  );
}

function finite(n: unknown, i: number, what: string): string {
  if (typeof n !== 'number' || !Number.isFinite(n))
    throw bad(`records[${i}].${what} must be a finite number, got ${String(n)}`);
  return String(n);
}

/** The fence token as the scripts spell it. */
export function tokenText(token: FenceToken | null): string {
  if (token === null) return '-';
  const g = token.generation ?? 0;
  return g === 0 ? `${token.partition}:${token.offset}` : `${token.partition}:${token.offset}:${g}`;
}

/**
 * Appends record i's operation: returns its part of the record text (`<op letter><mode>,<numeric
 * arg1>`) and pushes its binary arguments (set/cas value, cas token) onto `extra`.
 */
export function operationText(op: Operation, mode: string, extra: RedisArg[], i: number): string {
  switch (op?.op) {
    case 'set':
      extra.push(bytes(op.value, i, 'operation.value'));
      return `s${mode},`;
    case 'add': {
      const by = op.by;
      if (typeof by === 'bigint') {
        if (by < -(2n ** 63n) || by >= 2n ** 63n)
          throw bad(`records[${i}].operation.by is outside the 64-bit integer range`);
        return `a${mode},${by.toString()}`;
      }
      if (!Number.isSafeInteger(by))
        throw bad(`records[${i}].operation.by must be a safe integer or a bigint, got ${String(by)}`);
      return `a${mode},${by}`;
    }
    case 'addFloat':
      return `f${mode},${finite(op.by, i, 'operation.by')}`;
    case 'max':
      return `x${mode},${finite(op.value, i, 'operation.value')}`;
    case 'min':
      return `n${mode},${finite(op.value, i, 'operation.value')}`;
    case 'delete':
      return `d${mode},`;
    case 'cas':
      if (op.expected !== null) {
        checkOffset(op.expected?.offset, `records[${i}].operation.expected.offset`);
        checkOffset(op.expected?.partition, `records[${i}].operation.expected.partition`);
      }
      extra.push(bytes(op.value, i, 'operation.value'), tokenText(op.expected));
      return `c${mode},`;
    default:
      throw bad(
        `records[${i}].operation.op must be one of set, add, addFloat, max, min, delete, cas; got ${JSON.stringify((op as { op?: unknown })?.op)}`,
      );
  }
}

/**
 * ARGV for the apply scripts (protocol 6, see lua/includes/applyCore.lua): the header, the index flag
 * (`index`: the script adds the key to the pending index itself), then the record text (offset, op
 * and mode, numeric argument of every record in one string) and the records' binary arguments.
 * Validates the whole request first: nothing is sent on bad input. The many-key scripts take the
 * header and flag of one request and, per key, everything from index {@link KEY_ARGS} on.
 */
export function encodeApply(req: ApplyRequest, ttlMs: number, index = false): RedisArg[] {
  if (!Number.isSafeInteger(req.epoch) || req.epoch < 0)
    throw bad(`epoch must be a non-negative integer, got ${String(req.epoch)}`);
  if (!Number.isSafeInteger(req.committedOffset) || req.committedOffset < -1) {
    throw bad(`committedOffset must be an integer >= -1, got ${String(req.committedOffset)}`);
  }
  const records = req.records;
  if (!Array.isArray(records) || records.length === 0) throw bad('records must be a non-empty array');
  const extra: RedisArg[] = [];
  let spec = '';
  let last = -1;
  for (let i = 0; i < records.length; i++) {
    const r = records[i] as (typeof records)[number];
    const offset = r?.offset;
    if (typeof offset !== 'number' || !Number.isSafeInteger(offset) || offset < 0)
      checkOffset(offset, `records[${i}].offset`);
    if (offset <= last)
      throw bad(`records[${i}].offset must be greater than the previous record's (${last}), got ${offset}`);
    last = offset;
    const output = r.output;
    let mode = '0';
    let out: string | Buffer | undefined;
    if (output === 'state') {
      mode = '2';
    } else if (output !== undefined) {
      if (output !== null && typeof output === 'object' && 'deadLetter' in output) {
        if (typeof output.deadLetter !== 'string')
          throw bad(`records[${i}].output.deadLetter must be a string (the dead letter's reason)`);
        mode = '4';
        out = output.deadLetter;
      } else if (output === null || typeof output !== 'object' || !('value' in output)) {
        throw bad(
          `records[${i}].output must be omitted, 'state', { value: bytes | string | null } or { deadLetter: string }`,
        );
      } else if (output.value === null) {
        mode = '3';
      } else {
        mode = '1';
        out = bytes(output.value, i, 'output.value');
      }
    }
    spec += `${offset},${operationText(r.operation, mode, extra, i)};`;
    if (out !== undefined) extra.push(out);
  }
  return [
    PROTOCOL,
    String(req.partition),
    String(req.epoch),
    String(req.committedOffset),
    String(ttlMs),
    index ? '1' : '0',
    spec,
    ...extra,
  ];
}

/** Where a request's own part of {@link encodeApply}'s arguments starts (its record text, then the rest). */
export const KEY_ARGS = 6;

export function text(x: unknown): string {
  if (Buffer.isBuffer(x)) return x.toString('utf8');
  if (typeof x === 'string') return x;
  throw new RedfenceError('RF_BAD_REPLY', `fence script replied with ${typeof x} where text was expected`);
}

export function num(x: unknown): number {
  if (typeof x === 'number') return x;
  const n = Number(text(x));
  if (!Number.isFinite(n)) throw new RedfenceError('RF_BAD_REPLY', 'fence script replied with a non-number');
  return n;
}

/** Decodes a pending entry's stored bytes: kind byte + payload. */
export function decodeEntry(raw: Buffer): { output: Output } | { deadLetter: string } {
  const kind = raw[0];
  if (kind === 0x6f /* o */) return { output: { value: raw.subarray(1) } };
  if (kind === 0x6e /* n */) return { output: { value: null } };
  if (kind === 0x64 /* d */) return { deadLetter: raw.subarray(1).toString('utf8') };
  throw new RedfenceError('RF_BAD_REPLY', `unknown pending entry kind ${String(kind)}`);
}

export function parseToken(t: string): FenceToken | null {
  if (t === '-') return null;
  const [p, o, g] = t.split(':');
  const token = { partition: Number(p), offset: Number(o) };
  return g === undefined ? token : { ...token, generation: Number(g) };
}

/**
 * Translates an apply reply into one typed result per record, in request order. The reply carries one
 * verdict letter per record, the key's offset and partition before the call, and payloads only for the
 * records that have one (see lua/includes/applyCore.lua); offset gaps are computed here.
 */
export function decodeApply(req: ApplyRequest, reply: unknown): RecordResult[] {
  if (!Array.isArray(reply))
    throw new RedfenceError('RF_BAD_REPLY', `apply replied with ${typeof reply} entries`);
  const { results, next } = decodeApplyAt(req, reply, 0);
  if (next !== reply.length)
    throw new RedfenceError('RF_BAD_REPLY', `apply reply has ${reply.length - next} unread payloads`);
  return results;
}

/**
 * {@link decodeApply} of one key's part of a many-key reply (the keys' parts one after another),
 * starting at `reply[at]`; `next` is where the next key's part starts.
 */
export function decodeApplyAt(
  req: ApplyRequest,
  reply: readonly unknown[],
  at: number,
): { results: RecordResult[]; next: number } {
  if (reply.length - at < 3)
    throw new RedfenceError('RF_BAD_REPLY', `apply replied with ${reply.length - at} entries`);
  const records = req.records;
  const letters = text(reply[at]);
  if (letters.length !== records.length) {
    throw new RedfenceError(
      'RF_BAD_REPLY',
      `apply replied with ${letters.length} verdicts for ${records.length} records`,
    );
  }
  const number = num(reply[at + 1]);
  const previousPartition = num(reply[at + 2]);
  let next = at + 3;
  const payload = (): unknown => {
    if (next >= reply.length) throw new RedfenceError('RF_BAD_REPLY', 'apply reply is missing a payload');
    return reply[next++];
  };
  /** The output of an APPLY/REBASE with output 'state' (the entry the script wrote). */
  const stateOutput = (): Output | undefined => {
    const e = decodeEntry(payload() as Buffer);
    return 'output' in e ? e.output : undefined;
  };
  let last = number; // the fence offset before each record (-1: none)
  const results: RecordResult[] = new Array(letters.length);
  for (let i = 0; i < letters.length; i++) {
    const rec = records[i] as { offset: number; output?: unknown };
    const offset = rec.offset;
    let r: RecordResult;
    switch (letters.charCodeAt(i)) {
      case 65 /* A */:
        {
          const gap = last < 0 ? -1 : offset - last - 1;
          const output = rec.output === 'state' ? stateOutput() : undefined;
          r =
            output === undefined
              ? { verdict: 'APPLY', offset, gap }
              : { verdict: 'APPLY', offset, gap, output };
          last = offset;
          break;
        }
      case 66 /* B */:
        {
          const output = rec.output === 'state' ? stateOutput() : undefined;
          r =
            output === undefined
              ? { verdict: 'REBASE', offset, previousPartition }
              : { verdict: 'REBASE', offset, previousPartition, output };
          last = offset;
          break;
        }
      case 83 /* S */:
        r = { verdict: 'SKIP', offset };
        break;
      case 82 /* R */:
        {
          const e = decodeEntry(payload() as Buffer);
          r =
            'output' in e
              ? { verdict: 'REEMIT', offset, output: e.output }
              : { verdict: 'REEMIT', offset, deadLetter: e.deadLetter };
          break;
        }
      case 70 /* F */:
        r = { verdict: 'FENCE', offset, epoch: number };
        break;
      case 67 /* C */:
        r = { verdict: 'CONFLICT', offset, current: parseToken(text(payload())) };
        break;
      case 88 /* X */:
        r = { verdict: 'REJECT', offset, reason: text(payload()) };
        last = offset;
        break;
      default:
        throw new RedfenceError('RF_BAD_REPLY', `unknown verdict letter ${JSON.stringify(letters[i])}`);
    }
    results[i] = r;
  }
  return { results, next };
}

/**
 * A stored fence field as a number (the scripts write an integer's digits), or RF_STATE_CORRUPT naming
 * the field (never its text). The scripts read such a field as absent (Lua's
 * `tonumber`), so a key whose `o` was overwritten by hand would accept a replay: `redfence reconcile`
 * and `inspect` say so instead of showing a fence.
 */
function fenceField(name: string, v: Buffer): number {
  const t = text(v);
  const n = t.trim() === '' ? Number.NaN : Number(t);
  if (!Number.isSafeInteger(n))
    throw new RedfenceError(
      'RF_STATE_CORRUPT',
      `the state hash's fence field ${name} is not an integer (${v.length} bytes)`,
    );
  return n;
}

/** Decodes a state hash (HGETALL with Buffer values); null when the key has no state. */
export function decodeState(hash: Record<string, Buffer>): StoredState | null {
  const flat = Object.entries(hash).flat();
  if (flat.length === 0) return null;
  let value: Buffer | null = null;
  let partition: number | undefined;
  let offset: number | undefined;
  let epoch = 0;
  let generation = 0;
  const pending: PendingEntry[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const f = text(flat[i]);
    const v = flat[i + 1] as Buffer;
    if (f === 'v') value = v;
    else if (f === 'p') partition = fenceField('p', v);
    else if (f === 'o') offset = fenceField('o', v);
    else if (f === 'e') epoch = fenceField('e', v);
    else if (f === 'g') generation = fenceField('g', v);
    else if (f.startsWith('#')) {
      const e = decodeEntry(v);
      const off = Number(f.slice(1));
      pending.push(
        'output' in e
          ? { offset: off, kind: 'output', output: e.output }
          : { offset: off, kind: 'deadLetter', reason: e.deadLetter },
      );
    }
  }
  if (partition === undefined || offset === undefined) {
    throw new RedfenceError('RF_STATE_CORRUPT', 'a state hash lacks its fence fields (p, o)');
  }
  pending.sort((a, b) => a.offset - b.offset);
  return { value, partition, offset, epoch, ...(generation === 0 ? {} : { generation }), pending };
}
