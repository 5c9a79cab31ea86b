/**
 * Plan: the first stage of a batch. Each record gets its metadata and either its decoded value or the
 * reason it goes to the dead-letter topic without touching state: a null key, a key that does not hash
 * (murmur2) to the record's partition, or a value the definition's decode cannot read.
 */

import type { DeadLetterReason } from '../dead-letter/build.js';
import type { RecordMeta } from '../definition/definition.js';
import type { InRecord } from '../kafka/types.js';
import { misplacedKey, misplacedMessage } from '../partitioner/index.js';
import { firstThrow, type UserCall } from './user-call.js';

export interface Planned {
  readonly record: InRecord;
  readonly meta: RecordMeta;
  readonly dead?: { readonly reason: DeadLetterReason; readonly error: unknown };
  readonly value?: unknown;
}

export interface PlanContext {
  /** The definition's decode, or JSON.parse of the value as UTF-8. */
  readonly decode: (value: Buffer | null, meta: RecordMeta) => unknown;
  /** The input topic's partition count (what murmur2 places keys by). */
  readonly partitionCount: number;
  /**
   * Every partition count the input has had while the store was written, the current one among them:
   * a record placed by murmur2 under an earlier count (before partitions were added) is on the right
   * partition too.
   */
  readonly partitionCounts: readonly number[];
  readonly callUser: UserCall;
}

export function jsonDecode(value: Buffer | null): unknown {
  return JSON.parse(value?.toString('utf8') ?? 'null') as unknown;
}

export async function plan(
  ctx: PlanContext,
  topic: string,
  partition: number,
  records: readonly InRecord[],
): Promise<Planned[]> {
  const out: Planned[] = [];
  const decode = ctx.decode;
  for (const record of records) {
    const key = record.key?.toString('utf8') ?? '';
    const meta: RecordMeta = {
      topic,
      partition,
      offset: Number(record.offset),
      key,
      timestamp: record.timestamp,
    };
    if (record.key === null) {
      out.push({ record, meta, dead: { reason: 'null-key', error: new Error('record has a null key') } });
      continue;
    }
    const expected = misplacedKey(record.key, partition, ctx.partitionCount, ctx.partitionCounts);
    if (expected !== null) {
      const error = new Error(misplacedMessage(expected, ctx.partitionCount, partition));
      out.push({ record, meta, dead: { reason: 'wrong-partition', error } });
      continue;
    }
    // called directly (no closure, no result object per record); a throw goes to callUser as the
    // first attempt, so retries and the error are as with callUser alone
    let value: unknown;
    try {
      value = decode(record.value, meta);
    } catch (e) {
      const call = ctx.callUser(firstThrow(e, () => decode(record.value, meta)));
      const d = call instanceof Promise ? await call : call;
      if (!d.ok) {
        out.push({ record, meta, dead: { reason: 'undecodable', error: d.error } });
        continue;
      }
      value = d.value;
    }
    out.push({ record, meta, value });
  }
  return out;
}
