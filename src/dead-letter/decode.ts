/**
 * Reads the headers of a dead letter written by any of four writers into one shape. Pure: no I/O.
 *
 * - redfence (build.ts): Spring's `kafka_dlt-*` headers plus `redfence-reason`.
 * - Spring Kafka's `DeadLetterPublishingRecoverer`: `kafka_dlt-original-topic` (UTF-8),
 *   `-original-partition` (4 bytes big-endian), `-original-offset` and `-original-timestamp` (8 bytes
 *   big-endian), `kafka_dlt-exception-fqcn`, `-exception-message`, `-exception-stacktrace` (UTF-8).
 * - Kafka Connect's `DeadLetterQueueReporter` (`errors.deadletterqueue.context.headers.enable`):
 *   `__connect.errors.topic`, `.partition`, `.offset` (decimal text: `String.valueOf(n)` in UTF-8),
 *   `.exception.class.name`, `.exception.message`, `.exception.stacktrace`, `.stage`,
 *   `.connector.name`, `.task.id`.
 * - Kafka Streams (KIP-1034, `ExceptionHandlerUtils`): `__streams.errors.topic`, `.partition`,
 *   `.offset` (decimal text, UTF-8), `.exception` (the class name), `.message`, `.stacktrace`.
 *
 * A header given more than once is read by its last value (Kafka's `lastHeader`: the newest hop of a
 * record dead-lettered twice). Integers are read as the writer's binary width when the value has that
 * many bytes, else as decimal text, so a header set by hand still reads. A malformed field is left
 * undefined and named in `problems`; decoding never throws.
 */
import { CONNECT, REDFENCE_REASON, SPRING, STREAMS } from './headers.js';

export type DlqScheme = 'redfence' | 'spring' | 'connect' | 'streams';

/** Header name -> every value, in order (as read.ts hands them over). */
export type DlqHeaders = ReadonlyMap<string, readonly Buffer[]>;

/** What a dead letter says about the record that failed and why. */
export interface DeadLetterInfo {
  scheme: DlqScheme;
  originalTopic: string | undefined;
  originalPartition: number | undefined;
  originalOffset: bigint | undefined;
  /** Milliseconds since the epoch (Spring and redfence only). */
  originalTimestamp: bigint | undefined;
  exceptionClass: string | undefined;
  exceptionMessage: string | undefined;
  stacktrace: string | undefined;
  /** redfence's `redfence-reason`; undefined for the other writers. */
  reason: string | undefined;
  /** The consumer group (Spring, redfence) when written. */
  consumerGroup: string | undefined;
  /** Kafka Connect's stage, connector and task, when written. */
  stage: string | undefined;
  connector: string | undefined;
  task: string | undefined;
  /** Fields that were present but could not be read, e.g. `__connect.errors.offset: not an integer`. */
  problems: string[];
}

const INT32_MAX = 0x7fffffffn;
const INT64_MAX = 2n ** 63n - 1n;

function last(headers: DlqHeaders, name: string): Buffer | undefined {
  const values = headers.get(name);
  return values === undefined ? undefined : values[values.length - 1];
}

function text(headers: DlqHeaders, name: string): string | undefined {
  return last(headers, name)?.toString('utf8');
}

/** An integer header: `width` big-endian bytes when it has exactly that length, else decimal text. */
function integer(
  headers: DlqHeaders,
  name: string,
  width: 4 | 8 | undefined,
  min: bigint,
  max: bigint,
  problems: string[],
): bigint | undefined {
  const value = last(headers, name);
  if (value === undefined) return undefined;
  let n: bigint | undefined;
  if (width !== undefined && value.length === width) {
    n = width === 4 ? BigInt(value.readInt32BE(0)) : value.readBigInt64BE(0);
  } else {
    const s = value.toString('latin1').trim();
    if (/^-?\d{1,20}$/.test(s)) n = BigInt(s);
  }
  if (n === undefined || n < min || n > max) {
    problems.push(`${name}: not an integer from ${min} to ${max}`);
    return undefined;
  }
  return n;
}

function base(scheme: DlqScheme): DeadLetterInfo {
  return {
    scheme,
    originalTopic: undefined,
    originalPartition: undefined,
    originalOffset: undefined,
    originalTimestamp: undefined,
    exceptionClass: undefined,
    exceptionMessage: undefined,
    stacktrace: undefined,
    reason: undefined,
    consumerGroup: undefined,
    stage: undefined,
    connector: undefined,
    task: undefined,
    problems: [],
  };
}

/**
 * Whether redfence wrote the newest hop: its exception class always starts with `redfence.`. A Spring
 * application that dead-letters a redfence dead letter again replaces the exception headers but keeps
 * `redfence-reason`, which then tells why the older hop failed, not the newest.
 */
function redfenceWroteNewestHop(headers: DlqHeaders): boolean {
  const fqcn = text(headers, SPRING.exception);
  return fqcn === undefined || fqcn.startsWith('redfence.');
}

/** Which writer's headers the record carries; Spring's family first, then Streams, then Connect. */
export function schemeOf(headers: DlqHeaders): DlqScheme | undefined {
  if (headers.has(SPRING.topic) || headers.has(SPRING.exception)) {
    return headers.has(REDFENCE_REASON) && redfenceWroteNewestHop(headers) ? 'redfence' : 'spring';
  }
  if (headers.has(STREAMS.topic) || headers.has(STREAMS.exception)) return 'streams';
  if (headers.has(CONNECT.topic) || headers.has(CONNECT.exception)) return 'connect';
  return undefined;
}

