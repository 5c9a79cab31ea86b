/**
 * Non-blocking retry topics for handlers, in Spring Kafka's layout: pure parts (options, backoff
 * steps, topic names, header encodings, the forwarded record). No I/O.
 *
 * Checked against spring-projects/spring-kafka `retrytopic/DeadLetterPublishingRecovererFactory.java`
 * (main branch): `retry_topic-attempts` is `ByteBuffer.putInt(attempts + 1)` (4 bytes big-endian; a
 * 1-byte value is read too, for older writers; out of 1..32767 reads as 1), the delivery attempt
 * of the record in the next topic, the main topic's delivery being attempt 1 (no header);
 * `retry_topic-backoff-timestamp` and `retry_topic-original-timestamp` are
 * `BigInteger.valueOf(long).toByteArray()`: minimal two's-complement big-endian bytes (6 bytes for
 * today's epoch milliseconds), not a fixed 8-byte long and not text. The original timestamp is the
 * first hop's record timestamp, carried on. Every hop appends its values
 * (`retainAllRetryHeaderValues`, default true); readers take the last. The recoverer is set with
 * `appendOriginalHeaders(false)`: the `kafka_dlt-original-*` headers name the main topic's record on
 * every hop and on the DLT, the exception headers are replaced on each hop. The record goes to the
 * same partition number of the next topic.
 */

import { buildDeadLetter, DEAD_LETTER_HEADERS } from '../dead-letter/build.js';
import type { Headers, InRecord, OutRecord } from '../kafka/types.js';
import { checkKeys, integer, invalid, isObject, MAX_TIMER_MS, oneOf, shown } from '../options/checks.js';

export const RETRY_TOPIC_HEADERS = {
  attempts: 'retry_topic-attempts',
  backoffTimestamp: 'retry_topic-backoff-timestamp',
  originalTimestamp: 'retry_topic-original-timestamp',
} as const;

export interface RetryBackoff {
  /** `fixed`: every step waits `delayMs`; `exponential`: `delayMs * multiplier^(step-1)`, capped at `maxDelayMs`. */
  kind?: 'fixed' | 'exponential';
  /** Delay of the first retry topic. Default 1000. */
  delayMs?: number;
  /** Exponential only. Default 2. */
  multiplier?: number;
  /** Exponential only: the longest delay; later steps reuse its topic. Default 30000. */
  maxDelayMs?: number;
}

export interface RetryTopicsOptions {
  backoff?: RetryBackoff;
  /** Deliveries in all, the main topic's included (Spring's `attempts`): 3 = main + 2 retry topics. Default 3. */
  maxAttempts?: number;
  /** `always`: fatal and exhausted records to the DLT; `on-fatal`: only fatal ones (exhausted ones are dropped, counted); `none`: none (dropped, counted). Default `always`. */
  dlt?: 'always' | 'on-fatal' | 'none';
  /** Keep per-key order across the retry chain (Redis; see docs/handlers.md). Default false. */
  keyOrder?: boolean;
}

export interface ResolvedRetryTopics {
  readonly kind: 'fixed' | 'exponential';
  /** Delay of each retry step, step 1 first: `maxAttempts - 1` entries. */
  readonly delays: readonly number[];
  readonly maxAttempts: number;
  readonly dlt: 'always' | 'on-fatal' | 'none';
  readonly keyOrder: boolean;
}

const TOPICS_NAMES: Record<keyof RetryTopicsOptions, true> = {
  backoff: true,
  maxAttempts: true,
  dlt: true,
  keyOrder: true,
};
const BACKOFF_NAMES: Record<keyof RetryBackoff, true> = {
  kind: true,
  delayMs: true,
  multiplier: true,
  maxDelayMs: true,
};

