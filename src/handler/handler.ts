/**
 * The handler runtime: a consumer whose work is a side effect. The poll loop only queues records
 * (src/handler/scheduler.ts); `handle` runs off it, concurrently across keys and in order within a
 * key, so a 30 s call never costs the group membership. Offsets are committed per partition, every
 * `commitIntervalMs`, only up to the lowest unfinished record (src/handler/tracker.ts).
 *
 * Revocation (not lost) and close() follow one rule: nothing more of the partition starts; records
 * queued behind their key or waiting for a retry are abandoned at once; `handle` calls running get
 * `drainTimeoutMs` (close: `closeTimeoutMs`) to finish; then the rest is abandoned (ctx.signal aborts
 * with RF_HANDLER_ABANDONED, their outcome is ignored) and the partition is committed up to its lowest
 * unfinished record, never past it. A lost assignment or a fenced partition is abandoned at once and
 * never committed. Abandoned records come again to the next owner: idempotency (ctx.once,
 * ctx.transaction) makes that safe.
 *
 * With `retry.topics` the handler also consumes the input's retry topics: their partitions hold
 * records until due (src/handler/retry-partitions.ts), and the runner forwards failures along the chain.
 *
 * Lifecycle `idle -> starting -> running -> closing -> closed`, as the processor's: start() once,
 * close() memoised. Commits: src/runtime/committer.ts. (A little over 400 lines: the lifecycle and the
 * rebalance rule share the partition table and are kept together.)
 */

import { randomBytes } from 'node:crypto';
import type { HandlerDefinition } from '../definition/handler.js';
import { RedfenceError } from '../errors/index.js';
import { Fence } from '../fence/index.js';
import { checkRedisKind } from '../fence/redis-kind.js';
import { ConfluentKafka } from '../kafka/confluent.js';
import { checkPermissions, onGroup, onTopic } from '../kafka/permissions.js';
import { ensureTopics } from '../kafka/topics.js';
import type { InRecord, KafkaPort, TopicPartition } from '../kafka/types.js';
import { KeySpace } from '../keys/index.js';
import { retryTopicNames } from '../retry/retry-topics.js';
import { backoffMs, delay } from '../runtime/backoff.js';
import { Committer } from '../runtime/committer.js';
import { adapterSettings } from '../runtime/kafka-options.js';
import { Lifecycle, type RuntimeState } from '../runtime/lifecycle.js';
import { errorShape, type Logger } from '../runtime/logger.js';
import { offsetResetReport } from '../runtime/offset-resets.js';
import { instanceRegistration } from '../runtime/registry.js';
import { Tracing } from '../telemetry/tracing.js';
import { holdRecord } from './hold.js';
import { KeyOrderStore } from './key-order.js';
import { OnceStore } from './once.js';
import { type HandlerOptions, type ResolvedHandlerOptions, resolveHandlerOptions } from './options.js';
import { SqlOnce } from './postgres.js';
import { RetryMetrics } from './retry-metrics.js';
import { RetryPartitions } from './retry-partitions.js';
import { type RunnerContext, runRecord } from './runner.js';
import { type Outcome, type PartitionWork, Scheduler } from './scheduler.js';

export type HandlerState = RuntimeState;

/** What a handler has done since it started. */
export interface HandlerCounts {
  done: number;
  deadLettered: number;
  abandoned: number;
  /** Produced to a retry topic (retry.topics), or parked there behind a blocked key. */
  forwarded: number;
  /** Given up without a dead letter (retry.topics.dlt 'on-fatal' or 'none'). */
  dropped: number;
  commits: number;
}

function kafkaPort(o: ResolvedHandlerOptions, instanceId: string): KafkaPort {
  if ('port' in o.kafka) return o.kafka.port;
  return new ConfluentKafka({
    ...adapterSettings(o.kafka.settings, { clientId: `redfence-${instanceId}` }),
    groupId: o.groupId,
    offsetResets: offsetResetReport(o.logger, o.metrics),
  });
}

function abandoned(tp: TopicPartition, why: string): RedfenceError {
  return new RedfenceError('RF_HANDLER_ABANDONED', `${tp.topic}/${tp.partition}: ${why}`, {
    details: { topic: tp.topic, partition: tp.partition },
  });
}

/**
 * @example
 * const handler = createHandler(definition, { kafka: { brokers: ['127.0.0.1:9092'] }, redis });
 * await handler.start();
 * process.on('SIGTERM', () => handler.close());
 */
