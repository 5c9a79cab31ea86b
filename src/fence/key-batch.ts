/**
 * The hot path's form of an apply: one partition batch written straight into the scripts' arguments
 * (protocol 6, lua/includes/applyCore.lua) and the replies read straight into arrays indexed by the
 * caller's record number, with no request or result object per record. {@link KeyBatch} is the
 * encoder (one per script round), {@link BatchResults} the decoded verdicts (one per batch, filled by
 * every round), {@link decodeKey} the translator of one key's reply. `Fence.applyBatch` keeps the
 * object form for every other caller; both send the same arguments and take the same verdicts.
 */
import { RedfenceError } from '../errors/index.js';
import { checkPartition, checkTopic } from '../keys/index.js';
import { bytes, num, operationText, PROTOCOL, parseToken, text, tokenText } from './codec.js';
import type { RedisArg } from './redis-port.js';
import type { FenceToken, Operation, RecordResult } from './types.js';

function bad(message: string): RedfenceError {
  return new RedfenceError('RF_INVALID_ARGUMENT', message);
}

/** What a record emits: 0 nothing, 1 the given bytes, 2 the key's value after it, 3 a null (tombstone). */
/** 0 none, 1 the given bytes, 2 the state after the record, 3 a null, 4 a dead letter (its reason given). */
export type OutputMode = 0 | 1 | 2 | 3 | 4;
const MODE_TEXT = ['0', '1', '2', '3', '4'] as const;

/** Verdict letters as the scripts reply them (and as {@link BatchResults.verdicts} holds them; 0: none). */
export const V = {
  APPLY: 65,
  REBASE: 66,
  SKIP: 83,
  REEMIT: 82,
  FENCE: 70,
  CONFLICT: 67,
  REJECT: 88,
} as const;

/** The verdict name of a letter in {@link BatchResults.verdicts}. */
export const VERDICT_OF: Readonly<Record<number, RecordResult['verdict']>> = {
  65: 'APPLY',
  66: 'REBASE',
  83: 'SKIP',
  82: 'REEMIT',
  70: 'FENCE',
  67: 'CONFLICT',
  88: 'REJECT',
};

/**
 * The decoded verdicts of one batch, by the caller's record number (its tag): the letter, the output
 * (APPLY/REBASE with a `state` output, REEMIT of an output; undefined: none, null: a tombstone), and a
 * result object only for the rare ones: REBASE, REEMIT of a dead letter, FENCE, CONFLICT, REJECT.
 */
export class BatchResults {
  readonly verdicts: Uint8Array;
  readonly outputs: (Buffer | null | undefined)[];
  readonly rare = new Map<number, RecordResult>();
  /** True once any record answered FENCE: a newer owner holds the partition. */
  fenced = false;

  constructor(size: number) {
    this.verdicts = new Uint8Array(size);
    this.outputs = new Array(size);
  }
}

/**
 * One round of script calls for one partition batch: `key()` opens a key, `record()`/`cas()` add its
 * records in increasing offset order. Checks what it is given as it goes (topic and partition once):
 * nothing is sent on bad input.
 */
export class KeyBatch {
  readonly topic: string;
  readonly partition: number;
  readonly epoch: number;
  readonly committedOffset: number;
  /** Per key: its Redis key name, the user key, where its arguments start in `args`, its first record. */
  readonly names: string[] = [];
  readonly userKeys: string[] = [];
  readonly argStart: number[] = [];
  readonly firstRecord: number[] = [];
  /** Per key: the highest offset with an output (-1: none), for a caller-side pending index. */
  readonly topOutput: number[] = [];
  /** Every key's arguments back to back: its record text, its records' binary arguments. */
  readonly args: RedisArg[] = [];
  /** Per record, in key order: its offset, its output mode, the caller's record number. */
  readonly offsets: number[] = [];
  readonly modes: number[] = [];
  readonly tags: number[] = [];
  readonly #name: (key: string) => string;
  #spec = '';
  #n = 0;
  #last = -1;

