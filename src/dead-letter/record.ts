/**
 * A consumed record's dead letter, ready to produce: built in Spring Kafka's format (build.ts) and
 * capped in size. Used by every runtime that dead-letters (the processor's emit stage, the handler
 * runner, the invalidation consumer).
 */
import { createHash } from 'node:crypto';
import type { InRecord, OutRecord } from '../kafka/types.js';
import { buildDeadLetter, type DeadLetterReason } from './build.js';

/**
 * A dead letter larger than this (key + value + headers) is sent without its value (the broker's
 * default message.max.bytes is 1 MiB): headers `redfence-value-omitted` (the value's byte length) and
 * `redfence-value-sha256` say so; `kafka_dlt-original-*` locate the record in its topic.
 */
export const MAX_DEAD_LETTER_BYTES = 900_000;

/**
 * A consumed record's dead letter for `topic`, in Spring Kafka's format (build.ts), capped in
 * size. Shared with the handler runtime (src/handler/), which dead-letters the same way.
 * `stateApplied`: the record's state changes were made (header `redfence-state-applied`).
 */
export function deadLetterRecord(
  topic: string,
  groupId: string,
  record: InRecord,
  reason: DeadLetterReason,
  error: unknown,
  stateApplied = false,
): OutRecord {
  const dl = buildDeadLetter({
    source: {
      topic: record.topic,
      partition: record.partition,
      offset: record.offset,
      timestamp: record.timestamp,
      key: record.key,
      value: record.value,
      headers: record.headers,
    },
    consumerGroup: groupId,
    reason,
    error,
    ...(stateApplied ? { stateApplied } : {}),
  });
  const headers = dl.headers as Record<string, Buffer | string | Array<Buffer | string>>;
  let size = (dl.key?.length ?? 0) + (dl.value?.length ?? 0);
  for (const [name, v] of Object.entries(headers))
    for (const x of Array.isArray(v) ? v : [v]) size += name.length + Buffer.byteLength(x);
  if (size > MAX_DEAD_LETTER_BYTES && dl.value !== null) {
    // Too large for the dead-letter topic (the broker would refuse it and the partition would be
    // stuck): the value is left out, its size and SHA-256 kept; the original-* headers locate it.
    const original = dl.value;
    return {
      topic,
      key: dl.key,
      value: null,
      headers: {
        ...headers,
        'redfence-value-omitted': String(original.length),
        'redfence-value-sha256': createHash('sha256').update(original).digest('hex'),
      },
    };
  }
  return { topic, key: dl.key, value: dl.value, headers: dl.headers };
}
