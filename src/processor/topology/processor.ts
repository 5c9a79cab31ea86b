/**
 * The topology processor: a processor whose engine is a built topology (src/topology/run/'s batch
 * executor) instead of a processor definition's fence calls, on the same stages: the shared lifecycle,
 * the partition table, the rebalance callbacks (acquireEpoch per partition, keyed by the topology's
 * applicationId, and the committed offset with its metadata), the Redis guard, liveness and the
 * stalled-consumer watchdog (on every topic it reads), and the commit pipeline
 * (exactly-once: one transaction holding the outputs, dead letters, offsets and stream times;
 * at-least-once: produce, then commit). The partition's stream time travels in its commit's metadata
 * (stream-time.ts). Order is the invariant: Redis write, then produce, then commit. The internal
 * `crashHook` option (fault tests: src/processor/crash-points.ts) is called at the processor's points:
 * 'after-redis-write' in the batch step, the others in the commit pipeline. With `tracing` on, each batch
 * is a `process <topic>` span with the topology's attributes (batch.ts), its Redis step a child span and
 * each Kafka step a `send` span linked to the batches it carries, as the processor's (docs/operations.md).
 * Over 400 lines: the constructor wires every stage (each in its own file: wiring.ts, refresh.ts,
 * snapshot.ts, purge.ts, ticks.ts) to the one lifecycle and partition table they share.
 */

import { randomBytes } from 'node:crypto';
import { Cluster } from 'ioredis';
import { RedfenceError } from '../../errors/index.js';
import { Fence } from '../../fence/index.js';
import type { InRecord, KafkaPort, TopicPartition } from '../../kafka/types.js';
import { Lifecycle, type RuntimeState } from '../../runtime/lifecycle.js';
import type { Logger } from '../../runtime/logger.js';
import { instanceRegistration as registration } from '../../runtime/registry.js';
import { Tracing } from '../../telemetry/tracing.js';
import { countTicks } from '../../topology/tick.js';
import { type BatchBackoff, batchBackoffOf, batchFailed } from '../batch-backoff.js';
import type { CommitPipeline, QueuedBatch } from '../commit-pipeline.js';
import { Counts, type ProcessorCounts } from '../counts.js';
import { Liveness } from '../liveness.js';
import type { ProcessingMode } from '../options.js';
import { PartitionTable, topicPartition } from '../partition-table.js';
import { assign, type RebalanceContext, revoke } from '../rebalance.js';
import { RedisGuard } from '../redis-guard.js';
import { checkRedis, loadFenceScripts } from '../redis-setup.js';
import type { SnapshotStats } from '../snapshotter.js';
import type { Watchdog } from '../watchdog.js';
import { redisStepOf, replicationOf, watchdogOf, watermarkReads } from '../wiring.js';
import { runTopologyBatch, type TopologyBatchContext } from './batch.js';
import { NodeMetrics } from './node-metrics.js';
import {
  type ResolvedTopologyOptions,
  resolveTopologyOptions,
  type TopologyProcessorOptions,
} from './options.js';
import { Placements } from './placement.js';
import { RepartitionPurger } from './purge.js';
import { checkRun, PatternRefresh, refreshChecks } from './refresh.js';
import { TopologySnapshots } from './snapshot.js';
import { defaultDeadLetterTopic, ExecutorAtStart } from './sources.js';
import { PartitionTimes } from './stream-time.js';
import type { IdleTicks } from './ticks.js';
import {
  batchContext,
  commitPipelineOf,
  idleTicksOf,
  rebalanceContext,
  type TopologyParts,
  topologyPort,
} from './wiring.js';

export type { TopologyProcessorOptions } from './options.js';

/** What a topology processor has done: the processor's counts and the records the aggregations dropped. */
export interface TopologyCounts extends ProcessorCounts {
  readonly dropped: number;
  /** Deletes of committed repartition records (one per partition and purge). */
  readonly purged: number;
  /** Ticks of `idleCloseMs` this instance produced, and ticks read in its committed batches. */
  readonly ticksProduced: number;
  readonly ticksConsumed: number;
  /** Times a pattern matched new topics while it ran and the processor moved to the new match (refresh.ts). */
  readonly patternSwitches: number;
}

const IDLE_PROBE_MS = 2000;

