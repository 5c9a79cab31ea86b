/**
 * The invalidation consumer's metrics, labelled by its name on one registry (consumers may share it):
 * `redfence_cache_invalidation_lag_seconds{name}` (now minus the event time of the newest invalidation
 * processed, at scrape time), `redfence_cache_invalidation_deletes_total{name}`,
 * `redfence_cache_invalidation_pipelines_total{name}` and, for pipelines that failed,
 * `redfence_kit_redis_errors_total{component="invalidation",policy="closed"}`.
 */
import { Counter, Gauge } from 'prom-client';
import { KitMetrics } from '../kit/common/metrics.js';
import type { MetricsRegistry } from '../metrics/index.js';

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

export class InvalidationMetrics {
  readonly #name: string;
  readonly #kit: KitMetrics;
  readonly #pipelines: Counter<string>;
  readonly #deletes: Counter<string>;
  #newestEventMs: number | undefined;

  constructor(name: string, registry: MetricsRegistry) {
    this.#name = name;
    this.#kit = new KitMetrics(name, registry);
    this.#pipelines = counter(
      registry,
      'redfence_cache_invalidation_pipelines_total',
      'Redis pipelines of cache invalidations sent.',
    );
    this.#deletes = counter(
      registry,
      'redfence_cache_invalidation_deletes_total',
      'Cache entries invalidated (deleted, generation moved); an entry already missing counts too.',
    );
    let lags = LAGS.get(registry);
    if (lags === undefined) {
      const all = new Map<string, () => number | undefined>();
      lags = all;
      LAGS.set(registry, all);
      gauge(
        registry,
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
    lags.set(name, () => this.#newestEventMs);
  }

  /** One pipeline sent. */
  pipeline(): void {
    this.#pipelines.inc({ name: this.#name });
  }

  /** `n` entries invalidated. */
  deleted(n: number): void {
    this.#deletes.inc({ name: this.#name }, n);
  }

  /** A pipeline that failed (Redis down or past its deadline). */
  redisFailed(): void {
    this.#kit.redisError('invalidation', 'closed');
  }

  /** A batch processed whose newest event time is `ms`. */
  processed(ms: number): void {
    this.#newestEventMs = Math.max(this.#newestEventMs ?? 0, ms);
  }
}
