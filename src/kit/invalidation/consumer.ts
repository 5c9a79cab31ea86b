/**
 * The cache invalidation consumer: a handler (src/handler/) whose `handle` names a record's cache
 * entries and invalidates them through one pipeline per tick (src/kit/invalidation/pipeline.ts). The
 * handler runtime gives the rest: records of one Kafka key in order, keys concurrently (their deletes
 * share pipelines), offsets committed only up to the lowest record whose deletes have not answered,
 * Redis down retried in place without using up attempts (nothing is committed past it; the bounds
 * pause the partitions), and records naming no usable entry dead-lettered at once with the reason.
 *
 * Metrics (on `registry`): `redfence_cache_invalidation_lag_seconds{name}` (now minus the event time of
 * the newest invalidation processed, at scrape time), `redfence_cache_invalidation_deletes_total{name}`
 * (entries invalidated), `redfence_cache_invalidation_pipelines_total{name}` and, for pipelines that
 * failed, `redfence_kit_redis_errors_total{component="invalidation",policy="closed"}`.
 */
import type { Cluster, Redis } from 'ioredis';
import { Counter, Gauge, Registry } from 'prom-client';
import { defineHandler, type HandlerRecord } from '../../definition/handler.js';
import { RedfenceError } from '../../errors/index.js';
import { createHandler, type Handler, type HandlerCounts } from '../../handler/handler.js';
import type { HandlerOptions } from '../../handler/options.js';
import type { MetricsRegistry } from '../../metrics/index.js';
import { KitMetrics } from '../common/metrics.js';
import { Checker, invalid } from '../common/options.js';
import {
  type CacheKeys,
  cacheKeys,
  defineInvalidation,
  entriesOf,
  type InvalidationDefinition,
  type InvalidationKey,
  keysFromTemplate,
} from './definition.js';
import { InvalidationPipeline } from './pipeline.js';

export interface InvalidationOptions extends Omit<HandlerOptions, 'redis' | 'postgres' | 'onceTtlMs'> {
  /** Where the caches are: an ioredis Redis or Cluster (not closed by the consumer). */
  redis: Redis | Cluster;
  /** Deadline of one pipeline, in ms; past it its records are retried. Default 1000. */
  redisTimeoutMs?: number;
  /** Most entries in one pipeline. Default 1000. */
  maxKeysPerPipeline?: number;
  /** Registry of the invalidation metrics. Default: `metrics.registry`, else a private one. */
  registry?: MetricsRegistry;
}

const OWN = ['redis', 'redisTimeoutMs', 'maxKeysPerPipeline', 'registry'] as const;
const WHERE = 'invalidation consumer';

function gauge(registry: MetricsRegistry, name: string, help: string, collect: () => void): Gauge<string> {
  const found = registry.getSingleMetric(name);
  if (found instanceof Gauge) return found as Gauge<string>;
  return new Gauge({ name, help, labelNames: ['name'], registers: [registry], collect });
}

function counter(registry: MetricsRegistry, name: string, help: string): Counter<string> {
  const found = registry.getSingleMetric(name);
  if (found instanceof Counter) return found as Counter<string>;
  return new Counter({ name, help, labelNames: ['name'], registers: [registry] });
}

/** Event times of consumers sharing a registry's lag gauge: the gauge's collect reads them all. */
const LAGS = new WeakMap<MetricsRegistry, Map<string, () => number | undefined>>();

export class InvalidationConsumer {
  readonly name: string;
  readonly registry: MetricsRegistry;
  readonly handler: Handler;
  readonly #caches: CacheKeys;
  readonly #pipeline: InvalidationPipeline;
  readonly #deletes: Counter<string>;
  readonly #kit: KitMetrics;
  #newestEventMs: number | undefined;

