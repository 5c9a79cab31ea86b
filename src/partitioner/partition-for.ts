import { RedfenceError } from '../errors/index.js';
import { murmur2, toPositive } from './murmur2.js';

const utf8 = new TextEncoder();

/** A record key as the partitioner accepts it: raw bytes, or a string encoded as UTF-8. */
export type PartitionKey = Uint8Array | string;

/** The bytes Kafka hashes for `key`: the bytes themselves, or the UTF-8 encoding of a string. */
export function keyBytes(key: PartitionKey): Uint8Array {
  return typeof key === 'string' ? utf8.encode(key) : key;
}

/**
 * The partition Kafka's default partitioner (Java client, and librdkafka's `murmur2_random`)
 * assigns to a record with a non-null `key`: `toPositive(murmur2(keyBytes)) % partitionCount`.
 *
 * @example
 * partitionFor('customer-42', 6) // => the same partition a Java producer picks
 */
export function partitionFor(key: PartitionKey, partitionCount: number): number {
  if (!Number.isInteger(partitionCount) || partitionCount < 1 || partitionCount > 0x7fffffff) {
    throw new RedfenceError(
      'RF_INVALID_ARGUMENT',
      `partitionFor: partitionCount must be a positive integer, got ${String(partitionCount)}`,
    );
  }
  if (typeof key !== 'string' && !(key instanceof Uint8Array)) {
    throw new RedfenceError(
      'RF_INVALID_ARGUMENT',
      `partitionFor: key must be a string or a Uint8Array/Buffer, got ${key === null ? 'null' : typeof key}`,
    );
  }
  return toPositive(murmur2(keyBytes(key))) % partitionCount;
}

/**
 * The partition check of a record read from `partition` (docs/architecture.md, the fence decision
 * table): null when murmur2 places `key` there, under `partitionCount` (the topic's count now) or one
 * of `earlier` (every count the topic had while its state was written: a key placed before partitions
 * were added is on the right partition too); else the partition the key hashes to under the count now.
 */
export function misplacedKey(
  key: Uint8Array,
  partition: number,
  partitionCount: number,
  earlier: readonly number[] = [],
): number | null {
  const expected = partitionFor(key, partitionCount);
  if (expected === partition) return null;
  for (const n of earlier) if (n > partition && partitionFor(key, n) === partition) return null;
  return expected;
}

/** The dead-letter message of a record the partition check refuses (the processor's and a topology's). */
export function misplacedMessage(expected: number, partitionCount: number, partition: number): string {
  return `key hashes to partition ${expected} of ${partitionCount}, record is on ${partition}`;
}
