/**
 * The processor: consume a batch, check each key's partition (murmur2), fence + apply per key in Redis
 * (pending outputs kept atomically), produce outputs and dead letters, then commit — at-least-once
 * (produce, await delivery, commit offset + 1) or exactly-once (one Kafka transaction holding outputs,
 * dead letters and offsets). Order is the invariant: Redis write, then produce, then commit.
 *
 * This class wires the stages (options, partition table, plan, apply, emit, commit pipeline, Redis
 * guard, sweeper, watchdog; see docs/architecture.md; the batch and rebalance contexts are cut from them
 * in wiring.ts, the input's partition count is input-partitions.ts's) and owns the lifecycle:
 * `idle -> starting -> running -> closing -> closed`. start() runs once; when it fails it stops what it
 * had started (timers, Kafka) and the processor ends `closed`. close() is memoised: every caller awaits
 * the same drain. A call the state does not allow throws RF_INVALID_STATE.
 */

import { randomBytes } from 'node:crypto';
import type { ProcessorDefinition } from '../definition/definition.js';
import { RedfenceError } from '../errors/index.js';
import { Fence } from '../fence/index.js';
import { checkPermissions, onGroup, onTopic } from '../kafka/permissions.js';
import { ensureTopics } from '../kafka/topics.js';
import type { InRecord, KafkaPort, TopicPartition } from '../kafka/types.js';
import { Lifecycle, type RuntimeState } from '../runtime/lifecycle.js';
import type { Logger } from '../runtime/logger.js';
import { instanceRegistration as registration } from '../runtime/registry.js';
import { Tracing } from '../telemetry/tracing.js';
import { type BatchContext, processBatch } from './batch.js';
import { type BatchBackoff, batchBackoffOf, batchFailed } from './batch-backoff.js';
import { CommitPipeline } from './commit-pipeline.js';
import { Counts, type ProcessorCounts } from './counts.js';
import { InputPartitions } from './input-partitions.js';
import { Liveness } from './liveness.js';
import {
  type ProcessingMode,
  type ProcessorOptions,
  type ResolvedOptions,
  resolveOptions,
} from './options.js';
import { PartitionTable, topicPartition } from './partition-table.js';
import { assign, type RebalanceContext, revoke } from './rebalance.js';
import { RedisGuard } from './redis-guard.js';
import { checkRedis, loadFenceScripts } from './redis-setup.js';
import type { SnapshotStats, Snapshotter } from './snapshotter.js';
import { Sweeper } from './sweeper.js';
import { userCaller } from './user-call.js';
import type { Watchdog } from './watchdog.js';
import {
  batchContextOf,
  kafkaPort,
  rebalanceContextOf,
  redisStepOf,
  replicationOf,
  type Stages,
  snapshotterOf,
  watchdogOf,
  watermarkReads,
} from './wiring.js';

export type { ProcessingMode, ProcessorOptions } from './options.js';

export type ProcessorState = RuntimeState;

/** Longest close() waits for the last sweep of the partitions it committed. */
const CLOSE_SWEEP_MS = 5000;
/** An idle processor PINGs Redis after this long without a Redis call (src/processor/redis-guard.ts). */
const IDLE_PROBE_MS = 2000;

/**
 * @example
 * const processor = new Processor({ definition, redis, kafka: { brokers: ['127.0.0.1:9092'] } });
 * await processor.start();
 * process.on('SIGTERM', () => processor.close());
 */
export class Processor<T = unknown, S = unknown> {
  readonly mode: ProcessingMode;
  readonly groupId: string;
  readonly instanceId: string;
  readonly fence: Fence;
  readonly #o: ResolvedOptions;
  readonly #kafka: KafkaPort;
  readonly #log: Logger;
  readonly #table = new PartitionTable();
  readonly #counts = new Counts();
  readonly #life: Lifecycle;
  readonly #liveness: Liveness;
  readonly #guard: RedisGuard;
  readonly #backoff: BatchBackoff;
  #idleProbe: NodeJS.Timeout | undefined;
  readonly #pipeline: CommitPipeline;
  readonly #sweeper: Sweeper;
  readonly #watchdog: Watchdog | undefined;
  readonly #snapshot: Snapshotter | undefined;
  readonly #batch: BatchContext;
  readonly #rebalance: RebalanceContext;
  readonly #tracing: Tracing;
  readonly #input: InputPartitions;
  /** The batches in `onBatch` now (one per partition at most; `partitionsInFlight` of them). */
  readonly #inFlight = new Set<Promise<void>>();

