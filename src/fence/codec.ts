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

export const PROTOCOL = '3';

function bad(message: string): RedfenceError {
  return new RedfenceError('RF_INVALID_ARGUMENT', message);
}

function checkOffset(offset: unknown, what: string): number {
  if (typeof offset !== 'number' || !Number.isSafeInteger(offset) || offset < 0) {
    throw bad(`${what} must be a non-negative safe integer, got ${String(offset)}`);
  }
  return offset;
}

function bytes(value: string | Uint8Array, what: string): string | Buffer {
  if (typeof value === 'string') return value;
  if (value instanceof Uint8Array)
    return Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  throw bad(`${what} must be a string or a Uint8Array/Buffer, got ${value === null ? 'null' : typeof value}`);
}

function finite(n: unknown, what: string): string {
  if (typeof n !== 'number' || !Number.isFinite(n))
    throw bad(`${what} must be a finite number, got ${String(n)}`);
  return String(n);
}

/** The fence token as the scripts spell it. */
export function tokenText(token: FenceToken | null): string {
  return token === null ? '-' : `${token.partition}:${token.offset}`;
}

function operationArgs(op: Operation, where: string): [string, string | Buffer, string] {
  switch (op?.op) {
    case 'set':
      return ['set', bytes(op.value, `${where}.value`), ''];
    case 'add': {
      const by = op.by;
      if (typeof by === 'bigint') {
        if (by < -(2n ** 63n) || by >= 2n ** 63n)
          throw bad(`${where}.by is outside the 64-bit integer range`);
        return ['add', by.toString(), ''];
      }
      if (!Number.isSafeInteger(by))
        throw bad(`${where}.by must be a safe integer or a bigint, got ${String(by)}`);
      return ['add', String(by), ''];
    }
    case 'addFloat':
      return ['addf', finite(op.by, `${where}.by`), ''];
    case 'max':
    case 'min':
      return [op.op, finite(op.value, `${where}.value`), ''];
    case 'delete':
      return ['del', '', ''];
    case 'cas':
      if (op.expected !== null) {
        checkOffset(op.expected?.offset, `${where}.expected.offset`);
        checkOffset(op.expected?.partition, `${where}.expected.partition`);
      }
      return ['cas', bytes(op.value, `${where}.value`), tokenText(op.expected)];
    default:
      throw bad(
        `${where}.op must be one of set, add, addFloat, max, min, delete, cas; got ${JSON.stringify((op as { op?: unknown })?.op)}`,
      );
  }
}

/** ARGV for applyRecords / applyRecordsStrict. Validates the whole request first: nothing is sent on bad input. */
export function encodeApply(req: ApplyRequest, ttlMs: number): RedisArg[] {
  if (!Number.isSafeInteger(req.epoch) || req.epoch < 0)
    throw bad(`epoch must be a non-negative integer, got ${String(req.epoch)}`);
  if (!Number.isSafeInteger(req.committedOffset) || req.committedOffset < -1) {
    throw bad(`committedOffset must be an integer >= -1, got ${String(req.committedOffset)}`);
  }
  if (!Array.isArray(req.records) || req.records.length === 0) throw bad('records must be a non-empty array');
  const args: RedisArg[] = [
    PROTOCOL,
    String(req.partition),
    String(req.epoch),
    String(req.committedOffset),
    String(ttlMs),
    String(req.records.length),
  ];
  let last = -1;
  req.records.forEach((r, i) => {
    const where = `records[${i}]`;
    const offset = checkOffset(r?.offset, `${where}.offset`);
    if (offset <= last)
      throw bad(`${where}.offset must be greater than the previous record's (${last}), got ${offset}`);
    last = offset;
    const [op, a1, a2] = operationArgs(r.operation, `${where}.operation`);
    let mode = '0';
    let out: string | Buffer = '';
    if (r.output === 'state') {
      mode = '2';
    } else if (r.output !== undefined) {
      if (r.output === null || typeof r.output !== 'object' || !('value' in r.output)) {
        throw bad(`${where}.output must be omitted, 'state', or { value: bytes | string | null }`);
      }
      if (r.output.value === null) {
        mode = '3';
      } else {
        mode = '1';
        out = bytes(r.output.value, `${where}.output.value`);
      }
    }
    args.push(String(offset), op + mode, a1);
    if (op === 'cas') args.push(a2);
    if (mode === '1') args.push(out);
  });
  return args;
}

