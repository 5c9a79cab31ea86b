/**
 * One consumer instance on a MemoryKafka cluster, implementing the whole KafkaPort: it joins its
 * group on start() and gets partitions in rebalances (onAssign / onRevoke awaited, never while one of
 * its batches is in flight, as with the real client's one-batch-at-a-time delivery), delivers batches
 * of up to maxBatchSize records of one partition (read_committed), and runs the Kafka steps against
 * the cluster: produce, commit, or one transaction with the offsets (atomic, aborted on failure).
 * A test injects failures and holds through failNext() and hold() (the Kafka steps, start, stop and
 * the admin calls), and reads back how often each method was called (`calls`).
 */
import { randomBytes } from 'node:crypto';
import { RedfenceError } from '../errors/index.js';
import { checkCommitMetadata } from '../kafka/commit-metadata.js';
import {
  BROKER_TOPICS,
  type CommitOffset,
  type CommittedOffset,
  type ConsumerHandlers,
  type KafkaPort,
  type OutRecord,
  type TopicPartition,
  type TopicSpec,
  tpKey,
} from '../kafka/types.js';
import type { Cluster } from './cluster.js';
import { GroupConsumer } from './consumer.js';
import { MemoryKafkaError } from './errors.js';
import { type FailOptions, Faults, type HeldStep, type KafkaStep, type PortStep } from './faults.js';
import type { Group } from './group.js';
import {
  checkPortOptions,
  type MemoryPortOptions,
  noCalls,
  type PortCalls,
  type StepRecord,
} from './port-options.js';

export type { MemoryPortOptions, PortCalls, StepRecord } from './port-options.js';

export type MemoryPortState = 'idle' | 'running' | 'stopping' | 'stopped';

export class MemoryKafkaPort implements KafkaPort {
  readonly name: string;
  readonly groupId: string;
  /** Every Kafka step this port ran, in order. */
  readonly steps: StepRecord[] = [];
  /** Errors thrown by the handlers (a throwing onBatch is delivered again). */
  readonly handlerErrors: unknown[] = [];
  readonly #calls = noCalls();
  readonly #cluster: Cluster;
  readonly #group: Group;
  readonly #faults = new Faults();
  readonly #transactionalId: string;
  #producerEpoch = 0;
  #state: MemoryPortState = 'idle';
  #stopping: Promise<void> | undefined;
  #starting = false;
  #handlers: ConsumerHandlers | undefined;
  readonly #consumer: GroupConsumer;

  /** @internal Made by MemoryKafka.port(). */
  constructor(cluster: Cluster, options: MemoryPortOptions) {
    const { maxBatchSize: max } = checkPortOptions(options);
    this.#cluster = cluster;
    this.groupId = options.groupId;
    this.#group = cluster.group(options.groupId);
    this.name = options.name ?? `${options.groupId}-${randomBytes(3).toString('hex')}`;
    this.#transactionalId = options.transactionalId ?? `${this.name}-txn`;
    this.#consumer = new GroupConsumer(cluster, this.#group, max, this.handlerErrors);
  }

  get state(): MemoryPortState {
    return this.#state;
  }