export class Handler {
  readonly groupId: string;
  readonly instanceId: string;
  readonly #o: ResolvedHandlerOptions;
  readonly #kafka: KafkaPort;
  readonly #log: Logger;
  readonly #scheduler: Scheduler;
  readonly #fence: Fence | undefined;
  readonly #tracing: Tracing;
  readonly #life: Lifecycle;
  readonly #counts: HandlerCounts = {
    done: 0,
    deadLettered: 0,
    abandoned: 0,
    forwarded: 0,
    dropped: 0,
    commits: 0,
  };
  /** The input's retry topics (retry.topics), empty without. */
  readonly #retryTopics: string[];
  readonly #retry: RetryPartitions;
  #partitions = 0;
  readonly #committer: Committer<PartitionWork>;

  constructor(definition: HandlerDefinition<never> | HandlerDefinition<unknown>, options: HandlerOptions) {
    const o = resolveHandlerOptions(definition as HandlerDefinition<unknown>, options);
    this.#o = o;
    this.groupId = o.groupId;
    this.instanceId = o.instanceId ?? randomBytes(4).toString('hex');
    this.#log = o.logger;
    this.#kafka = kafkaPort(o, this.instanceId);
    this.#life = new Lifecycle({
      name: 'handler',
      log: o.logger,
      logFields: () => ({ instance: this.instanceId }),
      startUp: () => this.#startUp(),
      quiesce: () => {
        this.#committer.stop();
        this.#o.health?.setReady('kafka', false);
      },
      drain: () => this.#release(this.#scheduler.all(), false, this.#o.closeTimeoutMs, 'closing'),
      stop: async () => {
        // destroy(): every record still running or waiting is abandoned, nothing more is committed
        await this.#release(this.#scheduler.all(), true, 0, 'destroyed');
        await this.#kafka.stop();
      },
      onFatal: o.onFatal,
      registration: instanceRegistration(o.redis, 'handler', () => ({
        id: this.instanceId,
        group: this.groupId,
        module: o.definition.name,
      })),
    });
    this.#committer = new Committer<PartitionWork>({
      kafka: this.#kafka,
      log: this.#log,
      pointOf: (p) => p.tracker.commitPoint(),
      live: () => this.#scheduler.all().filter((p) => !p.stopped),
      onCommitted: () => {
        this.#counts.commits++;
      },
      onFatal: (err) => this.#fatal(err),
    });
    const name = o.definition.name;
    this.#fence =
      o.redis && new Fence({ redis: o.redis, store: name, mode: o.cluster ? 'cluster' : 'strict' });
    this.#tracing = new Tracing(o.tracing, { groupId: o.groupId });
    const topics = o.retry.topics;
    this.#retryTopics = topics ? retryTopicNames(o.definition.input, topics) : [];
    // with Redis, retry-topic partitions get an epoch in the input partition's slot (ctx.once, keyOrder)
    const retryStore =
      topics && o.redis
        ? new KeyOrderStore(o.redis, new KeySpace({ store: name }), o.definition.input, o.onceTtlMs)
        : undefined;
    const keyOrder = topics?.keyOrder ? retryStore : undefined;
    const retryMetrics = topics && o.metrics ? new RetryMetrics(o.metrics) : undefined;
    const runner: RunnerContext = {
      definition: o.definition,
      rules: o.definition.classify ?? {},
      retry: o.retry,
      groupId: o.groupId,
      deadLetterTopic: o.deadLetterTopic,
      kafka: this.#kafka,
      once: o.redis && new OnceStore(o.redis, new KeySpace({ store: name }), o.onceTtlMs),
      sql: o.postgres && new SqlOnce(o.postgres.pool, o.postgres.table),
      log: this.#log,
      metrics: o.metrics,
      fenced: (part) => this.#fenced(part),
      fatal: (err) => this.#fatal(err),
      tracing: this.#tracing,
      hold: (part, ms) => holdRecord(this.#scheduler, part, ms),
      input: o.definition.input,
      topics,
      keyOrder,
      retryMetrics,
    };
    this.#scheduler = new Scheduler({
      concurrency: o.concurrency,
      maxInFlight: o.maxInFlight,
      maxInFlightPerPartition: o.maxInFlightPerPartition,
      maxPerKey: o.maxPerKey,
      kafka: this.#kafka,
      run: (part, record) => runRecord(runner, part, record),
      finished: (part, outcome) => this.#finished(part, outcome),
    });
    this.#retry = new RetryPartitions({
      topics: this.#retryTopics,
      kafka: this.#kafka,
      epochs: retryStore,
      metrics: retryMetrics,
      log: this.#log,
      holdLimit: o.maxInFlightPerPartition,
      signal: this.#life.signal,
      accept: (part, records) => this.#accept(part, records),
    });
  }

  get state(): HandlerState {
    return this.#life.state;
  }

  /** The partitions this instance works on now. */
  get assignment(): TopicPartition[] {
    return this.#scheduler
      .all()
      .filter((p) => !p.stopped)
      .map((p) => p.tp);
  }

  /** handle() calls running now, and records accepted but not finished. */
  get inFlight(): { running: number; records: number } {
    return { running: this.#scheduler.running, records: this.#scheduler.inFlight };
  }

  /** The input topic's partition count: 0 until start() has read it. */
  get inputPartitions(): number {
    return this.#partitions;
  }

  counts(): HandlerCounts {
    return { ...this.#counts };
  }

  /** Checks the topics, connects to Kafka, joins the group and starts handling. Call once. */
  start(): Promise<void> {
    return this.#life.start();
  }

  /** Drains (see the file comment), commits, leaves the group. Every call returns the same promise. */
  close(): Promise<void> {
    return this.#life.close();
  }

  /**
   * Stops at once, without draining: records running or waiting are abandoned (their signal aborts)
   * and nothing more is committed, so the group's next owner handles them again. Leaves the group.
   * Idempotent; during close() it cuts the drain short. `err`, when given, is logged as the reason.
   */
  destroy(err?: Error): Promise<void> {
    return this.#life.destroy(err);
  }

  async #startUp(): Promise<void> {
    const o = this.#o;
    await this.#tracing.load(); // tracing on: the API is imported here, before any connection
    // a replica or a Cluster node behind a single-node client (ctx.once writes): refused first
    if (o.redis !== undefined) await checkRedisKind(o.redis);
    const found = await ensureTopics(this.#kafka, {
      input: o.definition.input,
      outputs: [o.deadLetterTopic, ...this.#retryTopics],
      create: o.createTopics,
    });
    this.#partitions = found.inputPartitions;
    if (found.created.length > 0) this.#log.info({ topics: found.created }, 'created missing topics');
    const uneven = found.mismatched.filter((m) => this.#retryTopics.includes(m.topic));
    if (uneven.length > 0)
      throw new RedfenceError(
        'RF_RETRY_TOPIC_PARTITIONS',
        `retry topic ${uneven[0]?.topic} has ${uneven[0]?.partitions} partitions, the input ${found.inputPartitions}: a retried record goes to the same partition number`,
        { details: { topics: uneven } },
      );
    // before any partition is taken: what the brokers' ACLs refuse (docs/operations.md, "Kafka ACLs")
    await checkPermissions(
      this.#kafka,
      [
        onTopic('Read', o.definition.input, 'the input it consumes'),
        onGroup(this.groupId),
        onTopic('Write', o.deadLetterTopic, 'the dead-letter topic'),
        ...this.#retryTopics.flatMap((t) => [
          onTopic('Write', t, 'a retry topic it forwards to'),
          onTopic('Read', t, 'a retry topic it consumes'),
        ]),
      ],
      this.groupId,
    );
    this.#life.stillStarting();
    this.#committer.start(o.commitIntervalMs, () => o.health?.markProgress());
    await this.#kafka.start([o.definition.input, ...this.#retryTopics], {
      onAssign: (tps) => this.#onAssign(tps),
      onRevoke: (tps, lost) => this.#onRevoke(tps, lost),
      onBatch: async (topic, partition, records) => this.#onBatch(topic, partition, records),
      onFatal: (err) => this.#fatal(err),
    });
    // no Redis scripts to load: ready once Kafka is (ctx.once loads its scripts on first use)
    for (const part of ['redis', 'scripts', 'kafka'] as const) o.health?.setReady(part, true);
    this.#log.info({ group: this.groupId, instance: this.instanceId }, 'handler started');
  }

  #onBatch(topic: string, partition: number, records: InRecord[]): void {
    this.#o.health?.markProgress();
    if (!this.#life.accepting) return;
    const part = this.#scheduler.get(topic, partition);
    if (part === undefined || part.stopped) return;
    if (!this.#retry.offer(part, records)) this.#accept(part, records);
  }

  #accept(part: PartitionWork, records: InRecord[]): void {
    this.#scheduler.accept(part, records);
    this.#o.metrics?.handlerInFlight(part.tp.topic, part.tp.partition, part.tracker.inFlight);
  }

  async #onAssign(tps: TopicPartition[]): Promise<void> {
    this.#o.metrics?.rebalance('assign');
    for (const tp of tps) {
      const old = this.#scheduler.get(tp.topic, tp.partition);
      if (old) this.#scheduler.remove(old);
      const part = this.#scheduler.add(tp, await this.#acquireEpoch(tp));
      if (this.#retry.isRetryTopic(tp.topic)) await this.#retry.add(part);
    }
    // a partition paused before a revocation keeps its pause in the client: resume what we own now
    if (tps.length > 0) this.#kafka.resume(tps);
    this.#o.health?.setReady('group', true);
    this.#log.info({ partitions: tps.map((t) => t.partition) }, 'partitions assigned');
  }

  /** Raises the partition's epoch in Redis (ctx.once is fenced by it); retried while Redis is down. */
  async #acquireEpoch(tp: TopicPartition): Promise<number> {
    const fence = this.#fence;
    if (fence === undefined) return 0;
    for (let i = 0; ; i++) {
      try {
        return await fence.acquireEpoch(tp.topic, tp.partition);
      } catch (err) {
        if (this.#life.signal.aborted) return 0;
        this.#log.warn(
          { ...errorShape(err), topic: tp.topic, partition: tp.partition },
          'epoch not raised: retrying',
        );
        await delay(backoffMs(i, 100, 5000), this.#life.signal);
      }
    }
  }

  async #onRevoke(tps: TopicPartition[], lost: boolean): Promise<void> {
    this.#o.metrics?.rebalance(lost ? 'lost' : 'revoke');
    const parts = tps
      .map((tp) => this.#scheduler.get(tp.topic, tp.partition))
      .filter((p): p is PartitionWork => p !== undefined);
    await this.#release(parts, lost, this.#o.drainTimeoutMs, 'revoked');
    if (parts.length > 0)
      this.#log.info({ partitions: parts.map((p) => p.tp.partition), lost }, 'partitions revoked');
  }

  /** The drain/abandon rule (file comment) for some partitions, then their last commit. */
  async #release(parts: PartitionWork[], lost: boolean, timeoutMs: number, why: string): Promise<void> {
    for (const p of parts) {
      this.#scheduler.stop(p, abandoned(p.tp, why));
      this.#retry.drop(p);
    }
    if (!lost && parts.length > 0) {
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      });
      await Promise.race([Promise.all(parts.map((p) => p.idle())), deadline]);
      clearTimeout(timer);
    }
    for (const p of parts) {
      const left = p.tracker.inFlight;
      // counted once (a revocation during close() releases a partition a second time)
      if (left > 0 && !p.abandon.signal.aborted) {
        this.#counts.abandoned += left;
        this.#o.metrics?.handlerRecord(p.tp.topic, p.tp.partition, 'abandoned', left);
        this.#log.warn(
          { topic: p.tp.topic, partition: p.tp.partition, records: left, running: p.running, lost },
          'abandoning unfinished records: they are not committed',
        );
      }
      if (!p.abandon.signal.aborted) p.abandon.abort(abandoned(p.tp, why));
    }
    if (!lost) await this.#committer.commit(parts.filter((p) => !p.fenced));
    for (const p of parts) {
      this.#scheduler.remove(p);
      this.#o.metrics?.clearPartition(p.tp.topic, p.tp.partition);
    }
  }

  #finished(part: PartitionWork, outcome: Outcome): void {
    if (outcome === 'done') this.#counts.done++;
    else if (outcome === 'dead-lettered') this.#counts.deadLettered++;
    else if (outcome === 'forwarded') this.#counts.forwarded++;
    else if (outcome === 'dropped') this.#counts.dropped++;
    const m = this.#o.metrics;
    if (m) {
      if (outcome === 'done' || outcome === 'dead-lettered' || outcome === 'abandoned')
        m.handlerRecord(part.tp.topic, part.tp.partition, outcome);
      m.handlerInFlight(part.tp.topic, part.tp.partition, part.tracker.inFlight);
    }
  }

  #fenced(part: PartitionWork): void {
    if (part.fenced) return;
    part.fenced = true;
    const err = new RedfenceError(
      'RF_HANDLER_FENCED',
      `${part.tp.topic}/${part.tp.partition} has a newer owner`,
    );
    this.#scheduler.stop(part, err);
    this.#retry.drop(part);
    part.abandon.abort(err);
    this.#kafka.pause([part.tp]);
    this.#o.metrics?.fenced(part.tp.topic, part.tp.partition);
  }

  #fatal(err: Error): void {
    this.#life.fatal(err);
  }
}

/** A handler for `definition` (not started: call start()). Options are checked now, before any connection. */
export function createHandler<T>(definition: HandlerDefinition<T>, options: HandlerOptions): Handler {
  return new Handler(definition as unknown as HandlerDefinition<unknown>, options);
}