function text(x: unknown): string {
  if (Buffer.isBuffer(x)) return x.toString('utf8');
  if (typeof x === 'string') return x;
  throw new RedfenceError('RF_BAD_REPLY', `fence script replied with ${typeof x} where text was expected`);
}

function num(x: unknown): number {
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

function parseToken(t: string): FenceToken | null {
  if (t === '-') return null;
  const [p, o] = t.split(':');
  return { partition: Number(p), offset: Number(o) };
}

/**
 * Translates an apply reply into one typed result per record, in request order. The reply carries one
 * verdict letter per record, the key's offset and partition before the call, and payloads only for the
 * records that have one (see lua/includes/applyCore.lua); offset gaps are computed here.
 */
export function decodeApply(req: ApplyRequest, reply: unknown): RecordResult[] {
  if (!Array.isArray(reply) || reply.length < 3) {
    throw new RedfenceError(
      'RF_BAD_REPLY',
      `apply replied with ${Array.isArray(reply) ? reply.length : typeof reply} entries`,
    );
  }
  const letters = text(reply[0]);
  if (letters.length !== req.records.length) {
    throw new RedfenceError(
      'RF_BAD_REPLY',
      `apply replied with ${letters.length} verdicts for ${req.records.length} records`,
    );
  }
  const number = num(reply[1]);
  const previousPartition = num(reply[2]);
  let next = 3;
  const payload = (): unknown => {
    if (next >= reply.length) throw new RedfenceError('RF_BAD_REPLY', 'apply reply is missing a payload');
    return reply[next++];
  };
  let last = number; // the fence offset before each record (-1: none)
  const results: RecordResult[] = [];
  for (let i = 0; i < letters.length; i++) {
    const rec = req.records[i] as { offset: number; output?: unknown };
    const offset = rec.offset;
    const stateOutput = (): { output?: Output } => {
      if (rec.output !== 'state') return {};
      const e = decodeEntry(payload() as Buffer);
      return 'output' in e ? { output: e.output } : {};
    };
    switch (letters[i]) {
      case 'A':
        results.push({ verdict: 'APPLY', offset, gap: last < 0 ? -1 : offset - last - 1, ...stateOutput() });
        last = offset;
        break;
      case 'B':
        results.push({ verdict: 'REBASE', offset, previousPartition, ...stateOutput() });
        last = offset;
        break;
      case 'S':
        results.push({ verdict: 'SKIP', offset });
        break;
      case 'R': {
        const e = decodeEntry(payload() as Buffer);
        results.push(
          'output' in e
            ? { verdict: 'REEMIT', offset, output: e.output }
            : { verdict: 'REEMIT', offset, deadLetter: e.deadLetter },
        );
        break;
      }
      case 'F':
        results.push({ verdict: 'FENCE', offset, epoch: number });
        break;
      case 'C':
        results.push({ verdict: 'CONFLICT', offset, current: parseToken(text(payload())) });
        break;
      case 'X':
        results.push({ verdict: 'REJECT', offset, reason: text(payload()) });
        last = offset;
        break;
      default:
        throw new RedfenceError('RF_BAD_REPLY', `unknown verdict letter ${JSON.stringify(letters[i])}`);
    }
  }
  if (next !== reply.length)
    throw new RedfenceError('RF_BAD_REPLY', `apply reply has ${reply.length - next} unread payloads`);
  return results;
}

/** Decodes a state hash (HGETALL with Buffer values); null when the key has no state. */
export function decodeState(hash: Record<string, Buffer>): StoredState | null {
  const flat = Object.entries(hash).flat();
  if (flat.length === 0) return null;
  let value: Buffer | null = null;
  let partition: number | undefined;
  let offset: number | undefined;
  let epoch = 0;
  const pending: PendingEntry[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const f = text(flat[i]);
    const v = flat[i + 1] as Buffer;
    if (f === 'v') value = v;
    else if (f === 'p') partition = num(v);
    else if (f === 'o') offset = num(v);
    else if (f === 'e') epoch = num(v);
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
  return { value, partition, offset, epoch, pending };
}
