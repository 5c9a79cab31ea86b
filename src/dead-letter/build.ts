/**
 * Dead-letter records in the format of Spring Kafka's `DeadLetterPublishingRecoverer`, so a
 * dead-letter topic written by redfence reads the same as one written by a Spring application.
 * Pure: no Kafka client, no I/O; the processor sends what {@link buildDeadLetter} returns.
 * The header names and value tables are in headers.ts, shared with the readers (read-headers.ts for
 * this layout, decode.ts for all four), so writing and reading cannot drift apart. (Over ~400 lines:
 * Spring's encoding rules and the input checks they need stay beside the one function that applies them.)
 *
 * Checked against the Spring Kafka sources (spring-projects/spring-kafka, main branch, 4.0 line):
 * - `spring-kafka/src/main/java/org/springframework/kafka/support/KafkaHeaders.java`
 *   (commit 351d176878dc): `PREFIX = "kafka_"`; `DLT_ORIGINAL_TOPIC`, `DLT_ORIGINAL_PARTITION`,
 *   `DLT_ORIGINAL_OFFSET`, `DLT_ORIGINAL_TIMESTAMP`, `DLT_ORIGINAL_TIMESTAMP_TYPE` (since 2.2),
 *   `DLT_ORIGINAL_CONSUMER_GROUP = "kafka_dlt-original-consumer-group"` (since 2.8),
 *   `DLT_EXCEPTION_FQCN`, `DLT_EXCEPTION_MESSAGE`, `DLT_EXCEPTION_STACKTRACE` (since 2.2),
 *   `DLT_EXCEPTION_CAUSE_FQCN = "kafka_dlt-exception-cause-fqcn"` (since 2.8).
 * - `spring-kafka/src/main/java/org/springframework/kafka/listener/DeadLetterPublishingRecoverer.java`
 *   (commit e991de8f1678, copyright 2018-2025): topic, timestamp type, group, class names, message
 *   and stack trace are `getBytes(StandardCharsets.UTF_8)`; partition is
 *   `ByteBuffer.allocate(Integer.BYTES).putInt(...)` (4 bytes big-endian); offset and timestamp are
 *   `ByteBuffer.allocate(Long.BYTES).putLong(...)` (8 bytes big-endian). The timestamp type is
 *   `record.timestampType().toString()`, and Kafka's `TimestampType.toString()` (apache/kafka
 *   `clients/.../common/record/TimestampType.java`) returns its display name, so the bytes are
 *   `CreateTime` / `LogAppendTime`, not the Java constant names; we write the same.
 * - Spring keeps every original header (`new RecordHeaders(record.headers().toArray())`), appends
 *   the `kafka_dlt-original-*` headers (so a record dead-lettered twice carries both hops; the last
 *   value is the newest) and, by default (`stripPreviousExceptionHeaders`), replaces the exception
 *   headers. We do the same, and treat our `redfence-reason` like an exception header.
 * - Spring writes the consumer group only when it knows it (a `ListenerExecutionFailedException`
 *   with a group id); we always know it, so we always write it. Spring writes the cause class as
 *   the exception under its own listener wrappers (`ErrorHandlingUtils.findRootCause`) and builds
 *   the message as `message + "; " + causeMessage`; we write the class of the error's `cause`,
 *   when it has one, and build the message the same way.
 */
import { RedfenceError } from '../errors/index.js';
import {
  DEAD_LETTER_HEADERS,
  type DeadLetterReason,
  type HeaderValue,
  REASON_TEXT,
  REASONS,
  TIMESTAMP_TYPE_TEXT,
} from './headers.js';
import { causeOf, fqcnOf, stackWithCauses, textOf, withoutHostPaths } from './thrown.js';

export {
  DEAD_LETTER_HEADERS,
  type DeadLetterHeaders,
  type DeadLetterReason,
  type HeaderValue,
  type OriginalTimestampType,
} from './headers.js';