  constructor(
    name: (key: string) => string,
    topic: string,
    partition: number,
    epoch: number,
    committedOffset: number,
  ) {
    checkTopic(topic);
    checkPartition(partition);
    if (!Number.isSafeInteger(epoch) || epoch < 0)
      throw bad(`epoch must be a non-negative integer, got ${String(epoch)}`);
    if (!Number.isSafeInteger(committedOffset) || committedOffset < -1)
      throw bad(`committedOffset must be an integer >= -1, got ${String(committedOffset)}`);
    this.#name = name;
    this.topic = topic;
    this.partition = partition;
    this.epoch = epoch;
    this.committedOffset = committedOffset;
  }

  /** Keys with at least one record. */
  get size(): number {
    this.#close();
    return this.names.length;
  }

  /** Opens user key `key`; its records follow. A key left without records is dropped. */
  key(key: string): void {
    this.#close();
    this.names.push(this.#name(key));
    this.userKeys.push(key);
    this.argStart.push(this.args.length);
    this.firstRecord.push(this.offsets.length);
    this.topOutput.push(-1);
    this.args.push(''); // the record text, set when the key closes
    this.#spec = '';
    this.#n = 0;
    this.#last = -1;
  }

  /** A record of the open key: its operation and what it emits (`out`: the bytes of mode 1). */
  record(tag: number, offset: number, op: Operation, mode: OutputMode, out?: string | Uint8Array): void {
    const i = this.#check(offset);
    this.#spec += `${offset},${operationText(op, MODE_TEXT[mode], this.args, i)};`;
    this.#push(tag, offset, mode, out, i);
  }

  /** A compare-and-set record of the open key (the reducer path), without an operation object. */
  cas(
    tag: number,
    offset: number,
    expected: FenceToken | null,
    value: string | Uint8Array,
    mode: OutputMode,
    out?: string | Uint8Array,
  ): void {
    const i = this.#check(offset);
    this.args.push(bytes(value, i, 'operation.value'), tokenText(expected));
    this.#spec += `${offset},c${MODE_TEXT[mode]},;`;
    this.#push(tag, offset, mode, out, i);
  }

  /** The arguments every call of this batch starts with (protocol 6's header and the index flag). */
  header(ttlMs: number, index: boolean): RedisArg[] {
    this.#close();
    return [
      PROTOCOL,
      String(this.partition),
      String(this.epoch),
      String(this.committedOffset),
      String(ttlMs),
      index ? '1' : '0',
    ];
  }

  /** Where key k's arguments end in `args`. */
  argEnd(k: number): number {
    this.#close();
    return k + 1 < this.argStart.length ? (this.argStart[k + 1] as number) : this.args.length;
  }

  /** Where key k's records end in `offsets`. */
  recordEnd(k: number): number {
    return k + 1 < this.firstRecord.length ? (this.firstRecord[k + 1] as number) : this.offsets.length;
  }

  #check(offset: number): number {
    if (this.names.length === 0) throw bad('a record before its key');
    const i = this.#n;
    if (!Number.isSafeInteger(offset) || offset < 0)
      throw bad(`records[${i}].offset must be a non-negative safe integer, got ${String(offset)}`);
    if (offset <= this.#last)
      throw bad(
        `records[${i}].offset must be greater than the previous record's (${this.#last}), got ${offset}`,
      );
    return i;
  }

  #push(
    tag: number,
    offset: number,
    mode: OutputMode,
    out: string | Uint8Array | undefined,
    i: number,
  ): void {
    if (mode === 1 || mode === 4) {
      if (out === undefined) throw bad(`records[${i}].output: mode ${mode} needs its bytes`);
      this.args.push(bytes(out, i, 'output.value'));
    }
    if (mode !== 0) this.topOutput[this.topOutput.length - 1] = offset;
    this.offsets.push(offset);
    this.modes.push(mode);
    this.tags.push(tag);
    this.#last = offset;
    this.#n++;
  }

  /** Writes the open key's record text, or drops the key when it has no record. */
  #close(): void {
    const k = this.names.length - 1;
    if (k < 0 || this.args[this.argStart[k] as number] !== '') return;
    const at = this.argStart[k] as number;
    if (this.#n === 0) {
      this.args.length = at;
      this.names.pop();
      this.userKeys.pop();
      this.argStart.pop();
      this.firstRecord.pop();
      this.topOutput.pop();
      return;
    }
    this.args[at] = this.#spec;
  }
}

function reply(what: string): RedfenceError {
  return new RedfenceError('RF_BAD_REPLY', what);
}

