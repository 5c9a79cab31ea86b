/**
 * (Over 400 lines: the consume, Redis and commit sides of one consumer share its per-partition state.)
 *
 * The cache invalidation consumer, batch by batch on the Kafka port (src/kafka/types.ts), the way the
 * state processor consumes: each partition batch the adapter delivers is read at once (decode, keys,
 * src/invalidation/batch.ts), all its entries go to Redis together (src/kit/invalidation/pipeline.ts:
 * one pipeline per node, multi-entry scripts on a standalone Redis, one slot per script on a Cluster),
 * and once every one answered the partition's done point moves past the batch. A timer commits the
 * done points (`commitIntervalMs`), so nothing is committed before its deletes answered. Up to
 * MAX_BATCHES batches are in flight: the next one is fetched and read while Redis answers the last.
 *
 * A record that names no usable entry (or cannot be decoded) is dead-lettered with the reason, its
 * delivery awaited before the done point may pass it; the others of its batch go on. Redis down (an
 * error, a pipeline past `redisTimeoutMs`): the batch is tried again with backoff (`retry.baseMs`,
 * `retry.maxMs`) until Redis answers; nothing past it is committed meanwhile, and the in-flight bound
 * stops the consume loop. A revocation waits (up to `drainTimeoutMs`) for the partition's batches,
 * then commits its done point (never for a lost assignment); what was not done is abandoned, for the
 * next owner.
 *
 * Its options are src/invalidation/options.ts's, its metrics (on `registry`) src/invalidation/metrics.ts's,
 * its commits src/runtime/committer.ts's, as the handler's.
 *
 * Over 400 lines: the batch flow and the revocation share the partitions' state (done points, batch
 * chains, stop signals); split, each part would need all of it.
 */
import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { deadLetterRecord } from '../dead-letter/record.js';
import type { HandlerRecord } from '../definition/handler.js';
import {
  type CacheKeys,
  cacheKeys,
  defineInvalidation,
  entriesOf,
  type InvalidationDefinition,
  type InvalidationKey,
  keysFromTemplate,
} from '../definition/invalidation.js';
import { RedfenceError } from '../errors/index.js';
import { checkRedisKind } from '../fence/redis-kind.js';
import type { HandlerCounts } from '../handler/handler.js';
import { ConfluentKafka } from '../kafka/confluent.js';
import { checkPermissions, onGroup, onTopic } from '../kafka/permissions.js';
import { ensureTopics } from '../kafka/topics.js';
import { type InRecord, type KafkaPort, type TopicPartition, tpKey } from '../kafka/types.js';
import { InvalidationPipeline } from '../kit/invalidation/pipeline.js';
import type { MetricsRegistry } from '../metrics/index.js';
import { backoffMs, delay } from '../runtime/backoff.js';
import { Committer } from '../runtime/committer.js';
import { adapterSettings } from '../runtime/kafka-options.js';
import { Lifecycle, type RuntimeState } from '../runtime/lifecycle.js';
import { errorShape, type Logger } from '../runtime/logger.js';
import { offsetResetReport } from '../runtime/offset-resets.js';
import { instanceRegistration } from '../runtime/registry.js';
import { type BatchReader, type ReadBatch, readBatch } from './batch.js';
import { InvalidationMetrics } from './metrics.js';
import {
  type InvalidationOptions,
  type ResolvedInvalidationOptions,
  resolveInvalidationOptions,
} from './options.js';

export type { InvalidationOptions } from './options.js';

/** Batches whose Redis step may run at once (over all partitions): the consume loop waits past it. */
const MAX_BATCHES = 16;
/** How long the consume loop waits for a free place before pausing the partitions (rebalances are served meanwhile). */
const FULL_WAIT_MS = 500;

/** One assigned partition. */
interface Part {
  readonly tp: TopicPartition;
  readonly stop: AbortController;
  /** The next offset to commit: every record before it is done (-1: none yet). */
  done: number;
  committed: number;
  /** Its batches, in order: each marks its records done after the one before. */
  tail: Promise<void>;
  /** A batch of it was given up (the partition stopped): nothing after it may be marked done. */
  broken: boolean;
  /** Records of it accepted and not done. */
  pending: number;
}

export type InvalidationState = RuntimeState;