/**
 * Runs a built topology against Kafka, its state in Redis.
 *
 * @example
 * const t = topology({ applicationId: 'fraud' });
 * t.stream<string, { amount: number }>('orders', { key: serdes.string() })
 *   .groupByKey().windowedBy(TimeWindows.ofSizeWithNoGrace(300_000)).count()
 *   .toStream().map((w, n) => [w.key, n] as const).to('order-counts', { key: serdes.string() });
 * const p = new TopologyProcessor({ topology: t.build(), redis, kafka: { brokers: ['127.0.0.1:9092'] } });
 * await p.start();
 * process.on('SIGTERM', () => p.close());
 */
export class TopologyProcessor {
  readonly mode: ProcessingMode;
  readonly groupId: string;
  readonly instanceId: string;
  /** The executor, made at construction or, for a topology reading a pattern, at start (sources.ts). */
  readonly #run: ExecutorAtStart;
  readonly #o: ResolvedTopologyOptions;
  readonly #kafka: KafkaPort;
  readonly #log: Logger;
  readonly #fence: Fence;
  readonly #table = new PartitionTable();
  #inputPartitions = 0;
  /** By topic: the input's and each repartition topic's partitions. */
  readonly #times = new Map<string, PartitionTimes>();
  readonly #counts = new Counts();
  #dropped = 0;
  readonly #life: Lifecycle;
  readonly #guard: RedisGuard;
  readonly #backoff: BatchBackoff;
  readonly #liveness: Liveness;
  readonly #watchdog: Watchdog | undefined;
  readonly #pipeline: CommitPipeline;
  readonly #batch: TopologyBatchContext;
  readonly #rebalance: RebalanceContext;
  readonly #deadLetterTopic: string;
  readonly #purger: RepartitionPurger;
  /** A pattern's topics made while it runs (refresh.ts). */
  readonly #refresh: PatternRefresh;
  readonly #nodes: NodeMetrics;
  readonly #tracing: Tracing;
  #idleProbe: NodeJS.Timeout | undefined;
  #inFlight: Promise<void> | undefined;
  /** The wall-clock close of idle partitions (`idleCloseMs`), or none. */
  readonly #ticks: IdleTicks | undefined;
  readonly #tickCounts = { produced: 0, consumed: 0 };
  /** The `snapshot` option's passes; their markers are the repartition purge's floor. */
  readonly #snapshots: TopologySnapshots;