/** The output bytes of a pending entry: undefined for a dead letter ('d'). */
function entryOutput(raw: unknown): Buffer | null | undefined {
  if (!Buffer.isBuffer(raw)) throw reply('apply reply is missing a payload');
  const kind = raw[0];
  if (kind === 0x6f /* o */) return raw.subarray(1);
  if (kind === 0x6e /* n */) return null;
  if (kind === 0x64 /* d */) return undefined;
  throw reply(`unknown pending entry kind ${String(kind)}`);
}

/**
 * Reads key k's whole reply (a one-key script's) into `into` (the same checks as `decodeApply`).
 * Returns true when any of its records answered CONFLICT (a reducer reads the key again and sends it
 * again).
 */
export function decodeKey(batch: KeyBatch, k: number, r: unknown, into: BatchResults): boolean {
  if (!Array.isArray(r)) throw reply(`apply replied with ${typeof r} entries`);
  const next = decodeKeyAt(batch, k, r, 0, into);
  if (next < 0) {
    if (~next !== r.length) throw reply(`apply reply has ${r.length - ~next} unread payloads`);
    return true;
  }
  if (next !== r.length) throw reply(`apply reply has ${r.length - next} unread payloads`);
  return false;
}

/**
 * Reads key k's part of a many-key reply (the keys' parts one after another), from `r[at]`, into
 * `into`. Returns where the next key's part starts, bitwise negated (`~next`, below 0) when any of the
 * key's records answered CONFLICT: a number, so that reading a key makes no object.
 */
export function decodeKeyAt(
  batch: KeyBatch,
  k: number,
  r: readonly unknown[],
  at: number,
  into: BatchResults,
): number {
  if (r.length - at < 3) throw reply(`apply replied with ${r.length - at} entries`);
  const from = batch.firstRecord[k] as number;
  const to = batch.recordEnd(k);
  const letters = text(r[at]);
  if (letters.length !== to - from)
    throw reply(`apply replied with ${letters.length} verdicts for ${to - from} records`);
  const number = num(r[at + 1]);
  let next = at + 3;
  let conflict = false;
  const { verdicts, outputs, rare } = into;
  for (let j = from; j < to; j++) {
    const tag = batch.tags[j] as number;
    const offset = batch.offsets[j] as number;
    const letter = letters.charCodeAt(j - from);
    if (rare.size !== 0) rare.delete(tag); // an earlier round's verdict of this record
    switch (letter) {
      case V.APPLY:
      case V.REBASE: {
        let out: Buffer | null | undefined;
        if (batch.modes[j] === 2) {
          if (next >= r.length) throw reply('apply reply is missing a payload');
          out = entryOutput(r[next++]);
        }
        outputs[tag] = out;
        if (letter === V.REBASE) {
          const previousPartition = num(r[at + 2]);
          rare.set(
            tag,
            out === undefined
              ? { verdict: 'REBASE', offset, previousPartition }
              : { verdict: 'REBASE', offset, previousPartition, output: { value: out } },
          );
        }
        break;
      }
      case V.SKIP:
        outputs[tag] = undefined;
        break;
      case V.REEMIT: {
        if (next >= r.length) throw reply('apply reply is missing a payload');
        const raw = r[next++];
        const out = entryOutput(raw);
        outputs[tag] = out;
        if (out === undefined)
          rare.set(tag, {
            verdict: 'REEMIT',
            offset,
            deadLetter: (raw as Buffer).subarray(1).toString('utf8'),
          });
        break;
      }
      case V.FENCE:
        into.fenced = true;
        outputs[tag] = undefined;
        rare.set(tag, { verdict: 'FENCE', offset, epoch: number });
        break;
      case V.CONFLICT:
        if (next >= r.length) throw reply('apply reply is missing a payload');
        outputs[tag] = undefined;
        rare.set(tag, { verdict: 'CONFLICT', offset, current: parseToken(text(r[next++])) });
        conflict = true; // the caller reads the key and sends it again
        break;
      case V.REJECT:
        if (next >= r.length) throw reply('apply reply is missing a payload');
        outputs[tag] = undefined;
        rare.set(tag, { verdict: 'REJECT', offset, reason: text(r[next++]) });
        break;
      default:
        throw reply(`unknown verdict letter ${JSON.stringify(letters[j - from])}`);
    }
    verdicts[tag] = letter;
  }
  return conflict ? ~next : next;
}
