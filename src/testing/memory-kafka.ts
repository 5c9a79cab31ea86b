/**
 * MemoryKafka: one in-memory Kafka cluster for tests. Topics of partitions with offsets, the murmur2
 * partitioner, consumer groups with committed offsets, transactions that commit or abort atomically
 * (read_committed readers never see an open or aborted one), high watermarks. `port()` makes one
 * consumer instance's KafkaPort, to give a Processor as its `kafka` option; the readers here let a
 * test check what was committed.
 */
import { RedfenceError } from '../errors/index.js';
import type { CommitOffset, InRecord, OutRecord } from '../kafka/types.js';
import { Cluster } from './cluster.js';
import { type Isolation, toInRecord } from './log.js';
import { MemoryKafkaPort, type MemoryPortOptions } from './port.js';

export interface MemoryKafkaOptions {
  /** Topics to create up front: name -> partition count. */
  topics?: Record<string, number>;
}

export interface ReadOptions {
  /** Default 'read_committed': records of open and aborted transactions are left out. */
  isolation?: Isolation;
}

export class MemoryKafka {
  readonly #cluster = new Cluster();

  constructor(options: MemoryKafkaOptions = {}) {
    for (const k of Object.keys(options))
      if (k !== 'topics') throw new RedfenceError('RF_INVALID_OPTIONS', `MemoryKafka: unknown option "${k}"`);
    for (const [topic, partitions] of Object.entries(options.topics ?? {}))
      this.createTopic(topic, partitions);
  }

  /** Creates a topic; RF_INVALID_ARGUMENT if it exists. */
  createTopic(topic: string, partitions: number): void {
    if (!this.#cluster.createTopic(topic, partitions))
      throw new RedfenceError('RF_INVALID_ARGUMENT', `MemoryKafka: topic ${topic} exists already`);
  }

  /** A topic's partition count, undefined when it does not exist. */
  partitionCount(topic: string): number | undefined {
    return this.#cluster.partitionCount(topic);
  }

  /** A new consumer instance (one per processor) in the group `options.groupId`. */
  port(options: MemoryPortOptions): MemoryKafkaPort {
    return new MemoryKafkaPort(this.#cluster, options);
  }

  /**
   * Appends records outside any transaction (a test's input), placed by the murmur2 partitioner when
   * no partition is given; returns where each went.
   */
  produce(records: readonly OutRecord[]): CommitOffset[] {
    return this.#cluster.append(records);
  }

  /** Every record of a topic, partition by partition in offset order. */
  read(topic: string, options: ReadOptions = {}): InRecord[] {
    const isolation = options.isolation ?? 'read_committed';
    if (isolation !== 'read_committed' && isolation !== 'read_uncommitted')
      throw new RedfenceError('RF_INVALID_ARGUMENT', `read: unknown isolation ${JSON.stringify(isolation)}`);
    this.#topic(topic);
    return this.#cluster
      .logs(topic)
      .flatMap((log, partition) =>
        log
          .read(0, Number.MAX_SAFE_INTEGER, isolation)
          .records.map((r) => toInRecord({ topic, partition }, r)),
      );
  }

  /** A group's committed offsets (the next offset to consume) on a topic, by partition. */
  committedOffsets(groupId: string, topic: string): Map<number, number> {
    return this.#cluster.group(groupId).committedFor(topic);
  }

  /** The next offset to be written in each partition of a topic (records and transaction markers). */
  highWatermarks(topic: string): Map<number, number> {
    this.#topic(topic);
    return new Map(this.#cluster.logs(topic).map((log, p) => [p, log.highWatermark]));
  }

  /** Resolves once no group has a rebalance queued or running (e.g. after a port started or stopped). */
  async settled(): Promise<void> {
    for (;;) {
      const busy = [...this.#cluster.groups()].filter((g) => g.busy);
      if (busy.length === 0) return;
      await Promise.all(busy.map((g) => g.settled()));
    }
  }

  #topic(topic: string): void {
    if (this.#cluster.partitionCount(topic) === undefined)
      throw new RedfenceError('RF_TOPIC_MISSING', `MemoryKafka: topic ${topic} does not exist`);
  }
}
