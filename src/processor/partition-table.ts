/**
 * The partitions this instance owns: assigned, epoch acquired. Keyed by topic, then partition number
 * (never by a `topic/partition` string). Each entry is written by one stage per field:
 * rebalance (creates and removes it), batch intake (`delivered`, `fenced`), the commit pipeline
 * (`committed`, `rewound`).
 */
import type { TopicPartition } from '../kafka/types.js';

export interface OwnedPartition extends TopicPartition {
  /** The epoch this instance acquired on assignment; the fence refuses writes of an older one. */
  readonly epoch: number;
  /** Next offset to consume as last committed (-1: never committed). */
  committed: number;
  /** Next offset after the last batch handed to this instance (-1: none yet). */
  delivered: number;
  /** A newer owner holds the partition: paused, nothing of it is committed again. */
  fenced: boolean;
  /**
   * Set when a failed Kafka step sought the partition back to this offset: batches past it were
   * fetched before the seek took effect and are dropped; cleared by the first batch at or before it.
   */
  rewound: number | undefined;
}

export class PartitionTable {
  readonly #byTopic = new Map<string, Map<number, OwnedPartition>>();

  get(topic: string, partition: number): OwnedPartition | undefined {
    return this.#byTopic.get(topic)?.get(partition);
  }

  /** Records a new assignment (replacing what an earlier assignment of the partition left). */
  add(tp: TopicPartition, epoch: number, committed: number): OwnedPartition {
    const entry: OwnedPartition = {
      topic: tp.topic,
      partition: tp.partition,
      epoch,
      committed,
      delivered: -1,
      fenced: false,
      rewound: undefined,
    };
    let partitions = this.#byTopic.get(tp.topic);
    if (partitions === undefined) {
      partitions = new Map();
      this.#byTopic.set(tp.topic, partitions);
    }
    partitions.set(tp.partition, entry);
    return entry;
  }

  remove(tp: TopicPartition): OwnedPartition | undefined {
    const partitions = this.#byTopic.get(tp.topic);
    const entry = partitions?.get(tp.partition);
    partitions?.delete(tp.partition);
    if (partitions?.size === 0) this.#byTopic.delete(tp.topic);
    return entry;
  }

  get size(): number {
    let n = 0;
    for (const partitions of this.#byTopic.values()) n += partitions.size;
    return n;
  }

  /** Every owned partition, fenced ones included. */
  all(): OwnedPartition[] {
    const out: OwnedPartition[] = [];
    for (const partitions of this.#byTopic.values()) for (const entry of partitions.values()) out.push(entry);
    return out;
  }

  /** The owned partitions not fenced off. */
  active(): OwnedPartition[] {
    return this.all().filter((entry) => !entry.fenced);
  }
}

/** A plain `{ topic, partition }` of an entry (for the Kafka port and for callers). */
export function topicPartition(entry: TopicPartition): TopicPartition {
  return { topic: entry.topic, partition: entry.partition };
}
