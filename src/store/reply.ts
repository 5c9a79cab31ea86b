/**
 * The key call's replies read back (the other half of codec.ts): the script's reply into one result
 * per record, a pending entry into its effects' results, a keyCallMany reply into one list per call.
 * A reply of an unknown shape is RF_BAD_REPLY, never a value.
 */
import { RedfenceError } from '../errors/index.js';
import type { CallShape, EncodedMany } from './codec.js';
import type { EffectResult, KeyRecordResult, SessionResult, StoreToken } from './types.js';

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
  // sized up front when the count is known (a list grown by push from empty reserves 16 more slots)
  const out: EffectResult[] = n >= 0 ? new Array(n) : [];
  let k = 0;
  let i = 1;
  while (i < entry.length) {
    if (n >= 0 && k >= n) throw badReply(`more results than ${n} effects`);
    if (entry[i] === 0x2d) {
      out[k++] = null;
      i++;
      continue;
    }
    const session = entry[i] === 0x73; // 's': a session's result
    const from = session ? i + 1 : i;
    // the length's digits read in place (no text made per result)
    let colon = from;
    let len = 0;
    for (let d = entry[colon]; d !== undefined && d >= 0x30 && d <= 0x39; d = entry[++colon])
      len = len * 10 + d - 0x30;
    if (colon === from || colon - from > 15 || entry[colon] !== 0x3a || colon + 1 + len > entry.length)
      throw badReply('a malformed result');
    // a copy (the reply's buffers are views into the connection's read buffer), without a view first
    const bytes = Buffer.allocUnsafe(len);
    entry.copy(bytes, 0, colon + 1, colon + 1 + len);
    out[k++] = session ? decodeSession(bytes) : bytes;
    i = colon + 1 + len;
  }
  if (n >= 0 && k !== n) throw badReply(`${k} results for ${n} effects`);
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

/**
 * Reads a key call's reply into one result per record: the records `from` .. `to` - 1 of `shape` (a
 * single call: all of them). One object per record, no closure per call.
 */
export function decodeKeyCall(
  shape: CallShape,
  reply: unknown,
  from = 0,
  to = shape.offsets.length,
): KeyRecordResult[] {
  if (!Array.isArray(reply) || reply.length < 3) throw badReply('not a list of at least 3');
  const letters = text(reply[0]);
  const { offsets, effects, emits } = shape;
  const count = to - from;
  if (letters.length !== count) throw badReply(`${letters.length} verdicts for ${count} records`);
  const number = Number(reply[1]);
  const previous = Number(reply[2]);
  let at = 3;
  const out: KeyRecordResult[] = new Array(count);
  let current: StoreToken | null | undefined;
  for (let i = 0; i < count; i++) {
    const offset = offsets[from + i] as number;
    const letter = letters.charCodeAt(i);
    if (letter === 0x41 || letter === 0x42) {
      // A APPLY, B REBASE: with emit 1 the record's new entry
      let results: EffectResult[] | undefined;
      if (emits[from + i] === 1) {
        if (at >= reply.length) throw badReply('a payload is missing');
        results = decodeResults(asBuffer(reply[at++]), effects[from + i] as number);
      }
      if (letter === 0x41)
        out[i] = results === undefined ? { verdict: 'APPLY', offset } : { verdict: 'APPLY', offset, results };
      else
        out[i] =
          results === undefined
            ? { verdict: 'REBASE', offset, previousPartition: previous }
            : { verdict: 'REBASE', offset, previousPartition: previous, results };
      continue;
    }
    switch (letters[i]) {
      case 'F':
        out[i] = { verdict: 'FENCE', offset, epoch: number };
        break;
      case 'S':
        out[i] = { verdict: 'SKIP', offset };
        break;
      case 'C':
        if (current === undefined) {
          if (at >= reply.length) throw badReply('a payload is missing');
          current = decodeToken(asBuffer(reply[at++]));
        }
        out[i] = { verdict: 'CONFLICT', offset, current };
        break;
      case 'R': {
        if (at >= reply.length) throw badReply('a payload is missing');
        const entry = asBuffer(reply[at++]);
        if (entry[0] === 0x64)
          out[i] = { verdict: 'REEMIT', offset, deadLetter: entry.subarray(1).toString('utf8') };
        else out[i] = { verdict: 'REEMIT', offset, results: decodeResults(entry, -1) };
        break;
      }
      case 'X':
        if (at >= reply.length) throw badReply('a payload is missing');
        out[i] = { verdict: 'REJECT', offset, reason: asBuffer(reply[at++]).toString('utf8') };
        break;
      default:
        throw badReply(`unknown verdict ${JSON.stringify(letters[i])}`);
    }
  }
  if (at !== reply.length) throw badReply('more payloads than records');
  return out;
}

function decodeToken(b: Buffer): StoreToken | null {
  const t = b.toString('latin1');
  if (t === '-') return null;
  const m = /^(\d+):(\d+)(?::(\d+))?$/.exec(t);
  if (m === null) throw badReply('a malformed token');
  const token = { partition: Number(m[1]), offset: Number(m[2]) };
  return m[3] === undefined ? token : { ...token, generation: Number(m[3]) };
}

/** Reads a keyCallMany reply: one result list per call. */
export function decodeKeyCallMany(encoded: EncodedMany, reply: unknown): KeyRecordResult[][] {
  const n = encoded.starts.length - 1;
  if (!Array.isArray(reply) || reply.length !== n) throw badReply(`keyCallMany: expected ${n} replies`);
  const out: KeyRecordResult[][] = new Array(n);
  for (let i = 0; i < n; i++)
    out[i] = decodeKeyCall(encoded, reply[i], encoded.starts[i] as number, encoded.starts[i + 1] as number);
  return out;
}
