/**
 * The processor: consume a batch, check each key's partition (murmur2), fence + apply per key in Redis
 * (pending outputs kept atomically), produce outputs and dead letters, then commit — at-least-once
 * (produce, await delivery, commit offset + 1) or exactly-once (one Kafka transaction holding outputs,
 * dead letters and offsets). Order is the invariant: Redis write, then produce, then commit.
 */
import { createHash, randomBytes } from 'node:crypto';
import { Cluster, type Redis } from 'ioredis';
import type { ProcessorDefinition, RecordMeta } from '../definition/definition.js';
import { defineProcessor } from '../definition/definition.js';
import { RedfenceError } from '../errors/index.js';
import {
  type ApplyRequest,
  Fence,
  type FenceRecord,
  type FencingMode,
  type RecordResult,
} from '../fence/index.js';
import { ConfluentKafka } from '../kafka/confluent.js';
import { type InRecord, type KafkaPort, type OutRecord, type TopicPartition, tpKey } from '../kafka/types.js';
import type { HealthState, RedfenceMetrics } from '../metrics/index.js';
import { partitionFor } from '../partitioner/index.js';
import { backoffMs, delay } from './backoff.js';
import { crashPoint } from './crash-points.js';
import { buildDeadLetter, type DeadLetterReason } from './dead-letter.js';
import { type Logger, silentLogger } from './logger.js';
import { watchdogVerdict } from './watchdog.js';

export type ProcessingMode = 'exactly-once' | 'at-least-once';

export interface ProcessorOptions<T = unknown, S = unknown> {
  definition: ProcessorDefinition<T, S>;
  /** An ioredis Redis or Cluster; the processor does not close it. */
  redis: Redis | Cluster;
  /** Kafka: connection settings for the default adapter, or any KafkaPort. */
  kafka:
    | {
        brokers: string[];
        groupProtocol?: 'classic' | 'consumer';
        groupInstanceId?: string;
        sessionTimeoutMs?: number;
        maxBatchSize?: number;
        /** Exactly-once: the broker aborts a dead instance's open transaction after this long. Default 10000. */
        transactionTimeoutMs?: number;
      }
    | KafkaPort;
  /** Default 'exactly-once'. */
  mode?: ProcessingMode;
  /** Default: 'cluster' for a Redis Cluster client, else 'strict'. */
  fencing?: FencingMode;
  /** Consumer group. Default `redfence-<store>`. */
  groupId?: string;
  /** This instance's id (transactional id suffix). Default: random. */
  instanceId?: string;
  logger?: Logger;
  metrics?: RedfenceMetrics;
  /** Liveness/readiness state for /livez and /readyz. */
  health?: HealthState;
  /** Retries of a user function that throws a retriable error (err.retriable === true) before dead-lettering. Default 3. */
  userRetries?: number;
  /** Refuse to start unless Redis' maxmemory-policy is noeviction. Default true. */
  requireNoEviction?: boolean;
  /** After each cycle's Redis writes and each epoch INCR, WAIT for this many replicas before committing. */
  waitReplicas?: { replicas: number; timeoutMs: number };
  /** Sweep pending outputs of keys not written again every N committed batches per partition. Default 20. */
  sweepEvery?: number;
  /**
   * Group commit: batches whose Redis step is done while the previous Kafka step (produce + commit, or
   * the transaction) is still running wait for it and then go together in one Kafka step. At most this
   * many records wait; past it the next batch waits for the Kafka step in flight before it is
   * accepted. Default 2000; 0 gives every batch its own Kafka step.
   */
  groupCommitRecords?: number;
  /**
   * Stalled-consumer watchdog: with lag and no batch delivered for `stallMs` (default 60000), seek the
   * owned partitions back to their committed offsets; after `maxRecoveries` (default 3) stop reporting
   * liveness. `false` turns it off.
   */
  watchdog?: { stallMs?: number; intervalMs?: number; maxRecoveries?: number } | false;
  /**
   * Called once when Kafka reports a fatal error (e.g. this instance's transactional producer was
   * fenced by another with the same id). The processor has started closing itself; restart it.
   */
  onFatal?: (error: Error) => void;
  /**
   * Start-up checks that the input, output and dead-letter topics exist and fails with RF_TOPIC_MISSING
   * naming the missing one. `true`: create missing output and dead-letter topics with the input's
   * partition count (outputs stay co-partitioned with the input). Default false.
   */
  createTopics?: boolean;
  /** Replication factor of topics made by `createTopics`. Default: the broker's default. */
  replicationFactor?: number;
}

