/** The narrow Kafka port the runtime uses. The default adapter wraps @confluentinc/kafka-javascript. */

export type Headers = Record<string, Buffer | string | (Buffer | string)[] | undefined>;

export interface TopicPartition {
  readonly topic: string;
  readonly partition: number;
}

/** A consumed record. */
export interface InRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: string;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers: Headers;
  readonly timestamp: string;
}

/** A record to produce. Without `partition` the murmur2 partitioner places it by key. */
export interface OutRecord {
  readonly topic: string;
  readonly key: Buffer | string | null;
  readonly value: Buffer | string | null;
  readonly headers?: Record<string, Buffer | Buffer[] | string>;
  readonly partition?: number;
  /** Milliseconds since the epoch as a decimal string; without it the producer's clock (CreateTime). */
  readonly timestamp?: string;
}

/** A topic to create. */
export interface TopicSpec {
  readonly topic: string;
  readonly partitions: number;
  /** Omitted: the broker's default (`default.replication.factor`). */
  readonly replicationFactor?: number;
  /** Topic configuration (e.g. `cleanup.policy: compact`); omitted: the broker's defaults. */
  readonly config?: Readonly<Record<string, string>>;
}

/**
 * An offset to commit: the next offset to consume, and optionally a short text stored with it (as Kafka
 * Streams stores a partition's stream time), committed atomically with the offset: by the group
 * coordinator in `commit`, inside the transaction in `produceTransactionally`. At most
 * MAX_COMMIT_METADATA_BYTES (4095) bytes as UTF-8 and no NUL character (src/kafka/commit-metadata.ts
 * says why); anything else is refused with RF_INVALID_ARGUMENT naming the partition, before any call.
 *
 * @example
 * await port.commit([{ topic: 'orders', partition: 3, offset: 1042, metadata: '{"st":1700000000123}' }]);
 */
export interface CommitOffset extends TopicPartition {
  readonly offset: number;
  /** Stored with the offset; omitted: none (read back as ''). */
  readonly metadata?: string;
}

/**
 * A partition's committed position as the group coordinator holds it: the next offset to consume (-1
 * when the group never committed it) and the metadata committed with it ('' when none).
 *
 * @example
 * const c = (await port.committedWithMetadata([{ topic: 'orders', partition: 3 }])).get('orders/3');
 * // { offset: 1042, metadata: '{"st":1700000000123}' }
 */
export interface CommittedOffset {
  readonly offset: number;
  readonly metadata: string;
}

export interface ConsumerHandlers {
  /** Awaited before any record of these partitions is delivered. */
  onAssign(partitions: TopicPartition[]): Promise<void>;
  /** Awaited before the partitions go; `lost`: the assignment was lost (never commit them). */
  onRevoke(partitions: TopicPartition[], lost: boolean): Promise<void>;
  /** One partition's batch, in offset order. Throwing redelivers the batch from its first record. */
  onBatch(topic: string, partition: number, records: InRecord[], highWatermark: string): Promise<void>;
  /**
   * Consumption ended on an error outside any batch while not stopping (a rebalance callback threw, or
   * the consumer failed fatally): nothing more is delivered, so the runtime should close. An error of a
   * callback cut short by stop() is not reported.
   */
  onFatal?(err: Error): void;
  /**
   * How many partitions' batches may be in `onBatch` at once (default 1). A partition never has two:
   * its batches are handed over one after another, in offset order; a port may always hand over fewer.
   */
  readonly partitionsInFlight?: number;
}

/**
 * The operations the brokers' authorizer allows this principal, by resource, as KafkaPort's
 * `authorizedOperations` returns them: a topic (or the group) the brokers tell nothing about is absent;
 * an empty list means not even Describe.
 */
export interface AuthorizedOperations {
  readonly topics: ReadonlyMap<string, readonly string[]>;
  readonly group?: readonly string[];
}

