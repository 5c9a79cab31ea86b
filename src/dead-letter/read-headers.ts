/**
 * Reads the headers of a dead letter written by redfence (build.ts) or by Spring Kafka's
 * `DeadLetterPublishingRecoverer`, strictly: a missing or malformed original-* header is an error.
 * decode.ts reads all four layouts leniently, for the `dlq` verbs.
 */
import { bad, describe, INT32_MAX, INT64_MAX, isRecord } from './build.js';
import {
  DEAD_LETTER_HEADERS,
  type DeadLetterHeaders,
  type DeadLetterReason,
  type HeaderValue,
  REASONS,
  TIMESTAMP_TYPE_FROM_TEXT,
} from './headers.js';

const H = DEAD_LETTER_HEADERS;

/** The last value of a header (Kafka's `lastHeader`), or undefined when absent. */
function lastValue(headers: Record<string, HeaderValue>, name: string): Buffer | string | undefined {
  if (!Object.hasOwn(headers, name)) return undefined;
  const value = headers[name];
  const last = Array.isArray(value) ? value[value.length - 1] : value;
  if (last === undefined || Buffer.isBuffer(last) || typeof last === 'string') return last;
  throw bad(`headers[${JSON.stringify(name)}]`, `must be a Buffer or a string, got ${describe(last)}`);
}

function readText(headers: Record<string, HeaderValue>, name: string): string | undefined {
  const value = lastValue(headers, name);
  return Buffer.isBuffer(value) ? value.toString('utf8') : value;
}

function requireText(headers: Record<string, HeaderValue>, name: string): string {
  const text = readText(headers, name);
  if (text === undefined) throw bad(`headers[${JSON.stringify(name)}]`, 'is missing');
  return text;
}

/**
 * A big-endian integer header of `width` bytes, as Spring writes it. A string, or a Buffer of
 * another length, is read as decimal text (headers set by hand or by other tools often are).
 */
function readInteger(headers: Record<string, HeaderValue>, name: string, width: 4 | 8): bigint {
  const field = `headers[${JSON.stringify(name)}]`;
  const value = lastValue(headers, name);
  if (value === undefined) throw bad(field, 'is missing');
  if (Buffer.isBuffer(value) && value.length === width) {
    return width === 4 ? BigInt(value.readInt32BE(0)) : value.readBigInt64BE(0);
  }
  const text = Buffer.isBuffer(value) ? value.toString('latin1') : value;
  if (!/^-?\d{1,20}$/.test(text)) {
    throw bad(field, `must be ${width} big-endian bytes or a decimal integer`);
  }
  return BigInt(text);
}

/**
 * Decodes the dead-letter headers of a record written by {@link buildDeadLetter} or by Spring
 * Kafka's `DeadLetterPublishingRecoverer`: the inverse of the former, for tests, verifiers and
 * `dlq replay`. Multi-valued headers are read by their last value, like Kafka's `lastHeader`
 * (the newest hop of a record dead-lettered more than once).
 *
 * @throws RedfenceError `RF_INVALID_ARGUMENT`, naming the header, when an original-* header is
 * missing or malformed, or `redfence-reason` is not a known reason.
 * @example
 * const info = readDeadLetterHeaders(message.headers);
 * // => { originalTopic: 'orders', originalPartition: 3, originalOffset: 1042n, ...,
 * //      exceptionFqcn: 'redfence.TypeError', reason: 'processing-error' }
 * await producer.send({ topic: info.originalTopic, messages: [{ key: message.key, value: message.value }] });
 */
export function readDeadLetterHeaders(headers: Record<string, HeaderValue>): DeadLetterHeaders {
  if (!isRecord(headers)) throw bad('headers', `must be an object, got ${describe(headers)}`);
  const originalTopic = requireText(headers, H.originalTopic);
  const partition = readInteger(headers, H.originalPartition, 4);
  if (partition < 0n || partition > BigInt(INT32_MAX)) {
    throw bad(
      `headers[${JSON.stringify(H.originalPartition)}]`,
      `must be from 0 to ${INT32_MAX}, got ${partition}`,
    );
  }
  const originalOffset = readInteger(headers, H.originalOffset, 8);
  if (originalOffset < 0n || originalOffset > INT64_MAX) {
    throw bad(
      `headers[${JSON.stringify(H.originalOffset)}]`,
      `must be from 0 to ${INT64_MAX}, got ${originalOffset}`,
    );
  }
  const originalTimestamp = readInteger(headers, H.originalTimestamp, 8);
  if (originalTimestamp < -(2n ** 63n) || originalTimestamp > INT64_MAX) {
    throw bad(`headers[${JSON.stringify(H.originalTimestamp)}]`, 'is outside the 64-bit integer range');
  }
  const typeText = requireText(headers, H.originalTimestampType);
  const originalTimestampType = Object.hasOwn(TIMESTAMP_TYPE_FROM_TEXT, typeText)
    ? TIMESTAMP_TYPE_FROM_TEXT[typeText]
    : undefined;
  if (originalTimestampType === undefined) {
    throw bad(
      `headers[${JSON.stringify(H.originalTimestampType)}]`,
      'must be CreateTime, LogAppendTime or NoTimestampType',
    );
  }
  const reason = readText(headers, H.reason);
  if (reason !== undefined && !REASONS.has(reason)) {
    throw bad(`headers[${JSON.stringify(H.reason)}]`, `must be one of ${[...REASONS].join(', ')}`);
  }
  return {
    originalTopic,
    originalPartition: Number(partition),
    originalOffset,
    originalTimestamp,
    originalTimestampType,
    consumerGroup: readText(headers, H.consumerGroup),
    exceptionFqcn: readText(headers, H.exceptionFqcn),
    exceptionCauseFqcn: readText(headers, H.exceptionCauseFqcn),
    exceptionMessage: readText(headers, H.exceptionMessage),
    exceptionStacktrace: readText(headers, H.exceptionStacktrace),
    reason: reason as DeadLetterReason | undefined,
  };
}