/** Validates `retry.topics`; undefined when not configured (in-place retries only). */
export function resolveRetryTopics(v: unknown, what: string): ResolvedRetryTopics | undefined {
  if (v === undefined) return undefined;
  if (!isObject(v)) throw invalid(`option "retry.topics" must be an object, got ${shown(v)}`);
  checkKeys('retry.topics', v, TOPICS_NAMES, what);
  const b = v.backoff ?? {};
  if (!isObject(b)) throw invalid(`option "retry.topics.backoff" must be an object, got ${shown(b)}`);
  checkKeys('retry.topics.backoff', b, BACKOFF_NAMES, what);
  const kind = oneOf('retry.topics.backoff.kind', b.kind, ['fixed', 'exponential'] as const, 'fixed');
  const delayMs = integer('retry.topics.backoff.delayMs', b.delayMs, 1, MAX_TIMER_MS, 1000);
  if (kind === 'fixed' && (b.multiplier !== undefined || b.maxDelayMs !== undefined))
    throw invalid('option "retry.topics.backoff.multiplier"/"maxDelayMs" apply to kind "exponential" only');
  const m = b.multiplier ?? 2;
  if (typeof m !== 'number' || !Number.isFinite(m) || m < 1 || m > 100)
    throw invalid(`option "retry.topics.backoff.multiplier" must be a number from 1 to 100, got ${shown(m)}`);
  const maxDelayMs = integer(
    'retry.topics.backoff.maxDelayMs',
    b.maxDelayMs,
    1,
    MAX_TIMER_MS,
    Math.max(30_000, delayMs),
  );
  if (maxDelayMs < delayMs)
    throw invalid(
      `option "retry.topics.backoff.maxDelayMs" (${maxDelayMs}) must be >= "retry.topics.backoff.delayMs" (${delayMs})`,
    );
  const maxAttempts = integer('retry.topics.maxAttempts', v.maxAttempts, 2, 1000, 3);
  const dlt = oneOf('retry.topics.dlt', v.dlt, ['always', 'on-fatal', 'none'] as const, 'always');
  if (v.keyOrder !== undefined && typeof v.keyOrder !== 'boolean')
    throw invalid(`option "retry.topics.keyOrder" must be true or false, got ${shown(v.keyOrder)}`);
  return {
    kind,
    delays: stepDelays(kind, delayMs, m, maxDelayMs, maxAttempts - 1),
    maxAttempts,
    dlt,
    keyOrder: v.keyOrder === true,
  };
}

/** The delay of each of `steps` retry steps. */
export function stepDelays(
  kind: 'fixed' | 'exponential',
  delayMs: number,
  multiplier: number,
  maxDelayMs: number,
  steps: number,
): number[] {
  const out: number[] = [];
  let d = delayMs;
  for (let i = 0; i < steps; i++) {
    out.push(kind === 'fixed' ? delayMs : Math.min(Math.round(d), maxDelayMs));
    d *= multiplier;
  }
  return out;
}

/** `<input>-retry-<delayMs>` (Spring's suffix by delay value). */
export function retryTopicName(input: string, delayMs: number): string {
  return `${input}-retry-${delayMs}`;
}

/** Every retry topic of a chain, one per distinct delay, in step order. */
export function retryTopicNames(input: string, topics: ResolvedRetryTopics): string[] {
  return [...new Set(topics.delays.map((d) => retryTopicName(input, d)))];
}

/** Java's `BigInteger.valueOf(n).toByteArray()`: minimal two's-complement, big-endian. */
export function bigIntegerBytes(n: bigint): Buffer {
  let len = 1;
  while (n < -(1n << BigInt(8 * len - 1)) || n >= 1n << BigInt(8 * len - 1)) len++;
  const out = Buffer.alloc(len);
  let v = BigInt.asUintN(8 * len, n);
  for (let i = len - 1; i >= 0; i--) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}

/** `new BigInteger(bytes)`; undefined for an empty value or one longer than a long. */
export function readBigInteger(b: Buffer): bigint | undefined {
  if (b.length === 0 || b.length > 8) return undefined;
  let v = 0n;
  for (const x of b) v = (v << 8n) | BigInt(x);
  if ((b[0] as number) & 0x80) v -= 1n << BigInt(8 * b.length);
  return v;
}

/** The last value of a header, as bytes. */
export function lastHeader(headers: Headers, name: string): Buffer | undefined {
  const v = headers[name];
  const x = Array.isArray(v) ? v[v.length - 1] : v;
  return x === undefined ? undefined : typeof x === 'string' ? Buffer.from(x, 'utf8') : x;
}