  constructor(options: TopologyProcessorOptions) {
    const o = resolveTopologyOptions(options);
    this.#o = o;
    this.mode = o.mode;
    this.groupId = o.groupId;
    this.instanceId = o.instanceId ?? randomBytes(4).toString('hex');
    this.#log = o.logger;
    const app = o.topology.applicationId;
    this.#run = new ExecutorAtStart(o.topology, o);
    this.#nodes = new NodeMetrics(o.metrics, this.#run.checked);
    this.#deadLetterTopic = o.deadLetterTopic ?? defaultDeadLetterTopic(this.#run.checked);
    // the partition epochs of the topology's input, keyed by its applicationId (the key calls' app)
    this.#fence = new Fence({
      redis: o.redis,
      store: app,
      mode: o.redis instanceof Cluster ? 'cluster' : 'strict',
      ...(o.tenant === undefined ? {} : { tenant: o.tenant }),
    });
    this.#kafka = topologyPort(o, this.groupId, this.instanceId);
    this.#tracing = new Tracing(o.tracing, { groupId: this.groupId });
    const kafka = this.#kafka;
    const log = this.#log;
    this.#life = new Lifecycle({
      name: 'topology processor',
      log,
      logFields: () => ({ instance: this.instanceId }),
      startUp: () => this.#startUp(),
      quiesce: () => this.#quiesce(),
      drain: () => this.#drain(),
      stop: () => this.#stop(),
      onFatal: o.onFatal,
      registration: registration(o.redis, 'processor', () => ({
        id: this.instanceId,
        group: this.groupId,
        module: app,
        mode: o.mode,
        partitions: this.#table.all(),
      })),
    });
    const table = this.#table;
    this.#guard = new RedisGuard({
      kafka,
      // the end of an outage resumes them, but not one waiting out a failed batch's delay
      owned: () => this.#backoff.notWaiting(table.all()).map(topicPartition),
      metrics: o.metrics,
      health: o.health,
      log,
      signal: this.#life.signal,
    });
    this.#backoff = batchBackoffOf(o.watchdog, kafka, table, () => this.#guard.outage);
    this.#liveness = new Liveness(o.health);
    this.#watchdog = watchdogOf(o, {
      running: () => this.#life.state === 'running',
      partitions: () => table.active(),
      ...watermarkReads(kafka),
      kafka,
      batchInFlight: () => this.#liveness.batchInFlight,
      redisOutage: () => this.#guard.outage,
      giveUp: () => this.#liveness.giveUp(),
      log,
    });
    const redisStep = redisStepOf(this.#guard, o.redis);
    const replication = replicationOf(o, redisStep, log);
    this.#pipeline = commitPipelineOf(o, kafka, log, this.#tracing, {
      fatal: (err) => this.#fatal(err),
      committed: (b) => this.#committed(b),
    });
    const run = this.#run;
    const placements = new Placements({
      kafka,
      fence: this.#fence,
      redisStep,
      log,
      plan: () => run.executor.plan,
    });
    const parts: TopologyParts = {
      o,
      instanceId: this.instanceId,
      groupId: this.groupId,
      deadLetterTopic: this.#deadLetterTopic,
      run,
      table,
      kafka,
      fence: this.#fence,
      pipeline: this.#pipeline,
      redisStep,
      replication,
      counts: this.#counts,
      nodes: this.#nodes,
      placements,
      log,
      timesOf: (topic) => this.#timesOf(topic),
      accepting: () => this.#life.state !== 'closing' && this.#life.state !== 'closed',
      ticking: () => this.#life.state === 'running' && !this.#guard.outage,
      redisOutage: () => this.#guard.outage,
      dropped: (n) => {
        this.#dropped += n;
      },
      assigned: () => this.#watchdog?.assigned(),
    };
    this.#snapshots = new TopologySnapshots(parts);
    this.#batch = batchContext(parts);
    this.#ticks = idleTicksOf(parts, this.#tickCounts);
    this.#rebalance = rebalanceContext(parts, this.#ticks, this.#backoff);
    this.#refresh = new PatternRefresh({
      ...refreshChecks(o, kafka, this.#deadLetterTopic, this.groupId, log),
      intervalMs: o.patternRefreshMs,
      run,
      running: () => this.#life.state === 'running',
      switched: (n) => {
        this.#inputPartitions = n;
      },
      fatal: (err) => this.#fatal(err),
    });
    this.#purger = new RepartitionPurger({
      port: kafka,
      topics: new Set(o.topology.repartitionTopics),
      intervalMs: o.repartitionPurgeIntervalMs,
      floor: this.#snapshots.floor,
      log,
    });
  }

  get state(): RuntimeState {
    return this.#life.state;
  }

  /** The partitions this instance owns now (assigned, epoch acquired, not fenced). */
  get assignment(): TopicPartition[] {
    return this.#table.active().map(topicPartition);
  }

  /** The topic dead letters go to (`deadLetterTopic`, default `<first input>.DLT`, `<applicationId>.DLT` when the first source reads a pattern). */
  get deadLetterTopic(): string {
    return this.#deadLetterTopic;
  }

  /** The first input topic's partition count: 0 until start() has read it. */
  get inputPartitions(): number {
    return this.#inputPartitions;
  }

  /** The snapshot passes written (the `snapshot` option), or undefined without it. */
  snapshots(): SnapshotStats | undefined {
    return this.#snapshots.stats();
  }

  /** What this processor has done since it started (read-only snapshot). */
  counts(): TopologyCounts {
    return Object.freeze({
      ...this.#counts.snapshot(),
      dropped: this.#dropped,
      purged: this.#purger.purged,
      ticksProduced: this.#tickCounts.produced,
      ticksConsumed: this.#tickCounts.consumed,
      patternSwitches: this.#refresh.switches,
    });
  }

  /** Checks Redis, connects to Kafka, joins the group and starts processing. Call once. */
  start(): Promise<void> {
    return this.#life.start();
  }

  /** Finishes the batch in flight and its Kafka step (which commits), leaves the group. Memoised. */
  close(): Promise<void> {
    return this.#life.close();
  }

  /** Stops at once: applied batches are not committed (the next owner replays them exactly). */
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
    const executor = await this.#run.start(this.#kafka, this.#deadLetterTopic, this.#log);
    const plan = executor.plan;
    // before any partition is taken: the layout, the topics, the tick writes, the ACLs (refresh.ts)
    this.#inputPartitions = await checkRun(this.#refresh.checks, executor);
    await this.#snapshots.start(this.#inputPartitions);
    this.#life.stillStarting();
    this.#liveness.start();
    this.#watchdog?.start();
    await this.#kafka.start([...plan.subs.keys()], {
      onAssign: (tps) => assign(this.#rebalance, tps),
      onRevoke: (tps, lost) => revoke(this.#rebalance, tps, lost),
      onBatch: (topic, partition, records, hw) => this.#onBatch(topic, partition, records, hw),
      onFatal: (err) => this.#fatal(err),
    });
    this.#life.stillStarting();
    o.health?.setReady('kafka', true);
    this.#idleProbe = setInterval(() => this.#guard.probeIfIdle(() => o.redis.ping(), IDLE_PROBE_MS), 1000);
    this.#idleProbe.unref();
    this.#ticks?.start();
    this.#refresh.start();
    this.#log.info(
      { group: this.groupId, instance: this.instanceId, mode: this.mode, topology: o.topology.applicationId },
      'topology processor started',
    );
  }

  #quiesce(): void {
    this.#liveness.stop();
    this.#watchdog?.stop();
    clearInterval(this.#idleProbe);
    this.#ticks?.stop();
    this.#refresh.stop();
    this.#backoff.stop();
    this.#o.health?.setReady('kafka', false);
  }

  async #drain(): Promise<void> {
    await this.#refresh.settle();
    await this.#inFlight?.catch(() => undefined);
    await this.#pipeline.drain();
    await this.#purger.settle();
  }

  async #stop(): Promise<void> {
    this.#pipeline.abandon();
    await this.#snapshots.stop();
    await this.#kafka.stop();
  }

  #timesOf(topic: string): PartitionTimes {
    let t = this.#times.get(topic);
    if (t === undefined) {
      t = new PartitionTimes();
      this.#times.set(topic, t);
    }
    return t;
  }

  #fatal(err: Error): void {
    if (!this.#life.accepting) return;
    this.#liveness.giveUp();
    this.#life.fatal(err);
  }

  /** After a commit: counts, and the emit-final index entries no replay from there can need. */
  async #committed(b: QueuedBatch): Promise<void> {
    const { topic, partition } = b.entry;
    const next = b.next;
    this.#counts.committed(b.count, b.out, this.#deadLetterTopic);
    this.#tickCounts.consumed += this.#nodes.committed(b);
    this.#timesOf(topic).committed(partition, next);
    this.#purger.committed(topic, partition, next);
    this.#snapshots.kick();
    try {
      await this.#run.executor.committed(topic, partition, next);
    } catch (err) {
      // a later commit drops them (the bound only grows)
      this.#log.debug({ topic, partition, err: (err as Error).message }, 'close-index pruning failed');
    }
  }

  async #onBatch(topic: string, partition: number, records: InRecord[], hw: string): Promise<void> {
    this.#liveness.batchStarted();
    this.#watchdog?.delivered();
    const trace = this.#tracing.batch();
    this.#ticks?.batchStarted(topic, partition, countTicks(records));
    const batch = runTopologyBatch(this.#batch, topic, partition, records, hw, trace);
    this.#inFlight = batch;
    let done = false;
    try {
      await batch;
      done = true;
      this.#backoff.succeeded({ topic, partition });
    } catch (err) {
      trace.failed(err);
      batchFailed(this.#backoff, this.#log, { topic, partition }, err, 'topology batch');
      // Redis refuses the user a command or key (its ACL): every delivery would fail the same way
      if (RedfenceError.is(err, 'RF_REDIS_AUTH')) this.#fatal(err as Error);
      throw err;
    } finally {
      trace.end();
      this.#ticks?.batchEnded(topic, partition);
      this.#liveness.batchEnded(done);
      this.#inFlight = undefined;
    }
  }
}