  /** How many times each method was called so far (a copy). */
  get calls(): Readonly<PortCalls> {
    return { ...this.#calls };
  }

  /** The partitions paused now (those not owned included: a pause waits for their assignment). */
  get paused(): TopicPartition[] {
    return this.#consumer.paused;
  }

  /** The partitions this port owns now. */
  get assignment(): TopicPartition[] {
    return this.#consumer.assignment;
  }

  /** Records handed to onBatch so far (redeliveries included). */
  get delivered(): number {
    return this.#consumer.delivered;
  }

  /**
   * Resolves once this consumer has no batch in flight and nothing to deliver (every owned, unpaused
   * partition read to its end); at once after stop().
   */
  idle(): Promise<void> {
    return this.#consumer.idle();
  }

  /** The next call of this kind fails; see FailOptions (stop cannot fail). */
  failNext(step: PortStep, options?: FailOptions): void {
    this.#faults.failNext(step, options);
  }

  /** The next call of this kind waits until the test releases it (stop() releases every hold but its own). */
  hold(step: PortStep): HeldStep {
    return this.#faults.hold(step);
  }

  /** The group loses this member's assignment (a missed session): onRevoke(…, lost = true), then a rebalance. */
  expire(): Promise<void> {
    return this.#consumer.expire();
  }

  async start(topics: string[], handlers: ConsumerHandlers): Promise<void> {
    this.#calls.start++;
    if (this.#state !== 'idle' || this.#starting)
      throw new RedfenceError(
        'RF_INVALID_STATE',
        `memory Kafka port: start() called when ${this.#starting ? 'starting' : this.#state}`,
      );
    if (!Array.isArray(topics) || topics.length === 0 || !topics.every((t) => typeof t === 'string' && t))
      throw new RedfenceError('RF_INVALID_ARGUMENT', 'start(): topics must be a non-empty list of names');
    this.#starting = true;
    try {
      const fail = await this.#faults.enter('start');
      if (fail) throw this.#failure('start', fail);
    } finally {
      this.#starting = false;
    }
    if (this.#state !== 'idle')
      throw new RedfenceError('RF_INVALID_STATE', 'memory Kafka port: stop() was called during start()');
    this.#producerEpoch = this.#cluster.initProducer(this.#transactionalId);
    this.#state = 'running';
    this.#handlers = handlers;
    this.#consumer.start(topics, handlers);
  }

  /** Leaves the group (the batch in flight finishes, every partition revoked, awaited), runs `between`, joins again with `topics`. */
  async resubscribe(topics: string[], between?: () => Promise<void>): Promise<void> {
    this.#calls.resubscribe++;
    const handlers = this.#handlers;
    if (this.#state !== 'running' || handlers === undefined)
      throw new RedfenceError('RF_INVALID_STATE', `memory Kafka port: resubscribe() when ${this.#state}`);
    if (!Array.isArray(topics) || topics.length === 0 || !topics.every((t) => typeof t === 'string' && t))
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        'resubscribe(): topics must be a non-empty list of names',
      );
    await this.#consumer.stop();
    await between?.();
    if (this.#state !== 'running') return; // stop() came meanwhile
    this.#consumer.start(topics, handlers);
  }

  #ready(what: string): void {
    if (this.#state === 'idle' || this.#state === 'stopped')
      throw new RedfenceError('RF_INVALID_STATE', `memory Kafka port: ${what} when ${this.#state}`);
  }

  #record(kind: KafkaStep, records: number, offsets: readonly CommitOffset[], ok: boolean): void {
    this.steps.push({
      kind,
      records,
      offsets: offsets.map((o) => ({ ...o })),
      outcome: ok ? 'ok' : 'failed',
    });
  }

  #failure(step: PortStep, fail: FailOptions): Error {
    if (fail.error) return fail.error;
    if (!fail.fatal) return new MemoryKafkaError('INJECTED', `injected ${step} failure`, { retriable: true });
    const cause = new MemoryKafkaError('INJECTED_FATAL', `injected fatal ${step} failure`, { fatal: true });
    return step === 'transaction'
      ? new RedfenceError(
          'RF_KAFKA_FATAL',
          `Kafka: the transactional producer failed fatally: ${cause.message}`,
          {
            cause,
          },
        )
      : cause;
  }

  async produce(records: readonly OutRecord[], handedOver?: () => void): Promise<void> {
    this.#calls.produce++;
    this.#ready('produce()');
    if (records.length === 0) return;
    handedOver?.();
    let ok = false;
    try {
      const fail = await this.#faults.enter('produce');
      if (fail) {
        if (fail.written) this.#cluster.append(records);
        throw this.#failure('produce', fail);
      }
      this.#cluster.append(records);
      ok = true;
    } finally {
      this.#record('produce', records.length, [], ok);
    }
  }

  /** What the default adapter refuses before any call: a bad offset, metadata the broker could not store. */
  #checkOffsets(offsets: readonly CommitOffset[], what: string): void {
    checkCommitMetadata(offsets, what);
    for (const o of offsets)
      if (!Number.isSafeInteger(o.offset) || o.offset < 0)
        throw new RedfenceError(
          'RF_INVALID_ARGUMENT',
          `${what}: offset of ${o.topic}/${o.partition} must be >= 0`,
        );
  }

  #checkMember(): void {
    if (!this.#consumer.isMember())
      throw new MemoryKafkaError('UNKNOWN_MEMBER_ID', 'this consumer is not a member of its group', {
        retriable: true,
      });
  }

  async commit(offsets: readonly CommitOffset[]): Promise<void> {
    this.#calls.commit++;
    this.#ready('commit()');
    this.#checkOffsets(offsets, 'commit');
    if (offsets.length === 0) return;
    let ok = false;
    try {
      const fail = await this.#faults.enter('commit');
      if (fail) throw this.#failure('commit', fail);
      this.#checkMember();
      this.#group.commit(offsets);
      ok = true;
    } finally {
      this.#record('commit', 0, offsets, ok);
    }
  }

  async produceTransactionally(
    records: readonly OutRecord[],
    offsets: readonly CommitOffset[],
    beforeCommit?: () => void,
  ): Promise<void> {
    this.#calls.produceTransactionally++;
    this.#ready('produceTransactionally()');
    this.#checkOffsets(offsets, 'produceTransactionally');
    let ok = false;
    try {
      const fail = await this.#faults.enter('transaction');
      if (this.#cluster.producerEpoch(this.#transactionalId) !== this.#producerEpoch)
        throw new RedfenceError(
          'RF_KAFKA_FATAL',
          `Kafka: cannot begin a transaction: producer ${this.#transactionalId} was fenced by a newer one`,
          { cause: new MemoryKafkaError('PRODUCER_FENCED', 'fenced', { fatal: true }) },
        );
      const txn = this.#cluster.beginTransaction();
      try {
        this.#cluster.append(records, txn);
        if (fail) throw this.#failure('transaction', fail);
        this.#checkMember();
        beforeCommit?.();
        this.#cluster.endTransaction(txn, 'committed', { groupId: this.groupId, offsets });
      } catch (err) {
        this.#cluster.endTransaction(txn, 'aborted');
        throw err;
      }
      ok = true;
    } finally {
      this.#record('transaction', records.length, offsets, ok);
    }
  }

  async committed(partitions: readonly TopicPartition[]): Promise<Map<string, number>> {
    await this.#adminCall('committed');
    this.#ready('committed()');
    return new Map(partitions.map((tp) => [tpKey(tp.topic, tp.partition), this.#group.committed(tp)]));
  }

  /** Counted on its own; a hold or failure of the `committed` step applies to it too (one read). */
  async committedWithMetadata(partitions: readonly TopicPartition[]): Promise<Map<string, CommittedOffset>> {
    this.#calls.committedWithMetadata++;
    const fail = await this.#faults.enter('committed');
    if (fail) throw this.#failure('committed', fail);
    this.#ready('committedWithMetadata()');
    return new Map(
      partitions.map((tp) => [tpKey(tp.topic, tp.partition), this.#group.committedWithMetadata(tp)]),
    );
  }

  /** Counts the call, waits at its hold and throws its injected failure. */
  async #adminCall(step: Exclude<PortStep, KafkaStep | 'start' | 'stop'>): Promise<void> {
    this.#calls[step]++;
    const fail = await this.#faults.enter(step);
    if (fail) throw this.#failure(step, fail);
  }

  async #admin(what: Exclude<PortStep, KafkaStep | 'start' | 'stop' | 'committed'>): Promise<void> {
    await this.#adminCall(what);
    if (this.#state === 'stopped')
      throw new RedfenceError('RF_INVALID_STATE', `memory Kafka port: ${what}() after stop()`);
  }

  async partitionCount(topic: string): Promise<number> {
    await this.#admin('partitionCount');
    const n = this.#cluster.partitionCount(topic);
    if (n === undefined) throw new RedfenceError('RF_TOPIC_MISSING', `topic ${topic} does not exist`);
    return n;
  }

  async describeTopics(topics: readonly string[]): Promise<Map<string, number>> {
    await this.#admin('describeTopics');
    const out = new Map<string, number>();
    for (const t of topics) {
      const n = this.#cluster.partitionCount(t);
      if (n !== undefined) out.set(t, n);
    }
    return out;
  }

  /** As the broker's: sorted, the broker's own topics left out. */
  async listTopics(): Promise<string[]> {
    await this.#admin('listTopics');
    return this.#cluster
      .topicNames()
      .filter((t) => !BROKER_TOPICS.has(t))
      .sort();
  }

  async createTopics(topics: readonly TopicSpec[]): Promise<void> {
    await this.#admin('createTopics');
    for (const t of topics) {
      const rf = t.replicationFactor;
      if (rf !== undefined && (!Number.isSafeInteger(rf) || rf < 1))
        throw new MemoryKafkaError('INVALID_REPLICATION_FACTOR', `topic ${t.topic}: bad replication factor`, {
          retriable: false,
        });
    }
    for (const t of topics) this.#cluster.createTopic(t.topic, t.partitions);
  }

  async highWatermarks(topic: string): Promise<Map<number, number>> {
    await this.#admin('highWatermarks');
    if (this.#cluster.partitionCount(topic) === undefined)
      throw new RedfenceError('RF_TOPIC_MISSING', `topic ${topic} does not exist`);
    return new Map(this.#cluster.logs(topic).map((log, p) => [p, log.highWatermark]));
  }

  seek(partition: TopicPartition, offset: number): void {
    this.#calls.seek++;
    if (!Number.isSafeInteger(offset) || offset < 0)
      throw new RedfenceError('RF_INVALID_ARGUMENT', `seek: offset must be an integer >= 0, got ${offset}`);
    this.#consumer.seek(partition, offset);
  }

  /** Paused partitions stay paused across a revocation and a new assignment, as in the real client. */
  pause(partitions: readonly TopicPartition[]): void {
    this.#calls.pause++;
    this.#consumer.pause(partitions);
  }

  resume(partitions: readonly TopicPartition[]): void {
    this.#calls.resume++;
    this.#consumer.resume(partitions);
  }

  /** Ends delivery after the batch in flight, revokes this port's partitions (awaited) and leaves the group. */
  stop(): Promise<void> {
    this.#calls.stop++;
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    await this.#faults.enter('stop');
    this.#faults.releaseAll(); // a held start or Kafka step must not keep the port from stopping
    if (this.#state === 'idle') {
      this.#state = 'stopped';
      return;
    }
    this.#state = 'stopping';
    await this.#consumer.stop();
    this.#state = 'stopped';
    this.#cluster.changed();
  }
}