/** The failed input record, as consumed. */
export interface SourceRecord {
  topic: string;
  partition: number;
  /** Non-negative; a decimal string, a safe integer or a bigint. */
  offset: string | number | bigint;
  /** Milliseconds since the epoch, or -1 for "no timestamp"; a decimal string or an integer. */
  timestamp: string | number;
  /** Defaults to `CREATE_TIME`. */
  timestampType?: 'CREATE_TIME' | 'LOG_APPEND_TIME';
  key: Buffer | null;
  value: Buffer | null;
  headers: Record<string, HeaderValue>;
}

/** What {@link buildDeadLetter} needs to know about a failure. */
export interface DeadLetterInput {
  source: SourceRecord;
  consumerGroup: string;
  reason: DeadLetterReason;
  /** What was thrown, if anything: usually an `Error`, sometimes a string or another value. */
  error?: unknown;
  /**
   * The record's state changes were made before it failed: writes `redfence-state-applied: true`
   * (`dlq replay` leaves such a record out unless told: docs/dead-letters.md).
   */
  stateApplied?: boolean;
}

/** The record to produce to the dead-letter topic. */
export interface DeadLetterRecord {
  key: Buffer | null;
  value: Buffer | null;
  headers: Record<string, Buffer | Buffer[]>;
  /**
   * Never set by {@link buildDeadLetter}: the producer's partitioner places the record by its key. Spring's default
   * destination resolver reuses the source partition number, which only works when the dead-letter
   * topic has at least as many partitions as the source topic; we do not assume that.
   */
  partition?: number;
}

/** Options for {@link buildDeadLetter}. */
export interface DeadLetterOptions {
  /** The most UTF-8 bytes of stack trace to keep; default 8192. Cut on a character boundary. */
  maxStackTraceBytes?: number;
}

const H = DEAD_LETTER_HEADERS;

/** Headers describing the failure rather than the record: replaced, not appended, on each hop. */
const REPLACED_HEADERS: ReadonlySet<string> = new Set([
  H.exceptionFqcn,
  H.exceptionCauseFqcn,
  H.exceptionMessage,
  H.exceptionStacktrace,
  H.reason,
  H.stateApplied,
]);

const DEFAULT_MAX_STACK_TRACE_BYTES = 8192;
const MAX_MESSAGE_BYTES = 4096;
export const INT32_MAX = 0x7fffffff;
export const INT64_MAX = 2n ** 63n - 1n;
const TOPIC_PATTERN = /^[a-zA-Z0-9._-]{1,249}$/;

export function bad(field: string, problem: string): RedfenceError {
  return new RedfenceError('RF_INVALID_ARGUMENT', `${field} ${problem}`, { details: { field } });
}

export function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  return typeof value;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

// ---------------------------------------------------------------------------------------------
// Validation of the input record
// ---------------------------------------------------------------------------------------------

function checkTopic(topic: unknown, field: string): string {
  if (typeof topic !== 'string' || !TOPIC_PATTERN.test(topic)) {
    throw bad(field, `must be a Kafka topic name (1-249 of [a-zA-Z0-9._-]), got ${describe(topic)}`);
  }
  return topic;
}

function checkPartition(partition: unknown, field: string): number {
  if (
    typeof partition !== 'number' ||
    !Number.isInteger(partition) ||
    partition < 0 ||
    partition > INT32_MAX
  ) {
    throw bad(field, `must be an integer from 0 to ${INT32_MAX}, got ${describe(partition)}`);
  }
  return partition;
}

/** An integer given as a bigint, a safe-integer number or a decimal string, within [min, INT64_MAX]. */
function checkLong(value: unknown, field: string, min: bigint): bigint {
  let n: bigint | undefined;
  if (typeof value === 'bigint') n = value;
  else if (typeof value === 'number' && Number.isSafeInteger(value)) n = BigInt(value);
  else if (typeof value === 'string' && /^-?\d{1,20}$/.test(value)) n = BigInt(value);
  if (n === undefined || n < min || n > INT64_MAX) {
    const shown = typeof value === 'string' ? 'a string outside that' : describe(value);
    throw bad(
      field,
      `must be an integer from ${min} to ${INT64_MAX} (bigint, safe integer or decimal string), got ${shown}`,
    );
  }
  return n;
}