/**
 * Decodes a dead letter's headers, or returns undefined when they carry none of the four schemes.
 * @example
 * decodeDeadLetter(new Map([['__connect.errors.topic', [Buffer.from('orders')]],
 *                           ['__connect.errors.partition', [Buffer.from('2')]]]))
 * // => { scheme: 'connect', originalTopic: 'orders', originalPartition: 2, ... }
 */
export function decodeDeadLetter(headers: DlqHeaders): DeadLetterInfo | undefined {
  const scheme = schemeOf(headers);
  if (scheme === undefined) return undefined;
  const info = base(scheme);
  const p = info.problems;
  if (scheme === 'redfence' || scheme === 'spring') {
    info.originalTopic = text(headers, SPRING.topic);
    const partition = integer(headers, SPRING.partition, 4, 0n, INT32_MAX, p);
    info.originalPartition = partition === undefined ? undefined : Number(partition);
    info.originalOffset = integer(headers, SPRING.offset, 8, 0n, INT64_MAX, p);
    info.originalTimestamp = integer(headers, SPRING.timestamp, 8, -(2n ** 63n), INT64_MAX, p);
    info.exceptionClass = text(headers, SPRING.exception);
    info.exceptionMessage = text(headers, SPRING.message);
    info.stacktrace = text(headers, SPRING.stacktrace);
    info.consumerGroup = text(headers, SPRING.group);
    if (scheme === 'redfence') info.reason = text(headers, REDFENCE_REASON);
    return info;
  }
  const names = scheme === 'streams' ? STREAMS : CONNECT;
  info.originalTopic = text(headers, names.topic);
  const partition = integer(headers, names.partition, undefined, 0n, INT32_MAX, p);
  info.originalPartition = partition === undefined ? undefined : Number(partition);
  info.originalOffset = integer(headers, names.offset, undefined, 0n, INT64_MAX, p);
  info.exceptionClass = text(headers, names.exception);
  info.exceptionMessage = text(headers, names.message);
  info.stacktrace = text(headers, names.stacktrace);
  if (scheme === 'connect') {
    info.stage = text(headers, CONNECT.stage);
    info.connector = text(headers, CONNECT.connector);
    info.task = text(headers, CONNECT.task);
  }
  return info;
}

/**
 * The headers as text for `dlq show`: the dead-letter headers decoded (numbers as numbers), every
 * other header as UTF-8 when it is valid UTF-8 without control characters, else `base64:<...>`.
 */
export function headersForDisplay(headers: DlqHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, values] of headers) {
    const shown = values.map((v) => showValue(name, v));
    out[name] = shown.length === 1 ? (shown[0] as string) : shown;
  }
  return out;
}

function showValue(name: string, v: Buffer): string {
  if ((name === SPRING.partition || name === 'retry_topic-attempts') && v.length === 4)
    return String(v.readInt32BE(0));
  if (name === 'retry_topic-backoff-timestamp' || name === 'retry_topic-original-timestamp') {
    const n = javaBigInteger(v);
    if (n !== undefined) return String(n);
  }
  if ((name === SPRING.offset || name === SPRING.timestamp) && v.length === 8) {
    return String(v.readBigInt64BE(0));
  }
  const s = v.toString('utf8');
  // biome-ignore lint/suspicious/noControlCharactersInRegex: binary detection
  const binary = s.includes('\uFFFD') || /[\u0000-\u0008\u000E-\u001F]/.test(s);
  return binary ? `base64:${v.toString('base64')}` : s;
}

/** Spring Kafka's retry-topic headers (src/retry/retry-topics.ts has the encodings), decoded. */
export interface RetryTopicInfo {
  /** `retry_topic-attempts`: the delivery attempt of the record in the topic it was written to. */
  attempts: number | undefined;
  /** `retry_topic-backoff-timestamp`: when it was due, epoch ms. */
  backoffTimestamp: bigint | undefined;
  /** `retry_topic-original-timestamp`: the main topic record's timestamp, epoch ms. */
  originalTimestamp: bigint | undefined;
}

function javaBigInteger(b: Buffer | undefined): bigint | undefined {
  if (b === undefined || b.length === 0 || b.length > 8) return undefined;
  let v = 0n;
  for (const x of b) v = (v << 8n) | BigInt(x);
  return (b[0] as number) & 0x80 ? v - (1n << BigInt(8 * b.length)) : v;
}

/**
 * Reads `retry_topic-*` (last values): attempts as a 4-byte (or 1-byte) big-endian int, the two
 * timestamps as Java `BigInteger.toByteArray()` bytes.
 */
export function decodeRetryTopicHeaders(headers: DlqHeaders): RetryTopicInfo {
  const a = last(headers, 'retry_topic-attempts');
  const attempts = a?.length === 4 ? a.readInt32BE(0) : a?.length === 1 ? (a[0] as number) : undefined;
  return {
    attempts,
    backoffTimestamp: javaBigInteger(last(headers, 'retry_topic-backoff-timestamp')),
    originalTimestamp: javaBigInteger(last(headers, 'retry_topic-original-timestamp')),
  };
}
