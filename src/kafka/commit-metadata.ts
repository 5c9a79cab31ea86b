/**
 * Commit metadata: the short text Kafka stores beside a committed offset (Kafka Streams keeps a
 * partition's stream time there, so it commits atomically with the offset and the outputs). Checked
 * here, before any call, for every port (the default adapter and the in-memory one refuse the same).
 *
 * The bound and the refusals come from what the default adapter's binding
 * (@confluentinc/kafka-javascript 1.10, src/common.cc) does with the text: it sends the UTF-8 bytes
 * followed by a NUL byte, copied as a C string, and drops the last byte when it reads metadata back.
 * - A NUL inside the text would cut it there, silently: refused.
 * - The broker counts the trailing NUL: with its default `offset.metadata.max.bytes` (4096) a text of
 *   4096 bytes is refused per partition (OFFSET_METADATA_TOO_LARGE, reported only through the consume
 *   call, so a commit would wait for a confirmation that never comes). The bound is 4095 bytes as UTF-8
 *   (the broker counts UTF-16 units, never more than UTF-8 bytes).
 * - A lone surrogate is sent as U+FFFD and would not read back as written: refused.
 * Metadata committed by another client (without the trailing NUL) reads back through the binding
 * without its last character; what this library commits reads back as written.
 */
import { RedfenceError } from '../errors/index.js';
import type { CommitOffset } from './types.js';

/** The longest commit metadata, in bytes as UTF-8 (the broker's default bound, less the binding's NUL). */
export const MAX_COMMIT_METADATA_BYTES = 4095;

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Refuses, with RF_INVALID_ARGUMENT naming the partition (never the text), metadata that is not a
 * string, holds a NUL or a lone surrogate, or is longer than MAX_COMMIT_METADATA_BYTES as UTF-8.
 * `what` names the call (e.g. 'commit').
 *
 * @example
 * checkCommitMetadata([{ topic: 'orders', partition: 0, offset: 7, metadata: 'st=1700000000123' }], 'commit');
 */
export function checkCommitMetadata(offsets: readonly CommitOffset[], what: string): void {
  for (const o of offsets) {
    const m: unknown = o.metadata;
    if (m === undefined) continue;
    const at = `${what}: the metadata of ${o.topic}/${o.partition}`;
    if (typeof m !== 'string') throw new RedfenceError('RF_INVALID_ARGUMENT', `${at} must be a string`);
    if (m.includes('\u0000'))
      throw new RedfenceError('RF_INVALID_ARGUMENT', `${at} must not contain a NUL character`);
    if (LONE_SURROGATE.test(m))
      throw new RedfenceError('RF_INVALID_ARGUMENT', `${at} must be well-formed text (a lone surrogate)`);
    const bytes = Buffer.byteLength(m, 'utf8');
    if (bytes > MAX_COMMIT_METADATA_BYTES)
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        `${at} is ${bytes} bytes as UTF-8; at most ${MAX_COMMIT_METADATA_BYTES}`,
      );
  }
}