// Every option, checked by the compiler against ProcessorOptions so the list cannot drift.
const OPTION_NAMES: Record<keyof ProcessorOptions, true> = {
  definition: true,
  redis: true,
  kafka: true,
  mode: true,
  fencing: true,
  groupId: true,
  instanceId: true,
  logger: true,
  metrics: true,
  health: true,
  userRetries: true,
  requireNoEviction: true,
  waitReplicas: true,
  sweepEvery: true,
  groupCommitRecords: true,
  watchdog: true,
  onFatal: true,
  createTopics: true,
  replicationFactor: true,
};
const KNOWN = new Set(Object.keys(OPTION_NAMES));

interface Owned {
  epoch: number;
  /** Next offset to consume as last committed (-1: never committed). */
  committed: number;
  /** Next offset after the last batch handed to this instance (-1: none yet). */
  delivered: number;
  batches: number;
}

/** A batch applied in Redis, waiting for its Kafka step. */
interface Queued {
  topic: string;
  partition: number;
  owned: Owned;
  out: OutRecord[];
  count: number;
  first: number;
  next: number;
  highWatermark: string;
}

interface Planned {
  record: InRecord;
  meta: RecordMeta;
  dead?: { reason: DeadLetterReason; error: unknown };
  value?: unknown;
}

/**
 * A dead letter larger than this (key + value + headers) is sent without its value (the broker's
 * default message.max.bytes is 1 MiB): headers `redfence-value-omitted` (the value's byte length) and
 * `redfence-value-sha256` say so; `kafka_dlt-original-*` locate the record in its topic.
 */
export const MAX_DEAD_LETTER_BYTES = 900_000;