function checkBytes(value: unknown, field: string): Buffer | null {
  if (value !== null && !Buffer.isBuffer(value)) {
    throw bad(field, `must be a Buffer or null, got ${describe(value)}`);
  }
  return value;
}

function toHeaderBuffer(value: unknown, field: string): Buffer {
  if (Buffer.isBuffer(value)) return value;
  if (typeof value === 'string') return Buffer.from(value, 'utf8');
  throw bad(field, `must be a Buffer or a string, got ${describe(value)}`);
}

/** A copy of the source headers as Buffers; undefined values are dropped. Never touches `headers`. */
function copyHeaders(headers: unknown, field: string): Map<string, Buffer | Buffer[]> {
  if (!isRecord(headers)) throw bad(field, `must be an object, got ${describe(headers)}`);
  const out = new Map<string, Buffer | Buffer[]>();
  for (const [name, value] of Object.entries(headers)) {
    const where = `${field}[${JSON.stringify(name)}]`;
    if (value === undefined) continue;
    if (Array.isArray(value))
      out.set(
        name,
        value.map((v, i) => toHeaderBuffer(v, `${where}[${i}]`)),
      );
    else out.set(name, toHeaderBuffer(value, where));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Byte encodings (Java's ByteBuffer is big-endian)
// ---------------------------------------------------------------------------------------------

function int32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
}

function int64(n: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(n);
  return b;
}

function utf8(text: string): Buffer {
  return Buffer.from(text, 'utf8');
}

/**
 * The UTF-8 encoding of `text`, cut to at most `maxBytes` bytes without splitting a character:
 * the cut backs up over continuation bytes (10xxxxxx) to the start of the character it would split.
 */
function truncatedUtf8(text: string, maxBytes: number): Buffer {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return bytes;
  let end = maxBytes;
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end);
}

function pascalCase(reason: string): string {
  return reason
    .split('-')
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('');
}

interface ExceptionInfo {
  fqcn: string;
  causeFqcn: string | undefined;
  message: string;
  stacktrace: string;
}

function exceptionInfo(reason: DeadLetterReason, error: unknown): ExceptionInfo {
  if (error === undefined) {
    const fqcn = `redfence.${pascalCase(reason)}`;
    const message = REASON_TEXT[reason];
    return { fqcn, causeFqcn: undefined, message, stacktrace: `${fqcn}: ${message}` };
  }
  const cause = causeOf(error);
  const message = [textOf(error), cause === undefined ? '' : textOf(cause)]
    .filter((m) => m !== '')
    .join('; ');
  return {
    fqcn: fqcnOf(error),
    causeFqcn: cause === undefined ? undefined : fqcnOf(cause),
    message: withoutHostPaths(message),
    stacktrace: withoutHostPaths(stackWithCauses(error)),
  };
}

// ---------------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------------

/**
 * Builds the dead-letter record for a failed input record: the same key, value and headers, plus
 * the headers Spring Kafka's `DeadLetterPublishingRecoverer` writes (with its byte encodings) and
 * `redfence-reason`. The `kafka_dlt-original-*` headers are appended to any already present (a
 * record dead-lettered before keeps the earlier hop); the exception headers and `redfence-reason`
 * replace earlier ones. `partition` is left undefined so the key decides it. Nothing passed in is
 * modified; key, value and header Buffers are shared, not copied.
 *
 * @throws RedfenceError `RF_INVALID_ARGUMENT`, naming the field, for a malformed input.
 * @example
 * const dlq = buildDeadLetter({
 *   source: { topic: 'orders', partition: 3, offset: '1042', timestamp: 1700000000000,
 *             key: Buffer.from('customer-42'), value: Buffer.from('{}'), headers: { trace: 'abc' } },
 *   consumerGroup: 'billing',
 *   reason: 'processing-error',
 *   error: new TypeError('amount is not a number'),
 * });
 * await producer.send({ topic: 'orders.DLT', messages: [dlq] });
 * // dlq.headers['kafka_dlt-original-partition'] => <Buffer 00 00 00 03>
 * // dlq.headers['kafka_dlt-exception-fqcn'].toString() => 'redfence.TypeError'
 */
export function buildDeadLetter(input: DeadLetterInput, options: DeadLetterOptions = {}): DeadLetterRecord {
  if (!isRecord(input)) throw bad('input', `must be an object, got ${describe(input)}`);
  const opts: unknown = options;
  if (!isRecord(opts)) throw bad('options', `must be an object, got ${describe(opts)}`);
  const maxStackTraceBytes = opts.maxStackTraceBytes ?? DEFAULT_MAX_STACK_TRACE_BYTES;
  if (
    typeof maxStackTraceBytes !== 'number' ||
    !Number.isSafeInteger(maxStackTraceBytes) ||
    maxStackTraceBytes < 0
  ) {
    throw bad(
      'options.maxStackTraceBytes',
      `must be a non-negative integer, got ${describe(maxStackTraceBytes)}`,
    );
  }
  const source: unknown = input.source;
  if (!isRecord(source)) throw bad('source', `must be an object, got ${describe(source)}`);
  const topic = checkTopic(source.topic, 'source.topic');
  const partition = checkPartition(source.partition, 'source.partition');
  const offset = checkLong(source.offset, 'source.offset', 0n);
  const timestamp = checkLong(source.timestamp, 'source.timestamp', -1n);
  const timestampType = source.timestampType ?? 'CREATE_TIME';
  if (timestampType !== 'CREATE_TIME' && timestampType !== 'LOG_APPEND_TIME') {
    throw bad(
      'source.timestampType',
      `must be 'CREATE_TIME' or 'LOG_APPEND_TIME', got ${describe(timestampType)}`,
    );
  }
  const key = checkBytes(source.key, 'source.key');
  const value = checkBytes(source.value, 'source.value');
  const headers = copyHeaders(source.headers, 'source.headers');
  const consumerGroup: unknown = input.consumerGroup;
  if (typeof consumerGroup !== 'string' || consumerGroup === '') {
    throw bad('consumerGroup', `must be a non-empty string, got ${describe(consumerGroup)}`);
  }
  const reason: unknown = input.reason;
  if (typeof reason !== 'string' || !REASONS.has(reason)) {
    throw bad('reason', `must be one of ${[...REASONS].join(', ')}, got ${describe(reason)}`);
  }
  const info = exceptionInfo(reason as DeadLetterReason, input.error);

  // Spring's order: exception headers (replacing earlier ones), then the original-* headers (appended).
  for (const name of REPLACED_HEADERS) headers.delete(name);
  headers.set(H.exceptionFqcn, utf8(info.fqcn));
  if (info.causeFqcn !== undefined) headers.set(H.exceptionCauseFqcn, utf8(info.causeFqcn));
  headers.set(H.exceptionMessage, truncatedUtf8(info.message, MAX_MESSAGE_BYTES));
  headers.set(H.exceptionStacktrace, truncatedUtf8(info.stacktrace, maxStackTraceBytes));
  const append = (name: string, bytes: Buffer): void => {
    const existing = headers.get(name);
    if (existing === undefined) headers.set(name, bytes);
    else headers.set(name, Array.isArray(existing) ? [...existing, bytes] : [existing, bytes]);
  };
  append(H.originalTopic, utf8(topic));
  append(H.originalPartition, int32(partition));
  append(H.originalOffset, int64(offset));
  append(H.originalTimestamp, int64(timestamp));
  append(H.originalTimestampType, utf8(TIMESTAMP_TYPE_TEXT[timestampType]));
  append(H.consumerGroup, utf8(consumerGroup));
  headers.set(H.reason, utf8(reason));
  if (input.stateApplied === true) headers.set(H.stateApplied, utf8('true'));

  // Object.fromEntries defines own properties, so a header named "__proto__" stays a header.
  return { key, value, headers: Object.fromEntries(headers) };
}
