/**
 * The key call's replies read back (the other half of codec.ts): the script's reply into one result
 * per record, a pending entry into its effects' results, a keyCallMany reply into one list per call.
 * A reply of an unknown shape is RF_BAD_REPLY, never a value.
 */
import { RedfenceError } from '../errors/index.js';
import type { EncodedCall, EncodedMany } from './codec.js';
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
  if (!Array.isArray(reply) || reply.length !== encoded.calls.length)
    throw badReply(`keyCallMany: expected ${encoded.calls.length} replies`);
  return encoded.calls.map((c, i) => decodeKeyCall(c, reply[i]));
}
