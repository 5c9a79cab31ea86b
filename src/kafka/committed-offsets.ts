/**
 * Offsets and their metadata across the default adapter's binding: what a commit or a transaction's
 * offsets hand to librdkafka, and the group's committed offsets read back through the consumer
 * (commit-metadata.ts says what the binding does to the text on the way).
 */
import type { RdKafka } from '@confluentinc/kafka-javascript';
import type { CommitOffset, CommittedOffset, TopicPartition } from './types.js';
import { tpKey } from './types.js';

type Consumer = InstanceType<typeof RdKafka.KafkaConsumer>;

/** The binding's form of offsets to commit: metadata only where given (none: the broker stores ''). */
export function nativeOffsets(offsets: readonly CommitOffset[]): RdKafka.TopicPartitionOffsetAndMetadata[] {
  return offsets.map((o) =>
    o.metadata === undefined
      ? { topic: o.topic, partition: o.partition, offset: o.offset }
      : { topic: o.topic, partition: o.partition, offset: o.offset, metadata: o.metadata },
  );
}

/**
 * The group's committed offsets of `partitions` with their metadata, by tpKey, from the group
 * coordinator (-1 and '' where there is none).
 */
export function readCommitted(
  c: Consumer,
  partitions: readonly TopicPartition[],
  timeoutMs: number,
): Promise<Map<string, CommittedOffset>> {
  return new Promise((resolve, reject) =>
    c.committed(
      partitions.map((p) => ({ topic: p.topic, partition: p.partition })),
      timeoutMs,
      (err, rows) => {
        if (err) return reject(err);
        const out = new Map<string, CommittedOffset>();
        for (const r of rows) {
          const n = Number(r.offset);
          const offset = Number.isFinite(n) && n >= 0 ? n : -1;
          out.set(tpKey(r.topic, r.partition), { offset, metadata: offset < 0 ? '' : (r.metadata ?? '') });
        }
        resolve(out);
      },
    ),
  );
}

/**
 * True when the coordinator holds `o` (or a later offset): the commit's offset, and its metadata when
 * it had some (a commit of the same offset with new metadata is not stored until the metadata is).
 */
export function stored(o: CommitOffset, held: CommittedOffset | undefined): boolean {
  const offset = held?.offset ?? -1;
  if (offset !== o.offset) return offset > o.offset;
  return o.metadata === undefined || held?.metadata === o.metadata;
}