export type ProcessorState = 'idle' | 'starting' | 'running' | 'closing' | 'closed';

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
  readonly #def: ProcessorDefinition<unknown, unknown>;
  readonly #redis: Redis | Cluster;
  readonly #kafka: KafkaPort;
  readonly #log: Logger;
  readonly #metrics: RedfenceMetrics | undefined;
  readonly #health: HealthState | undefined;
  #batchStartedAt: number | undefined;
  #inFlight: Promise<void> | undefined;
  /**
   * The Kafka step in flight (produce + commit, or one transaction), running while the next batches are
   * applied in Redis. A step starts only after the previous one has finished, so commits stay in order.
   */
  #tail: Promise<void> | undefined;
  /** Batches applied in Redis, waiting for the next Kafka step (all of them go in it). */
  #queued: Queued[] = [];
  #queuedRecords = 0;
  readonly #groupCommitRecords: number;
  /** Set by a fatal Kafka error: applied batches are no longer produced (the processor is closing). */
  #kafkaBroken = false;
  /** Partitions sought back after a failed produce/commit: batches past that offset are dropped. */
  readonly #rewound = new Map<string, number>();
  #ticker: NodeJS.Timeout | undefined;
  readonly #watchdog: { stallMs: number; intervalMs: number; maxRecoveries: number } | undefined;
  #watchdogTimer: NodeJS.Timeout | undefined;
  #lastDeliveryAt = Date.now();
  #recoveries = 0;
  #gaveUp = false;
  readonly #onFatal: ((error: Error) => void) | undefined;
  readonly #userRetries: number;
  readonly #requireNoEviction: boolean;
  readonly #wait: { replicas: number; timeoutMs: number } | undefined;
  readonly #sweepEvery: number;
  readonly #deadLetterTopic: string;
  readonly #owned = new Map<string, Owned>();
  readonly #fenced = new Set<string>();
  readonly #abort = new AbortController();
  #partitions = 0;
  #state: ProcessorState = 'idle';
  #outage = false;
  /** Counters for the run: verdicts, dead letters by reason, records consumed. */
  readonly stats = {
    records: 0,
    outputs: 0,
    deadLetters: 0,
    verdicts: new Map<string, number>(),
    fencedPartitions: 0,
  };

  constructor(options: ProcessorOptions<T, S>) {
    for (const k of Object.keys(options)) {
      if (!KNOWN.has(k))
        throw new RedfenceError(
          'RF_INVALID_OPTIONS',
          `unknown processor option "${k}"; known: ${[...KNOWN].join(', ')}`,
        );
    }
    this.#def = defineProcessor(options.definition) as unknown as ProcessorDefinition<unknown, unknown>;
    const mode = options.mode ?? 'exactly-once';
    if (mode !== 'exactly-once' && mode !== 'at-least-once') {
      throw new RedfenceError(
        'RF_INVALID_OPTIONS',
        `option "mode" must be 'exactly-once' or 'at-least-once', got ${JSON.stringify(mode)}`,
      );
    }
    this.mode = mode;
    this.groupId = options.groupId ?? `redfence-${this.#def.store}`;
    this.instanceId = options.instanceId ?? randomBytes(4).toString('hex');
    this.#redis = options.redis;
    this.#log = options.logger ?? silentLogger;
    this.#metrics = options.metrics;
    this.#health = options.health;
    this.#userRetries = options.userRetries ?? 3;
    this.#requireNoEviction = options.requireNoEviction ?? true;
    this.#wait = options.waitReplicas;
    this.#sweepEvery = options.sweepEvery ?? 20;
    this.#groupCommitRecords = options.groupCommitRecords ?? 2000;
    if (!Number.isSafeInteger(this.#groupCommitRecords) || this.#groupCommitRecords < 0)
      throw new RedfenceError(
        'RF_INVALID_OPTIONS',
        `option "groupCommitRecords" must be an integer >= 0, got ${JSON.stringify(options.groupCommitRecords)}`,
      );
    this.#onFatal = options.onFatal;
    this.#watchdog =
      options.watchdog === false
        ? undefined
        : {
            stallMs: options.watchdog?.stallMs ?? 60_000,
            intervalMs: options.watchdog?.intervalMs ?? 10_000,
            maxRecoveries: options.watchdog?.maxRecoveries ?? 3,
          };
    this.#deadLetterTopic = this.#def.deadLetter ?? `${this.#def.input}.DLT`;
    const fencing = options.fencing ?? (options.redis instanceof Cluster ? 'cluster' : 'strict');
    this.fence = new Fence({ redis: options.redis, store: this.#def.store, mode: fencing });
    const k = options.kafka;
    this.#kafka =
      'start' in k
        ? k
        : new ConfluentKafka({
            brokers: k.brokers,
            groupId: this.groupId,
            clientId: `redfence-${this.instanceId}`,
            ...(mode === 'exactly-once' ? { transactionalId: `${this.groupId}-${this.instanceId}` } : {}),
            ...(k.groupProtocol ? { groupProtocol: k.groupProtocol } : {}),
            ...(k.groupInstanceId ? { groupInstanceId: k.groupInstanceId } : {}),
            ...(k.sessionTimeoutMs ? { sessionTimeoutMs: k.sessionTimeoutMs } : {}),
            ...(k.maxBatchSize ? { maxBatchSize: k.maxBatchSize } : {}),
            ...(k.transactionTimeoutMs ? { transactionTimeoutMs: k.transactionTimeoutMs } : {}),
          });
  }

  get state(): ProcessorState {
    return this.#state;
  }

  /** The partitions this instance owns now (assigned, epoch acquired, not fenced). */
  get assignment(): TopicPartition[] {
    return this.#ownedPartitions().filter((tp) => !this.#fenced.has(tpKey(tp.topic, tp.partition)));
  }

  /** Checks Redis, connects to Kafka, joins the group and starts processing. */
  async start(): Promise<void> {
    if (this.#state !== 'idle')
      throw new RedfenceError('RF_INVALID_ARGUMENT', `start() called in state ${this.#state}`);
    this.#state = 'starting';
    await this.#checkRedis();
    this.#health?.setReady('redis', true);
    this.#health?.setReady('scripts', true);
    // Liveness: progress is marked while no batch is in flight; a batch stuck in flight stops it.
    this.#ticker = setInterval(() => {
      if (this.#batchStartedAt === undefined && !this.#gaveUp) this.#health?.markProgress();
    }, 1000);
    this.#ticker.unref();
    if (this.#watchdog) {
      this.#watchdogTimer = setInterval(() => void this.#checkStall(), this.#watchdog.intervalMs);
      this.#watchdogTimer.unref();
    }
    this.#health?.markProgress();
    await this.#kafka.start([this.#def.input], {
      onAssign: (tps) => this.#onAssign(tps),
      onRevoke: (tps, lost) => this.#onRevoke(tps, lost),
      onBatch: (topic, partition, records, hw) => this.#onBatch(topic, partition, records, hw),
    });
    this.#partitions = await this.#kafka.partitionCount(this.#def.input);
    this.#health?.setReady('kafka', true);
    this.#state = 'running';
    this.#log.info({ group: this.groupId, instance: this.instanceId, mode: this.mode }, 'processor started');
  }

  /** Finishes the batch in flight (which commits), leaves the group and disconnects. Idempotent. */
  async close(): Promise<void> {
    if (this.#state === 'closed' || this.#state === 'closing') return;
    this.#state = 'closing';
    this.#abort.abort();
    if (this.#ticker) clearInterval(this.#ticker);
    if (this.#watchdogTimer) clearInterval(this.#watchdogTimer);
    this.#health?.setReady('kafka', false);
    // Let the batch in flight finish its produce and commit before the clients go.
    await this.#inFlight?.catch(() => undefined);
    await this.#drain();
    await this.#kafka.stop();
    this.#state = 'closed';
    this.#log.info({ instance: this.instanceId }, 'processor closed');
  }

  async #checkRedis(): Promise<void> {
    const nodes = this.#redis instanceof Cluster ? this.#redis.nodes('master') : [this.#redis];
    for (const node of nodes) {
      const policy = ((await node.config('GET', 'maxmemory-policy')) as string[])[1];
      if (policy !== 'noeviction') {
        if (this.#requireNoEviction) {
          throw new RedfenceError(
            'RF_UNSAFE_REDIS',
            `Redis maxmemory-policy is ${policy}: eviction silently deletes fences and replays are applied twice. Set it to noeviction (or pass requireNoEviction: false).`,
          );
        }
        this.#log.warn({ policy }, 'Redis maxmemory-policy is not noeviction');
      }
      const aof = ((await node.config('GET', 'appendonly')) as string[])[1];
      if (aof !== 'yes')
        this.#log.warn(
          { appendonly: aof },
          'Redis AOF is off: a Redis restart loses fences (see docs/operations.md)',
        );
    }
  }

  #fatal(err: Error): void {
    if (this.#state === 'closing' || this.#state === 'closed') return;
    this.#log.error({ err: err.message }, 'fatal Kafka error: closing the processor (restart it)');
    this.#gaveUp = true; // stop reporting liveness
    // Not awaited here: close() waits for the batch in flight, which is this one.
    setImmediate(() => {
      void this.close().finally(() => this.#onFatal?.(err));
    });
  }

  async #checkStall(): Promise<void> {
    const w = this.#watchdog;
    if (!w || this.#state !== 'running' || this.#owned.size === 0) return;
    try {
      const ends = await this.#kafka.highWatermarks(this.#def.input);
      let lag = 0;
      for (const [key, o] of this.#owned) {
        if (this.#fenced.has(key)) continue;
        const partition = Number(key.slice(key.lastIndexOf('/') + 1));
        lag += Math.max(0, (ends.get(partition) ?? 0) - Math.max(0, o.committed));
      }
      const verdict = watchdogVerdict({
        now: Date.now(),
        lastDeliveryAt: this.#lastDeliveryAt,
        stallMs: w.stallMs,
        batchInFlight: this.#batchStartedAt !== undefined,
        redisOutage: this.#outage,
        lag,
        recoveries: this.#recoveries,
        maxRecoveries: w.maxRecoveries,
      });
      if (verdict === 'recover') {
        this.#recoveries++;
        this.#log.warn(
          { lag, recoveries: this.#recoveries },
          'consumer stalled with lag: seeking owned partitions to their committed offsets',
        );
        for (const [key, o] of this.#owned) {
          if (this.#fenced.has(key)) continue;
          const i = key.lastIndexOf('/');
          // never committed: offset 0, which auto.offset.reset=earliest maps to the log start
          this.#kafka.seek(
            { topic: key.slice(0, i), partition: Number(key.slice(i + 1)) },
            Math.max(0, o.committed),
          );
        }
        this.#lastDeliveryAt = Date.now();
      } else if (verdict === 'give-up' && !this.#gaveUp) {
        this.#gaveUp = true;
        this.#log.error({ lag }, 'consumer stays stalled after recoveries: reporting not live');
      }
    } catch (err) {
      this.#log.warn({ err: (err as Error).message }, 'watchdog check failed');
    }
  }

  async #waitReplicas(): Promise<void> {
    if (!this.#wait || this.#redis instanceof Cluster) return;
    const acked = Number(await this.#redis.wait(this.#wait.replicas, this.#wait.timeoutMs));
    if (acked < this.#wait.replicas) {
      throw new RedfenceError(
        'RF_REDIS_UNAVAILABLE',
        `WAIT: ${acked} of ${this.#wait.replicas} replicas acknowledged within ${this.#wait.timeoutMs} ms`,
      );
    }
  }

  /** Runs a Redis step until it succeeds; while Redis is unavailable every owned partition is paused. */
  async #redisStep<T>(what: string, fn: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        const started = performance.now();
        const out = await fn();
        this.#metrics?.redisCommand(what, (performance.now() - started) / 1000);
        if (this.#outage) {
          this.#outage = false;
          this.#kafka.resume(this.#ownedPartitions());
          this.#metrics?.redisOutage(false);
          this.#health?.setReady('redis', true);
          this.#log.info({ what }, 'Redis is back: resumed');
        }
        return out;
      } catch (err) {
        if (!RedfenceError.isRetriable(err) || this.#abort.signal.aborted) throw err;
        if (!this.#outage) {
          this.#outage = true;
          this.#kafka.pause(this.#ownedPartitions());
          this.#metrics?.redisOutage(true);
          this.#health?.setReady('redis', false);
          this.#log.warn(
            { what, err: (err as Error).message },
            'Redis unavailable: paused consumption, offsets stay put',
          );
        }
        await delay(backoffMs(attempt, 200, 5000), this.#abort.signal);
      }
    }
  }

  #ownedPartitions(): TopicPartition[] {
    return [...this.#owned.keys()].map((k) => {
      const i = k.lastIndexOf('/');
      return { topic: k.slice(0, i), partition: Number(k.slice(i + 1)) };
    });
  }

  async #onAssign(tps: TopicPartition[]): Promise<void> {
    this.#metrics?.rebalance('assign');
    const committed = await this.#kafka.committed(tps);
    for (const tp of tps) {
      const epoch = await this.#redisStep('acquireEpoch', () =>
        this.fence.acquireEpoch(tp.topic, tp.partition),
      );
      const key = tpKey(tp.topic, tp.partition);
      this.#owned.set(key, { epoch, committed: committed.get(key) ?? -1, delivered: -1, batches: 0 });
      this.#rewound.delete(key);
      this.#fenced.delete(key);
    }
    if (tps.length > 0) await this.#redisStep('WAIT', () => this.#waitReplicas());
    // A partition this instance paused earlier (FENCE, outage) keeps its pause in the client across a
    // revoke and a new assignment: resume what we now own.
    if (tps.length > 0 && !this.#outage) this.#kafka.resume(tps);
    this.#health?.setReady('group', true);
    this.#lastDeliveryAt = Date.now();
    this.#log.info({ partitions: tps.map((t) => t.partition) }, 'partitions assigned');
  }

  async #onRevoke(tps: TopicPartition[], lost: boolean): Promise<void> {
    this.#metrics?.rebalance(lost ? 'lost' : 'revoke');
    // The Kafka steps of every applied batch finish (or fail) before its partition goes.
    await this.#drain();
    for (const tp of tps) {
      this.#owned.delete(tpKey(tp.topic, tp.partition));
      this.#fenced.delete(tpKey(tp.topic, tp.partition));
      this.#metrics?.clearPartition(tp.topic, tp.partition);
    }
    this.#log.info({ partitions: tps.map((t) => t.partition), lost }, 'partitions revoked');
  }

  async #callUser<R>(fn: () => R): Promise<{ ok: true; value: R } | { ok: false; error: unknown }> {
    for (let attempt = 0; ; attempt++) {
      try {
        return { ok: true, value: fn() };
      } catch (error) {
        const retriable = (error as { retriable?: unknown })?.retriable === true;
        if (!retriable || attempt >= this.#userRetries) return { ok: false, error };
        await delay(backoffMs(attempt, 50, 2000), this.#abort.signal);
      }
    }
  }

  async #plan(topic: string, partition: number, records: InRecord[]): Promise<Planned[]> {
    const decode =
      this.#def.decode ?? ((v: Buffer | null) => JSON.parse(v?.toString('utf8') ?? 'null') as unknown);
    const out: Planned[] = [];
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
      } else if (partitionFor(record.key, this.#partitions) !== partition) {
        const expected = partitionFor(record.key, this.#partitions);
        out.push({
          record,
          meta,
          dead: {
            reason: 'wrong-partition',
            error: new Error(
              `key hashes to partition ${expected} of ${this.#partitions}, record is on ${partition}`,
            ),
          },
        });
      } else {
        const d = await this.#callUser(() => decode(record.value, meta));
        out.push(
          d.ok
            ? { record, meta, value: d.value }
            : { record, meta, dead: { reason: 'undecodable', error: d.error } },
        );
      }
    }
    return out;
  }

  async #onBatch(
    topic: string,
    partition: number,
    records: InRecord[],
    highWatermark: string,
  ): Promise<void> {
    this.#batchStartedAt = Date.now();
    this.#lastDeliveryAt = this.#batchStartedAt;
    this.#recoveries = 0;
    const batch = this.#processBatch(topic, partition, records, highWatermark);
    this.#inFlight = batch;
    try {
      await batch;
      this.#health?.markProgress();
    } finally {
      this.#batchStartedAt = undefined;
      this.#inFlight = undefined;
    }
  }

  async #processBatch(
    topic: string,
    partition: number,
    records: InRecord[],
    highWatermark: string,
  ): Promise<void> {
    const key = tpKey(topic, partition);
    const owned = this.#owned.get(key);
    if (!owned || this.#fenced.has(key) || records.length === 0) return; // not ours (anymore): never commit it
    // Closing: take no new batch (never queued, so never committed: the next owner replays it), or
    // close() would go on draining as long as the consumer has a backlog to deliver.
    if (this.#state === 'closing' || this.#state === 'closed') return;
    const first = Number(records[0]?.offset);
    const rewound = this.#rewound.get(key);
    if (rewound !== undefined) {
      // fetched before the seek back took effect: dropped, delivered again from `rewound`
      if (first > rewound) return;
      this.#rewound.delete(key);
    }
    this.#metrics?.batch(records.length);
    // Holes in the partition's offsets (transaction markers, compaction): counted, never an error.
    let holes = 0;
    let prev = (owned.delivered >= 0 ? owned.delivered : owned.committed) - 1;
    for (const r of records) {
      const off = Number(r.offset);
      if (prev >= 0 && off > prev + 1) holes += off - prev - 1;
      prev = off;
    }
    if (holes > 0) this.#metrics?.offsetGap(topic, partition, holes);
    owned.delivered = prev + 1;
    const planned = await this.#plan(topic, partition, records);

    // 1. Redis write: one fence call per key (state + pending outputs, atomically).
    const { results, outputs, deadFromUser } = await this.#applyAll(topic, partition, owned, planned);
    if (results === 'FENCED') {
      this.#fenced.add(key);
      this.#kafka.pause([{ topic, partition }]);
      this.stats.fencedPartitions++;
      this.#metrics?.fenced(topic, partition);
      this.#log.warn(
        { topic, partition, epoch: owned.epoch },
        'FENCE: a newer owner holds this partition; dropped the batch, never committing it',
      );
      return;
    }
    await this.#redisStep('WAIT', () => this.#waitReplicas());
    crashPoint('after-redis-write');

    // 2. Outputs and dead letters, in offset order.
    const out: OutRecord[] = [];
    for (const p of planned) {
      const dead = p.dead ?? deadFromUser.get(p.meta.offset);
      const r = results.get(p.meta.offset);
      if (dead) {
        out.push(this.#deadLetter(p.record, dead.reason, dead.error));
        continue;
      }
      if (r === undefined) continue;
      this.stats.verdicts.set(r.verdict, (this.stats.verdicts.get(r.verdict) ?? 0) + 1);
      this.#metrics?.verdict(topic, partition, r.verdict);
      if (r.verdict === 'REBASE')
        this.#log.warn(
          { topic, partition, previousPartition: r.previousPartition },
          'REBASE: a key moved partitions',
        );
      if (r.verdict === 'REJECT') out.push(this.#deadLetter(p.record, 'rejected', new Error(r.reason)));
      else if (r.verdict === 'REEMIT' && 'deadLetter' in r)
        out.push(this.#deadLetter(p.record, 'rejected', new Error(r.deadLetter)));
      else if (r.verdict === 'APPLY' || r.verdict === 'REBASE' || r.verdict === 'REEMIT') {
        const value =
          r.verdict === 'REEMIT' ? r.output.value : (r.output?.value ?? outputs.get(p.meta.offset));
        if (value !== undefined) out.push(this.#output(p.record, value));
      }
    }

    // 3. Produce, then commit (or both in one transaction) in the next Kafka step: this batch's Redis
    // step above ran while the previous step was producing and committing.
    const rw = this.#rewound.get(key);
    if (rw !== undefined && rw <= first) {
      // A Kafka step failed meanwhile and sought this partition back to or before this batch: it is
      // delivered again (its Redis writes answer REEMIT then); producing it now would commit past the
      // failed records.
      return;
    }
    this.#queued.push({
      topic,
      partition,
      owned,
      out,
      count: records.length,
      first,
      next: owned.delivered,
      highWatermark,
    });
    this.#queuedRecords += records.length;
    this.#kick();
    // Backpressure: past the group-commit limit, wait for the step in flight (the next one then takes
    // the queue, this batch included).
    while (this.#queuedRecords > this.#groupCommitRecords && this.#tail !== undefined) {
      await this.#tail.catch(() => undefined);
    }
  }

  /** Starts a Kafka step for every queued batch unless one is in flight; chains itself. */
  #kick(): void {
    if (this.#kafkaBroken) {
      this.#queued = [];
      this.#queuedRecords = 0;
    }
    if (this.#tail !== undefined || this.#queued.length === 0) return;
    const batches = this.#queued;
    this.#queued = [];
    this.#queuedRecords = 0;
    const step = this.#produceAndCommit(batches).finally(() => {
      if (this.#tail === step) this.#tail = undefined;
      this.#kick();
    });
    step.catch(() => undefined); // observed by backpressure, onRevoke and close()
    this.#tail = step;
  }

  /** Waits until every queued batch has had its Kafka step. */
  async #drain(): Promise<void> {
    for (let tail = this.#tail; tail !== undefined; tail = this.#tail) await tail.catch(() => undefined);
  }

  #seekBack(topic: string, partition: number, offset: number): void {
    this.#rewound.set(tpKey(topic, partition), offset);
    try {
      this.#kafka.seek({ topic, partition }, offset);
    } catch (err) {
      // not assigned anymore: its next owner starts from the committed offset
      this.#log.debug({ topic, partition, err: (err as Error).message }, 'seek back skipped');
    }
  }

  async #produceAndCommit(batches: Queued[]): Promise<void> {
    const out: OutRecord[] = [];
    const next = new Map<string, { topic: string; partition: number; offset: number; first: number }>();
    for (const b of batches) {
      for (const o of b.out) out.push(o);
      const k = tpKey(b.topic, b.partition);
      const n = next.get(k);
      if (n === undefined)
        next.set(k, { topic: b.topic, partition: b.partition, offset: b.next, first: b.first });
      else n.offset = Math.max(n.offset, b.next);
    }
    const offsets = [...next.values()].map(({ topic, partition, offset }) => ({ topic, partition, offset }));
    const started = performance.now();
    try {
      if (this.mode === 'exactly-once') {
        await this.#kafka.produceTransactionally(out, offsets, () => crashPoint('in-transaction'));
      } else {
        await this.#kafka.produce(out, () => crashPoint('after-produce'));
        crashPoint('after-delivery');
        await this.#kafka.commit(offsets);
      }
    } catch (err) {
      const e = err as { fatal?: unknown; code?: unknown; message?: unknown };
      this.#log.warn(
        { partitions: [...next.values()].map((n) => n.partition), err: String(e?.message), code: e?.code },
        'produce/commit failed; the batches are redelivered',
      );
      // Delivered again from their first records (the fence answers REEMIT for what it applied), and
      // so is every batch queued behind them: none of them was produced.
      for (const b of this.#queued) {
        const k = tpKey(b.topic, b.partition);
        const n = next.get(k);
        if (n === undefined)
          next.set(k, { topic: b.topic, partition: b.partition, offset: b.next, first: b.first });
        else n.first = Math.min(n.first, b.first);
      }
      this.#queued = [];
      this.#queuedRecords = 0;
      if (e?.fatal === true || RedfenceError.is(err, 'RF_KAFKA_FATAL')) {
        // no further Kafka step: the processor closes; the partitions' next owner starts from the commits
        this.#kafkaBroken = true;
        this.#fatal(err as Error);
      } else {
        for (const n of next.values()) {
          const rw = this.#rewound.get(tpKey(n.topic, n.partition));
          if (rw === undefined || rw > n.first) this.#seekBack(n.topic, n.partition, n.first);
        }
      }
      throw err;
    }
    crashPoint('after-commit');
    this.#metrics?.commit(this.mode, (performance.now() - started) / 1000);
    for (const b of batches) {
      this.#metrics?.lag(b.topic, b.partition, Math.max(0, Number(b.highWatermark) - b.next));
      b.owned.committed = Math.max(b.owned.committed, b.next);
      this.stats.records += b.count;
      for (const o of b.out) {
        if (o.topic === this.#deadLetterTopic) this.stats.deadLetters++;
        else this.stats.outputs++;
      }
      if (++b.owned.batches % this.#sweepEvery === 0) await this.#sweep(b.topic, b.partition, b.next);
    }
  }

  async #sweep(topic: string, partition: number, committed: number): Promise<void> {
    try {
      for (let more = true; more; ) more = (await this.fence.sweep(topic, partition, committed)).more;
    } catch (err) {
      this.#log.warn(
        { topic, partition, err: (err as Error).message },
        'sweep failed; retried after a later commit',
      );
    }
  }

  /** An output keeps its input record's key and timestamp (event time, as Kafka Streams does). */
  #output(record: InRecord, value: Buffer | string | null): OutRecord {
    const ts = record.timestamp;
    return {
      topic: this.#def.output,
      key: record.key,
      value,
      ...(ts !== undefined && ts !== '' && Number(ts) >= 0 ? { timestamp: ts } : {}),
    };
  }

  #deadLetter(record: InRecord, reason: DeadLetterReason, error: unknown): OutRecord {
    this.#metrics?.deadLetter(reason);
    const dl = buildDeadLetter({
      source: {
        topic: record.topic,
        partition: record.partition,
        offset: record.offset,
        timestamp: record.timestamp,
        key: record.key,
        value: record.value,
        headers: record.headers,
      },
      consumerGroup: this.groupId,
      reason,
      error,
    });
    const headers = dl.headers as Record<string, Buffer | string | Array<Buffer | string>>;
    let size = (dl.key?.length ?? 0) + (dl.value?.length ?? 0);
    for (const [name, v] of Object.entries(headers))
      for (const x of Array.isArray(v) ? v : [v]) size += name.length + Buffer.byteLength(x);
    if (size > MAX_DEAD_LETTER_BYTES && dl.value !== null) {
      // Too large for the dead-letter topic (the broker would refuse it and the partition would be
      // stuck): the value is left out, its size and SHA-256 kept; the original-* headers locate it.
      const original = dl.value;
      return {
        topic: this.#deadLetterTopic,
        key: dl.key,
        value: null,
        headers: {
          ...headers,
          'redfence-value-omitted': String(original.length),
          'redfence-value-sha256': createHash('sha256').update(original).digest('hex'),
        },
      };
    }
    return { topic: this.#deadLetterTopic, key: dl.key, value: dl.value, headers: dl.headers };
  }

  /**
   * Applies every planned record through the fence, grouped by key. Operation processors need no read;
   * reducers read each key's state and write with compare-and-set, retrying a key on CONFLICT.
   */
  async #applyAll(
    topic: string,
    partition: number,
    owned: Owned,
    planned: Planned[],
  ): Promise<{
    results: Map<number, RecordResult> | 'FENCED';
    outputs: Map<number, Buffer | string | null>;
    deadFromUser: Map<number, { reason: DeadLetterReason; error: unknown }>;
  }> {
    const byKey = new Map<string, Planned[]>();
    for (const p of planned) {
      if (p.dead) continue;
      const list = byKey.get(p.meta.key) ?? [];
      if (list.length === 0) byKey.set(p.meta.key, list);
      list.push(p);
    }
    const results = new Map<number, RecordResult>();
    const outputs = new Map<number, Buffer | string | null>();
    const deadFromUser = new Map<number, { reason: DeadLetterReason; error: unknown }>();
    const def = this.#def;
    const base = { topic, partition, epoch: owned.epoch, committedOffset: owned.committed };

    if (def.operation) {
      const operation = def.operation;
      const requests: ApplyRequest[] = [];
      for (const [key, list] of byKey) {
        const recs: FenceRecord[] = [];
        for (const p of list) {
          const op = await this.#callUser(() => operation(p.value, p.meta));
          if (!op.ok) {
            deadFromUser.set(p.meta.offset, { reason: 'processing-error', error: op.error });
            continue;
          }
          recs.push({
            offset: p.meta.offset,
            operation: op.value,
            ...(def.emit === 'none' ? {} : { output: 'state' as const }),
          });
        }
        if (recs.length > 0) requests.push({ ...base, key, records: recs });
      }
      const replies = await this.#redisStep('apply', () => this.fence.applyBatch(requests));
      for (const reply of replies) for (const r of reply) results.set(r.offset, r);
    } else {
      const reduce = def.reduce as NonNullable<typeof def.reduce>;
      let pending = [...byKey];
      for (let round = 0; pending.length > 0; round++) {
        if (round > 5)
          throw new RedfenceError(
            'RF_REDIS_UNAVAILABLE',
            `compare-and-set kept conflicting for ${pending.length} keys`,
          );
        const states = await this.#redisStep('read', () =>
          Promise.all(pending.map(([key]) => this.fence.read(key))),
        );
        const requests: ApplyRequest[] = [];
        for (const [i, [key, list]] of pending.entries()) {
          const stored = states[i] ?? null;
          let current: unknown = stored?.value == null ? null : JSON.parse(stored.value.toString('utf8'));
          let token = stored === null ? null : { partition: stored.partition, offset: stored.offset };
          const recs: FenceRecord[] = [];
          for (const p of list) {
            if (stored !== null && stored.partition === partition && p.meta.offset <= stored.offset) {
              // already applied: the script answers SKIP or REEMIT before looking at the value
              recs.push({
                offset: p.meta.offset,
                operation: { op: 'cas', expected: token, value: '' },
                output: { value: '' },
              });
              continue;
            }
            const red = await this.#callUser(() => reduce(current, p.value, p.meta));
            if (!red.ok) {
              deadFromUser.set(p.meta.offset, { reason: 'processing-error', error: red.error });
              continue;
            }
            const json = JSON.stringify(red.value.state);
            const emit = red.value.emit !== false;
            const output = red.value.output === undefined ? json : red.value.output;
            if (emit) outputs.set(p.meta.offset, output);
            recs.push({
              offset: p.meta.offset,
              operation: { op: 'cas', expected: token, value: json },
              ...(emit ? { output: { value: output } } : {}),
            });
            current = red.value.state;
            token = { partition, offset: p.meta.offset };
          }
          if (recs.length > 0) requests.push({ ...base, key, records: recs });
        }
        const replies = await this.#redisStep('apply', () => this.fence.applyBatch(requests));
        const retry = new Set<string>();
        replies.forEach((reply, i) => {
          for (const r of reply) {
            if (r.verdict === 'CONFLICT') retry.add(String(requests[i]?.key));
            else results.set(r.offset, r);
          }
        });
        pending = pending.filter(([key]) => retry.has(key));
      }
    }
    for (const r of results.values())
      if (r.verdict === 'FENCE') return { results: 'FENCED', outputs, deadFromUser };
    return { results, outputs, deadFromUser };
  }
}