  constructor(options: ProcessorOptions<T, S>) {
    const o = resolveOptions(options);
    this.#o = o;
    this.mode = o.mode;
    this.groupId = o.groupId;
    this.instanceId = o.instanceId ?? randomBytes(4).toString('hex');
    this.#log = o.logger;
    this.fence = new Fence({ redis: o.redis, store: o.definition.store, mode: o.fencing });
    this.#kafka = kafkaPort(o, this.groupId, this.instanceId);
    this.#tracing = new Tracing(o.tracing, { groupId: this.groupId });
    const kafka = this.#kafka;
    const { metrics, health } = o;
    const log = this.#log;
    this.#life = new Lifecycle({
      name: 'processor',
      log: o.logger,
      logFields: () => ({ instance: this.instanceId }),
      startUp: () => this.#startUp(),
      quiesce: () => this.#quiesce(),
      drain: () => this.#drain(),
      stop: () => this.#stop(),
      failedStart: () => {
        for (const part of ['redis', 'scripts', 'group'] as const) o.health?.setReady(part, false);
      },
      onFatal: o.onFatal,
      registration: registration(o.redis, 'processor', () => ({
        id: this.instanceId,
        group: this.groupId,
        module: o.definition.store,
        mode: o.mode,
        partitions: this.#table.all(),
      })),
    });
    const signal = this.#life.signal;
    const table = this.#table;
    this.#liveness = new Liveness(health);
    this.#guard = new RedisGuard({
      kafka,
      // the end of an outage resumes them, but not one waiting out a failed batch's delay
      owned: () => this.#backoff.notWaiting(table.all()).map(topicPartition),
      metrics,
      health,
      log,
      signal,
    });
    const guard = this.#guard;
    this.#backoff = batchBackoffOf(o.watchdog, kafka, table, () => guard.outage);
    this.#input = new InputPartitions({
      input: o.definition.input,
      kafka,
      fence: this.fence,
      redisStep: (what, fn) => guard.step(what, fn),
      log,
    });
    const redisStep = redisStepOf(this.#guard, o.redis);
    const replication = replicationOf(o, redisStep, log);
    const outage = () => this.#guard.outage;
    this.#sweeper = new Sweeper({
      fence: this.fence,
      log,
      every: o.sweepEvery,
      intervalMs: o.sweepIntervalMs,
      partitions: () => table.active(),
      outage,
    });
    this.#pipeline = new CommitPipeline({
      mode: o.mode,
      kafka,
      log,
      metrics,
      groupCommitRecords: o.groupCommitRecords,
      commitIntervalMs: o.commitIntervalMs,
      fatal: (err) => this.#fatal(err),
      tracing: this.#tracing,
      ...(o.crashHook ? { crash: o.crashHook } : {}),
      committed: async (b) => {
        this.#counts.committed(b.count, b.out, o.deadLetterTopic);
        this.#sweeper.committed(b.entry);
        this.#snapshot?.kick();
      },
    });
    this.#watchdog = watchdogOf(o, {
      running: () => this.#life.state === 'running',
      partitions: () => table.active(),
      ...watermarkReads(kafka),
      kafka,
      batchInFlight: () => this.#liveness.batchInFlight,
      redisOutage: outage,
      giveUp: () => this.#liveness.giveUp(),
      log,
    });
    this.#snapshot = snapshotterOf(o, this.fence, this.instanceId, () => table.active(), outage, log);
    const stages: Stages = {
      o,
      groupId: this.groupId,
      kafka,
      fence: this.fence,
      table,
      counts: this.#counts,
      input: this.#input,
      redisStep,
      outage,
      replication,
      pipeline: this.#pipeline,
      sweeper: this.#sweeper,
      watchdog: this.#watchdog,
      callUser: userCaller(o.userRetries, signal),
      signal,
      log,
    };
    this.#batch = batchContextOf(
      stages,
      () => this.#life.state !== 'closing' && this.#life.state !== 'closed',
    );
    this.#rebalance = { ...rebalanceContextOf(stages), forget: (tp) => this.#backoff.forget(tp) };
  }

  get state(): ProcessorState {
    return this.#life.state;
  }

  /** The partitions this instance owns now (assigned, epoch acquired, not fenced). */
  get assignment(): TopicPartition[] {
    return this.#table.active().map(topicPartition);
  }

  /** The input topic's partition count: 0 until start() has read it. */
  get inputPartitions(): number {
    return this.#input.count;
  }

  /** The snapshot passes written (the `snapshot` option), or undefined without it. */
  snapshots(): SnapshotStats | undefined {
    return this.#snapshot?.stats();
  }

  /** What this processor has done since it started: a read-only snapshot (the metrics have the same and more). */
  counts(): ProcessorCounts {
    return this.#counts.snapshot();
  }

  /**
   * Checks Redis, loads the fence scripts, connects to Kafka, joins the group and starts processing.
   * Call once. When it fails (or close() is called meanwhile) it stops what it had started and the
   * processor is `closed`.
   */
  start(): Promise<void> {
    return this.#life.start();
  }

  /**
   * Finishes the batch in flight and the Kafka steps queued behind it (which commit), sweeps the
   * partitions it committed, leaves the group and disconnects Kafka (not Redis: the caller's client).
   * Every call returns the same promise.
   */
  close(): Promise<void> {
    return this.#life.close();
  }

  /**
   * Stops at once, without draining: batches applied in Redis and not yet committed are not produced
   * or committed (the next owner of their partitions processes them again, as after a crash: the
   * fence makes that exact). Leaves the group and disconnects Kafka. Idempotent; during close() it
   * cuts the drain short. `err`, when given, is logged as the reason.
   */
  destroy(err?: Error): Promise<void> {
    return this.#life.destroy(err);
  }

  async #startUp(): Promise<void> {
    const o = this.#o;
    await this.#tracing.load(); // tracing on: the API is imported here, before any connection
    await checkRedis(o.redis, o.requireNoEviction, this.#log);
    o.health?.setReady('redis', true);
    await loadFenceScripts(o.redis);
    o.health?.setReady('scripts', true);
    const inputPartitions = await this.#checkTopics();
    // before any partition is taken: what the brokers' ACLs refuse (docs/operations.md, "Kafka ACLs")
    await checkPermissions(
      this.#kafka,
      [
        onTopic('Read', o.definition.input, 'the input it consumes'),
        onGroup(this.groupId),
        onTopic('Write', o.definition.output, 'the output it produces to'),
        onTopic('Write', o.deadLetterTopic, 'the dead-letter topic'),
        ...(o.snapshot ? [onTopic('Write', o.snapshot.topic, 'the snapshot topic')] : []),
      ],
      this.groupId,
    );
    await this.#snapshot?.start(inputPartitions);
    this.#life.stillStarting();
    this.#liveness.start();
    this.#watchdog?.start();
    this.#sweeper.start();
    // a start that is slow from here on waits on the brokers (transactions, the group): say so
    this.#log.info(
      { group: this.groupId },
      'processor checked Redis, topics and permissions; connecting to Kafka',
    );
    await this.#kafka.start([o.definition.input], {
      onAssign: (tps) => assign(this.#rebalance, tps),
      onRevoke: (tps, lost) => revoke(this.#rebalance, tps, lost),
      onBatch: (topic, partition, records, hw) => this.#onBatch(topic, partition, records, hw),
      onFatal: (err) => this.#fatal(err),
      partitionsInFlight: o.partitionsInFlight,
    });
    await this.#input.read();
    this.#life.stillStarting();
    o.health?.setReady('kafka', true);
    this.#idleProbe = setInterval(() => this.#guard.probeIfIdle(() => o.redis.ping(), IDLE_PROBE_MS), 1000);
    this.#idleProbe.unref();
    this.#log.info(
      {
        group: this.groupId,
        instance: this.instanceId,
        mode: this.mode,
        partitionsInFlight: this.#o.partitionsInFlight,
      },
      'processor started',
    );
  }

  /**
   * The input, output and dead-letter topics exist before anything is consumed (RF_TOPIC_MISSING
   * otherwise: a missing output would show only as produce timeouts and endless redelivery), or the
   * missing outputs are created with the input's partition count when `createTopics` is set.
   */
  async #checkTopics(): Promise<number> {
    const o = this.#o;
    const output = o.definition.output;
    const found = await ensureTopics(this.#kafka, {
      input: o.definition.input,
      outputs: [...new Set([output, o.deadLetterTopic])],
      create: o.createTopics,
      ...(o.replicationFactor > 0 ? { replicationFactor: o.replicationFactor } : {}),
    });
    if (found.created.length > 0)
      this.#log.info(
        { topics: found.created, partitions: found.inputPartitions },
        'created missing topics with the input partition count',
      );
    for (const m of found.mismatched)
      if (m.topic === output)
        this.#log.warn(
          { topic: m.topic, partitions: m.partitions, inputPartitions: found.inputPartitions },
          'the output topic is not co-partitioned with the input (its partition count differs)',
        );
    return found.inputPartitions;
  }

  /** Close, destroy and a failed start: no new batches, timers or probes. */
  #quiesce(): void {
    this.#liveness.stop();
    clearInterval(this.#idleProbe);
    this.#watchdog?.stop();
    this.#sweeper.stop();
    this.#backoff.stop();
    this.#o.health?.setReady('kafka', false);
  }

  /** close(): the batch in flight finishes its produce and commit, the queued steps run, a last sweep. */
  async #drain(): Promise<void> {
    await Promise.all([...this.#inFlight].map((b) => b.catch(() => undefined)));
    await this.#pipeline.drain();
    await this.#sweeper.sweepAll(this.#table.active(), CLOSE_SWEEP_MS);
  }

  async #stop(): Promise<void> {
    this.#pipeline.abandon();
    await this.#snapshot?.stop();
    await this.#kafka.stop();
  }

  #fatal(err: Error): void {
    if (!this.#life.accepting) return;
    this.#liveness.giveUp();
    this.#life.fatal(err);
  }

  async #onBatch(
    topic: string,
    partition: number,
    records: InRecord[],
    highWatermark: string,
  ): Promise<void> {
    this.#liveness.batchStarted();
    this.#watchdog?.delivered();
    const trace = this.#tracing.batch();
    const batch = processBatch(this.#batch, topic, partition, records, highWatermark, trace);
    this.#inFlight.add(batch);
    let done = false;
    try {
      await batch;
      done = true;
      this.#backoff.succeeded({ topic, partition });
    } catch (err) {
      trace.failed(err);
      batchFailed(this.#backoff, this.#log, { topic, partition }, err, 'batch');
      // Redis refuses the user a command or key (its ACL): every delivery would fail the same way
      if (RedfenceError.is(err, 'RF_REDIS_AUTH')) this.#fatal(err as Error);
      throw err;
    } finally {
      trace.end();
      this.#liveness.batchEnded(done);
      this.#inFlight.delete(batch);
    }
  }
}

/**
 * A processor for `definition` (not started: call start()), in the construction idiom every runtime
 * shares (`createHandler`, `createInvalidation`): the definition, then the options. Options are checked
 * now, before any connection. The same as `new Processor({ definition, ...options })`.
 *
 * @example
 * const processor = createProcessor(definition, { redis, kafka: { brokers: ['127.0.0.1:9092'] } });
 * await processor.start();
 * process.on('SIGTERM', () => processor.close());
 */
export function createProcessor<T, S>(
  definition: ProcessorDefinition<T, S>,
  options: Omit<ProcessorOptions<T, S>, 'definition'>,
): Processor<T, S> {
  return new Processor<T, S>({ ...options, definition } as ProcessorOptions<T, S>);
}