/** The delivery attempt a record's `retry_topic-attempts` says (Spring's `getAttempts`): 1 when absent. */
export function readAttempts(headers: Headers): number {
  const b = lastHeader(headers, RETRY_TOPIC_HEADERS.attempts);
  if (b === undefined) return 1;
  const raw = b.length === 1 ? (b[0] as number) : b.length === 4 ? b.readInt32BE(0) : 0;
  return raw >= 1 && raw <= 0x7fff ? raw : 1;
}

export function attemptsBytes(attempts: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(attempts, 0);
  return b;
}

/**
 * When a retry-topic record is due (epoch ms), from `retry_topic-backoff-timestamp`; 0 (due now)
 * when absent or unreadable. Decimal text is read too (a header set by hand).
 */
export function readDueMs(headers: Headers): number {
  const b = lastHeader(headers, RETRY_TOPIC_HEADERS.backoffTimestamp);
  if (b === undefined) return 0;
  if (b.length >= 10 && /^\d+$/.test(b.toString('latin1'))) return Number(b.toString('latin1'));
  const v = readBigInteger(b);
  return v === undefined || v < 0n ? 0 : Number(v);
}

function append(headers: Record<string, Buffer | Buffer[]>, name: string, value: Buffer): void {
  const had = headers[name];
  headers[name] = had === undefined ? value : [...(Array.isArray(had) ? had : [had]), value];
}

const ORIGINAL_NAMES = [
  DEAD_LETTER_HEADERS.originalTopic,
  DEAD_LETTER_HEADERS.originalPartition,
  DEAD_LETTER_HEADERS.originalOffset,
  DEAD_LETTER_HEADERS.originalTimestamp,
  DEAD_LETTER_HEADERS.originalTimestampType,
  DEAD_LETTER_HEADERS.consumerGroup,
];

function asBuffers(v: Headers[string]): Buffer | Buffer[] | undefined {
  if (v === undefined) return undefined;
  const one = (x: Buffer | string) => (typeof x === 'string' ? Buffer.from(x, 'utf8') : x);
  return Array.isArray(v) ? v.map(one) : one(v);
}

/**
 * Spring's `appendOriginalHeaders(false)`: when the consumed record carries `kafka_dlt-original-*`
 * already (it came from a retry topic), they are kept as they were instead of gaining this hop.
 */
export function keepFirstOriginals(out: Record<string, Buffer | Buffer[] | string>, source: Headers): void {
  if (source[DEAD_LETTER_HEADERS.originalTopic] === undefined) return;
  for (const name of ORIGINAL_NAMES) {
    const v = asBuffers(source[name]);
    if (v === undefined) delete out[name];
    else out[name] = v;
  }
}

export interface ForwardInput {
  readonly record: InRecord;
  readonly topic: string;
  readonly groupId: string;
  readonly error: unknown;
  /** The delivery attempt of the record in `topic` (written to `retry_topic-attempts`). */
  readonly attempts: number;
  readonly dueMs: number;
}

/** The record to produce to the next retry topic: key, value and headers kept, Spring's headers added. */
export function retryRecord(f: ForwardInput): OutRecord {
  const r = f.record;
  const dl = buildDeadLetter({
    source: {
      topic: r.topic,
      partition: r.partition,
      offset: r.offset,
      timestamp: r.timestamp,
      key: r.key,
      value: r.value,
      headers: r.headers,
    },
    consumerGroup: f.groupId,
    reason: 'processing-error',
    error: f.error,
  });
  const headers = dl.headers;
  keepFirstOriginals(headers, r.headers);
  const original =
    lastHeader(r.headers, RETRY_TOPIC_HEADERS.originalTimestamp) ??
    bigIntegerBytes(BigInt(r.timestamp || '-1'));
  append(headers, RETRY_TOPIC_HEADERS.originalTimestamp, original);
  append(headers, RETRY_TOPIC_HEADERS.attempts, attemptsBytes(f.attempts));
  append(headers, RETRY_TOPIC_HEADERS.backoffTimestamp, bigIntegerBytes(BigInt(Math.round(f.dueMs))));
  return { topic: f.topic, partition: r.partition, key: r.key, value: r.value, headers };
}