  constructor(definition: InvalidationDefinition<unknown>, options: InvalidationOptions) {
    const d = defineInvalidation(definition);
    const c = new Checker(WHERE);
    if (typeof options !== 'object' || options === null) throw invalid(WHERE, 'options must be an object');
    const o = options as unknown as Record<string, unknown>;
    const redis = c.client<Redis | Cluster>('redis', o.redis, [
      'pipeline',
      'evalsha',
      'evalshaBuffer',
      'evalBuffer',
    ]);
    const timeoutMs = c.integer('redisTimeoutMs', o.redisTimeoutMs, 1, 600_000, 1000);
    const maxKeys = c.integer('maxKeysPerPipeline', o.maxKeysPerPipeline, 1, 100_000, 1000);
    const rest: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(o)) if (!(OWN as readonly string[]).includes(k)) rest[k] = v;
    const handlerOptions = rest as unknown as HandlerOptions;
    this.name = d.name;
    this.registry =
      (o.registry as MetricsRegistry | undefined) ??
      (handlerOptions.metrics as { registry?: MetricsRegistry } | undefined)?.registry ??
      new Registry();
    this.#kit = new KitMetrics(this.name, this.registry);
    this.#caches = cacheKeys(d.cache);
    const pipelines = counter(
      this.registry,
      'redfence_cache_invalidation_pipelines_total',
      'Redis pipelines of cache invalidations sent.',
    );
    this.#deletes = counter(
      this.registry,
      'redfence_cache_invalidation_deletes_total',
      'Cache entries invalidated (deleted, generation moved); an entry already missing counts too.',
    );
    this.#lagGauge();
    this.#pipeline = new InvalidationPipeline(redis, {
      timeoutMs,
      maxKeys,
      stats: { pipeline: () => pipelines.inc({ name: this.name }) },
    });
    const keysOf =
      typeof d.keys === 'string'
        ? keysFromTemplate(d.keys, [...this.#caches.keys()])
        : (d.keys as (r: HandlerRecord<unknown>) => readonly InvalidationKey[]);
    const eventTime = d.eventTime;
    this.handler = createHandler(
      defineHandler<unknown>({
        input: d.input.topic,
        name: d.name,
        ...(d.input.deadLetter === undefined ? {} : { deadLetter: d.input.deadLetter }),
        ...(d.decode === undefined ? {} : { decode: d.decode }),
        handle: async (record) => {
          let keys: readonly InvalidationKey[];
          try {
            keys = keysOf(record);
          } catch (err) {
            if (RedfenceError.is(err, 'RF_KIT_INVALIDATION_KEY')) throw err;
            throw new RedfenceError('RF_KIT_INVALIDATION_KEY', 'keys() threw on the event', { cause: err });
          }
          await this.#invalidate(keys);
          const t = eventTime ? eventTime(record) : Number(record.timestamp);
          if (typeof t === 'number' && Number.isFinite(t) && t >= 0)
            this.#newestEventMs = Math.max(this.#newestEventMs ?? 0, t);
        },
      }),
      { concurrency: 5000, maxInFlight: 50_000, maxInFlightPerPartition: 10_000, ...handlerOptions },
    );
  }

  #lagGauge(): void {
    let lags = LAGS.get(this.registry);
    if (lags === undefined) {
      const all = new Map<string, () => number | undefined>();
      lags = all;
      LAGS.set(this.registry, all);
      gauge(
        this.registry,
        'redfence_cache_invalidation_lag_seconds',
        'Now minus the event time of the newest invalidation processed, in seconds.',
        function (this: Gauge<string>) {
          for (const [name, newest] of all) {
            const t = newest();
            if (t !== undefined) this.set({ name }, Math.max(0, (Date.now() - t) / 1000));
          }
        },
      );
    }
    lags.set(this.name, () => this.#newestEventMs);
  }

  async #invalidate(keys: readonly InvalidationKey[]): Promise<void> {
    const entries = entriesOf(keys, this.#caches);
    if (entries.length === 0) return;
    try {
      await this.#pipeline.invalidate(entries);
    } catch (err) {
      this.#kit.redisError('invalidation', 'closed');
      throw err;
    }
    this.#deletes.inc({ name: this.name }, entries.length);
  }

  /**
   * Invalidates entries now, outside the topic (a manual invalidation): the same keys, pipeline and
   * generation move. Rejects RF_KIT_INVALIDATION_KEY for a bad key, RF_REDIS_UNAVAILABLE when Redis
   * did not answer.
   */
  invalidate(keys: readonly InvalidationKey[]): Promise<void> {
    return this.#invalidate(keys);
  }

  /** Checks the topics, joins the group and starts consuming. */
  start(): Promise<void> {
    return this.handler.start();
  }

  /** Drains, commits what is done and leaves the group. */
  close(): Promise<void> {
    return this.handler.close();
  }

  counts(): HandlerCounts {
    return this.handler.counts();
  }
}

/**
 * An invalidation consumer for `definition` (not started). Options are the handler's (docs/handlers.md)
 * with `redis` required, `concurrency` defaulting to 1000 (their deletes share pipelines), and
 * `redisTimeoutMs`, `maxKeysPerPipeline`, `registry`; all checked now, before any connection.
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