export interface KafkaPort {
  /** Connects, subscribes and starts delivering batches. */
  start(topics: string[], handlers: ConsumerHandlers): Promise<void>;
  /**
   * Changes the subscription while running, as a member leaving the group and joining again: the batch
   * in flight finishes, the owned partitions are revoked through onRevoke (as a rebalance revokes
   * them), the consumer leaves the group; then `between` runs (no partition is owned, nothing is
   * delivered) and a consumer subscribes to `topics` with start()'s handlers (a rebalance assigns
   * through onAssign). The producer stays. Optional for a port of your own: only a topology source
   * reading a pattern needs it, to read a topic made while it runs (without it, from the next start).
   * `between` throwing leaves the port with no consumer (stop() still closes it).
   */
  resubscribe?(topics: string[], between?: () => Promise<void>): Promise<void>;
  /** At-least-once: produces and awaits every delivery report; `handedOver` runs once the records are queued. */
  produce(records: readonly OutRecord[], handedOver?: () => void): Promise<void>;
  /**
   * At-least-once: commits consumer offsets (with their metadata); resolves once the group coordinator
   * has stored them.
   */
  commit(offsets: readonly CommitOffset[]): Promise<void>;
  /**
   * Exactly-once: one transaction holding the records and the consumer offsets with their metadata
   * (KIP-447): an aborted transaction commits neither; `beforeCommit` runs when both are in the open
   * transaction.
   */
  produceTransactionally(
    records: readonly OutRecord[],
    offsets: readonly CommitOffset[],
    beforeCommit?: () => void,
  ): Promise<void>;
  /** The group's committed offsets (-1 when none), by tpKey. */
  committed(partitions: readonly TopicPartition[]): Promise<Map<string, number>>;
  /**
   * The group's committed offsets with the metadata committed with them, by tpKey (`{ offset: -1,
   * metadata: '' }` when none): what a new owner reads on assignment to take up where the last left off.
   * Optional for a port of your own: only what keeps state in the metadata (topologies' stream time)
   * needs it, and says so when it is missing.
   */
  committedWithMetadata?(partitions: readonly TopicPartition[]): Promise<Map<string, CommittedOffset>>;
  /** The partition count of a topic; RF_TOPIC_MISSING when it does not exist. */
  partitionCount(topic: string): Promise<number>;
  /**
   * Which of `topics` exist, with their partition counts (a missing topic is absent from the map).
   * Works before start().
   */
  describeTopics(topics: readonly string[]): Promise<Map<string, number>>;
  /**
   * The names of the cluster's topics, sorted, the broker's own (`__consumer_offsets`,
   * `__transaction_state`, `__share_group_state`) left out, as a consumer subscribing to a pattern
   * leaves them out. Works before start(). Optional for a port of your own: only a topology source
   * reading a pattern needs it (it resolves the pattern at start) and says so when it is missing.
   */
  listTopics?(): Promise<string[]>;
  /**
   * Which of `topics` this client's principal may not write, as the brokers' authorizer tells (the
   * topic's authorized operations without `Write` or `All`); none when the brokers tell nothing. Works
   * before start(). Optional for a port of your own: only a topology with `idleCloseMs` asks (its ticks
   * are written into its own input topics), and skips the check without it.
   */
  unwritableTopics?(topics: readonly string[]): Promise<string[]>;
  /**
   * The operations the brokers' authorizer allows this client's principal on `topics` and on `group`
   * (Kafka's names: 'Read', 'Write', 'Delete', 'Describe', 'All', ...): a topic or group the brokers tell
   * nothing about is absent; an empty list means not even Describe. Works before start(). Optional for a
   * port of your own: every runtime checks its permissions with it at start (src/kafka/permissions.ts)
   * and, without it, meets a missing one at first use.
   */
  authorizedOperations?(r: { topics: readonly string[]; group?: string }): Promise<AuthorizedOperations>;
  /**
   * Creates topics. One that exists already (made meanwhile by another instance) is not an error.
   * Works before start().
   */
  createTopics(topics: readonly TopicSpec[]): Promise<void>;
  /**
   * Deletes each partition's records below `offset` (Kafka's DeleteRecords), as Kafka Streams purges
   * its repartition topics. Optional: a port without it keeps them (a topology's repartition topics then
   * grow until the user deletes their records).
   */
  deleteRecords?(topic: string, below: readonly { partition: number; offset: number }[]): Promise<void>;
  /** High watermarks (next offset to be written) of a topic's partitions. */
  highWatermarks(topic: string): Promise<Map<number, number>>;
  /**
   * Low watermarks (the earliest offset the log still holds) of a topic's partitions. Optional: without
   * it the stalled-consumer watchdog counts records that retention deleted unprocessed as lag.
   */
  lowWatermarks?(topic: string): Promise<Map<number, number>>;
  /**
   * The consumer's position in each of `partitions` it is assigned (the next offset it hands over,
   * past the transaction markers and aborted records it skipped), by tpKey; a partition without a
   * known position is left out. Optional: without it the stalled-consumer watchdog takes a partition's
   * last transaction marker (an exactly-once writer's, a topology's tick) for lag it cannot read.
   */
  positions?(partitions: readonly TopicPartition[]): Map<string, number>;
  /** Moves the fetch position of a partition (used to restart a stalled fetch). */
  seek(partition: TopicPartition, offset: number): void;
  pause(partitions: readonly TopicPartition[]): void;
  resume(partitions: readonly TopicPartition[]): void;
  /** Stops consuming (after the batch in flight), disconnects every client. Idempotent. */
  stop(): Promise<void>;
}

/**
 * The broker's own topics, which a consumer subscribing to a pattern never reads (its
 * exclude.internal.topics): KafkaPort.listTopics leaves them out.
 *
 * @example
 * BROKER_TOPICS.has('__consumer_offsets'); // true
 */
export const BROKER_TOPICS: ReadonlySet<string> = new Set([
  '__consumer_offsets',
  '__transaction_state',
  '__share_group_state',
]);

export function tpKey(topic: string, partition: number): string {
  return `${topic}/${partition}`;
}