export class InvalidationConsumer {
  readonly name: string;
  readonly registry: MetricsRegistry;
  readonly groupId: string;
  readonly instanceId: string;
  readonly #o: ResolvedInvalidationOptions;
  readonly #kafka: KafkaPort;
  readonly #log: Logger;
  readonly #caches: CacheKeys;
  readonly #reader: BatchReader;
  readonly #pipeline: InvalidationPipeline;
  readonly #redis: Redis | Cluster;
  readonly #metrics: InvalidationMetrics;
  readonly #parts = new Map<string, Part>();
  readonly #running = new Set<Promise<void>>();
  /** Partitions paused because MAX_BATCHES batches were waiting: resumed once one is done. */
  #full: TopicPartition[] = [];
  readonly #life: Lifecycle;
  readonly #counts: HandlerCounts = {
    done: 0,
    deadLettered: 0,
    abandoned: 0,
    forwarded: 0,
    dropped: 0,
    commits: 0,
  };
  #partitions = 0;
  readonly #committer: Committer<Part>;

  constructor(definition: InvalidationDefinition<unknown>, options: InvalidationOptions) {
    const d = defineInvalidation(definition);
    const resolved = resolveInvalidationOptions(d, options);
    const { redis } = resolved;
    this.#o = resolved;
    this.groupId = resolved.groupId;
    this.instanceId = resolved.instanceId ?? randomBytes(4).toString('hex');
    this.#log = resolved.logger;
    this.name = d.name;
    this.registry =
      resolved.registry ??
      (resolved.metrics as { registry?: MetricsRegistry } | undefined)?.registry ??
      new Registry();
    const metrics = new InvalidationMetrics(this.name, this.registry);
    this.#metrics = metrics;
    this.#caches = cacheKeys(d.cache);
    this.#redis = redis;
    this.#pipeline = new InvalidationPipeline(redis, {
      timeoutMs: resolved.redisTimeoutMs,
      maxKeys: resolved.maxKeysPerPipeline,
      stats: { pipeline: () => metrics.pipeline() },
    });
    this.#reader = {
      caches: this.#caches,
      keysOf:
        typeof d.keys === 'string'
          ? keysFromTemplate(d.keys, [...this.#caches.keys()])
          : (d.keys as (r: HandlerRecord<unknown>) => readonly InvalidationKey[]),
      decode: d.decode as BatchReader['decode'],
      eventTime: d.eventTime as BatchReader['eventTime'],
    };
    const k = resolved.kafka;
    this.#kafka =
      'port' in k
        ? k.port
        : new ConfluentKafka({
            ...adapterSettings(k.settings, { clientId: `redfence-${this.instanceId}` }),
            groupId: this.groupId,
            // its metrics are InvalidationMetrics': the check's findings are logged only
            offsetResets: offsetResetReport(this.#log, undefined),
          });
    this.#life = new Lifecycle({
      name: 'invalidation consumer',
      log: this.#log,
      logFields: () => ({ instance: this.instanceId }),
      startUp: () => this.#startUp(),
      quiesce: () => {
        this.#committer.stop();
        this.#o.health?.setReady('kafka', false);
      },
      drain: () => this.#release([...this.#parts.values()], false, this.#o.closeTimeoutMs),
      stop: async () => {
        // destroy(): batches in flight are not committed (the next owner invalidates them again)
        await this.#release([...this.#parts.values()], true, 0);
        await this.#kafka.stop();
      },
      onFatal: resolved.onFatal,
      registration: instanceRegistration(redis, 'invalidation', () => ({
        id: this.instanceId,
        group: this.groupId,
      })),
    });
    this.#committer = new Committer<Part>({
      kafka: this.#kafka,
      log: this.#log,
      pointOf: (p) => p.done,
      live: () => [...this.#parts.values()].filter((p) => !p.stop.signal.aborted),
      onCommitted: () => {
        this.#counts.commits++;
      },
      onFatal: (err) => this.#fatal(err),
    });
  }

  get state(): InvalidationState {
    return this.#life.state;
  }

  /** The input topic's partition count: 0 until start() has read it. */
  get inputPartitions(): number {
    return this.#partitions;
  }

  /**
   * Invalidates entries now, outside the topic (a manual invalidation): the same keys, pipeline and
   * generation move. Rejects RF_KIT_INVALIDATION_KEY for a bad key, RF_REDIS_UNAVAILABLE when Redis
   * did not answer.
   */
  async invalidate(keys: readonly InvalidationKey[]): Promise<void> {
    await this.#send(entriesOf(keys, this.#caches));
  }

  async #send(entries: ReadBatch['entries']): Promise<void> {
    if (entries.length === 0) return;
    try {
      await this.#pipeline.invalidate(entries);
    } catch (err) {
      this.#metrics.redisFailed();
      throw err;
    }
    this.#metrics.deleted(entries.length);
  }

  counts(): HandlerCounts {
    return { ...this.#counts };
  }

  /** Checks the topics, joins the group and starts consuming. Call once. */
  start(): Promise<void> {
    return this.#life.start();
  }

  async #startUp(): Promise<void> {
    const o = this.#o;
    // a replica or a Cluster node behind a single-node client: refused before anything else
    await checkRedisKind(this.#redis);
    const found = await ensureTopics(this.#kafka, {
      input: o.definition.input,
      outputs: [o.deadLetterTopic],
      create: o.createTopics,
    });
    this.#partitions = found.inputPartitions;
    if (found.created.length > 0) this.#log.info({ topics: found.created }, 'created missing topics');
    // before any partition is taken: what the brokers' ACLs refuse (docs/operations.md, "Kafka ACLs")
    await checkPermissions(
      this.#kafka,
      [
        onTopic('Read', o.definition.input, 'the input it consumes'),
        onGroup(this.groupId),
        onTopic('Write', o.deadLetterTopic, 'the dead-letter topic'),
      ],
      this.groupId,
    );
    this.#life.stillStarting();
    this.#committer.start(o.commitIntervalMs, () => o.health?.markProgress());
    await this.#kafka.start([o.definition.input], {
      onAssign: async (tps) => this.#onAssign(tps),
      onRevoke: (tps, lost) => this.#onRevoke(tps, lost),
      onBatch: (topic, partition, records) => this.#onBatch(topic, partition, records),
    });
    for (const part of ['redis', 'scripts', 'kafka'] as const) o.health?.setReady(part, true);
    this.#log.info({ group: this.groupId, instance: this.instanceId }, 'invalidation consumer started');
  }

  #onAssign(tps: TopicPartition[]): void {
    this.#o.metrics?.rebalance('assign');
    for (const tp of tps) {
      this.#parts.get(tpKey(tp.topic, tp.partition))?.stop.abort();
      this.#parts.set(tpKey(tp.topic, tp.partition), {
        tp,
        stop: new AbortController(),
        done: -1,
        committed: -1,
        tail: Promise.resolve(),
        broken: false,
        pending: 0,
      });
    }
    if (tps.length > 0) this.#kafka.resume(tps);
    this.#o.health?.setReady('group', true);
  }

  async #onBatch(topic: string, partition: number, records: InRecord[]): Promise<void> {
    this.#o.health?.markProgress();
    const part = this.#parts.get(tpKey(topic, partition));
    const last = records[records.length - 1];
    if (part === undefined || part.stop.signal.aborted || last === undefined) return;
    if (!this.#life.accepting) {
      part.broken = true; // skipped: nothing after it may be marked done
      return;
    }
    const read = readBatch(this.#reader, records);
    const next = Number(last.offset) + 1;
    part.pending += records.length;
    const step = this.#apply(part, read);
    const run = part.tail
      .then(async () => {
        const ok = await step;
        part.pending = Math.max(0, part.pending - records.length);
        if (!ok || part.broken) {
          part.broken = true;
          return;
        }
        part.done = Math.max(part.done, next);
        const dead = read.bad.length;
        this.#counts.done += records.length - dead;
        this.#counts.deadLettered += dead;
        this.#o.metrics?.handlerRecord(topic, partition, 'done', records.length - dead);
        if (dead > 0) this.#o.metrics?.handlerRecord(topic, partition, 'dead-lettered', dead);
        if (read.newestEventMs !== undefined) this.#metrics.processed(read.newestEventMs);
      })
      .catch((err: unknown) => {
        part.broken = true;
        this.#log.error(
          { ...errorShape(err), topic, partition },
          'invalidation batch failed: partition stopped',
        );
      });
    part.tail = run;
    this.#running.add(run);
    void run.finally(() => {
      this.#running.delete(run);
      if (this.#full.length > 0 && this.#running.size < MAX_BATCHES) {
        const paused = this.#full.filter((tp) => this.#parts.has(tpKey(tp.topic, tp.partition)));
        this.#full = [];
        this.#kafka.resume(paused);
      }
    });
    if (this.#running.size < MAX_BATCHES) return;
    // full: wait a little for a place (the usual case, Redis answering), else pause every partition so
    // that the consume loop serves rebalances while Redis is away
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.race(this.#running),
      new Promise<void>((r) => {
        timer = setTimeout(r, FULL_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
    if (this.#running.size >= MAX_BATCHES && this.#full.length === 0) {
      this.#full = [...this.#parts.values()].filter((p) => !p.stop.signal.aborted).map((p) => p.tp);
      this.#kafka.pause(this.#full);
    }
  }

  /** The batch's deletes (until Redis answers) and dead letters (until Kafka takes them); false if the partition stopped first. */
  async #apply(part: Part, read: ReadBatch): Promise<boolean> {
    const { baseMs, maxMs } = this.#o.retry;
    const signal = part.stop.signal;
    for (let i = 0; read.entries.length > 0; i++) {
      if (signal.aborted) return false;
      try {
        await this.#send(read.entries);
        break;
      } catch (err) {
        if (signal.aborted) return false;
        this.#log.warn(
          { ...errorShape(err), topic: part.tp.topic, partition: part.tp.partition },
          'invalidations not answered: retrying the batch',
        );
        await delay(backoffMs(i, baseMs, maxMs), signal);
      }
    }
    if (read.bad.length === 0) return true;
    const letters = read.bad.map((b) => {
      this.#log.warn(
        {
          ...errorShape(b.error),
          topic: part.tp.topic,
          partition: part.tp.partition,
          offset: b.record.offset,
        },
        'dead-lettering the event',
      );
      return deadLetterRecord(this.#o.deadLetterTopic, this.groupId, b.record, b.reason, b.error);
    });
    for (let i = 0; ; i++) {
      if (signal.aborted) return false;
      try {
        await this.#kafka.produce(letters);
        for (const b of read.bad) this.#o.metrics?.deadLetter(b.reason);
        return true;
      } catch (err) {
        if (RedfenceError.is(err, 'RF_KAFKA_FATAL')) return false;
        this.#log.warn(errorShape(err), 'the dead letters were not produced: retrying');
        await delay(backoffMs(i, 200, 10_000), signal);
      }
    }
  }

  async #onRevoke(tps: TopicPartition[], lost: boolean): Promise<void> {
    this.#o.metrics?.rebalance(lost ? 'lost' : 'revoke');
    const parts = tps
      .map((tp) => this.#parts.get(tpKey(tp.topic, tp.partition)))
      .filter((p): p is Part => p !== undefined);
    await this.#release(parts, lost, this.#o.drainTimeoutMs);
  }

  /** Waits (up to `timeoutMs`) for the partitions' batches, stops them, commits their done points. */
  async #release(parts: Part[], lost: boolean, timeoutMs: number): Promise<void> {
    if (!lost && parts.length > 0) {
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      });
      await Promise.race([Promise.all(parts.map((p) => p.tail)), deadline]);
      clearTimeout(timer);
    }
    for (const p of parts) {
      p.stop.abort();
      if (p.pending > 0) {
        this.#counts.abandoned += p.pending;
        this.#log.warn(
          { topic: p.tp.topic, partition: p.tp.partition, records: p.pending, lost },
          'abandoning unfinished invalidations: they are not committed',
        );
        p.pending = 0;
      }
    }
    if (!lost) await this.#committer.commit(parts);
    for (const p of parts) {
      if (this.#parts.get(tpKey(p.tp.topic, p.tp.partition)) === p)
        this.#parts.delete(tpKey(p.tp.topic, p.tp.partition));
      this.#o.metrics?.clearPartition(p.tp.topic, p.tp.partition);
    }
  }

  #fatal(err: Error): void {
    this.#life.fatal(err);
  }

  /** Drains (up to `closeTimeoutMs`), commits what is done and leaves the group. Every call returns the same promise. */
  close(): Promise<void> {
    return this.#life.close();
  }

  /**
   * Stops at once, without draining: batches in flight are not committed, so the group's next owner
   * invalidates their keys again (deletes are idempotent). Leaves the group. Idempotent; during close()
   * it cuts the drain short. `err`, when given, is logged as the reason.
   */
  destroy(err?: Error): Promise<void> {
    return this.#life.destroy(err);
  }
}

/**
 * An invalidation consumer for `definition` (not started). Options are the handler's (docs/handlers.md:
 * kafka, groupId, retry's backoff, commitIntervalMs, drain/close timeouts, createTopics, logger, metrics,
 * health, onFatal) with `redis` required and `redisTimeoutMs`, `maxKeysPerPipeline`, `registry`; all
 * checked now, before any connection.
 *
 * @example
 * const consumer = createInvalidation(definition, { kafka: { brokers }, redis });
 * await consumer.start();
 */
export function createInvalidation<T>(
  definition: InvalidationDefinition<T>,
  options: InvalidationOptions,
): InvalidationConsumer {
  return new InvalidationConsumer(definition as unknown as InvalidationDefinition<unknown>, options);
}
