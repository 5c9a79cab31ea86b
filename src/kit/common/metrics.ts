/**
 * The kit's Prometheus counters, on an injected prom-client registry (default: a private one, never the
 * global). Names start `redfence_kit_`; labels name the component instance and an outcome, never a key,
 * a tenant or a value. Components sharing a registry share the counters (by name).
 */
import { Counter, Histogram, Registry } from 'prom-client';
import type { MetricsRegistry } from '../../metrics/index.js';

const PREFIX = 'redfence_kit_';

export class KitMetrics {
  readonly registry: MetricsRegistry;
  readonly name: string;

  constructor(name: string, registry?: MetricsRegistry) {
    this.name = name;
    this.registry = registry ?? new Registry();
  }

  #counter(metric: string, help: string, labels: readonly string[]): Counter<string> {
    const full = `${PREFIX}${metric}`;
    const existing = this.registry.getSingleMetric(full);
    if (existing instanceof Counter) return existing as Counter<string>;
    return new Counter({ name: full, help, labelNames: ['name', ...labels], registers: [this.registry] });
  }

  /** Adds `n` to counter `redfence_kit_<metric>` for this instance (`labels` other than `name`). */
  inc(metric: string, help: string, labels: Record<string, string> = {}, n = 1): void {
    this.#counter(metric, help, Object.keys(labels)).inc({ name: this.name, ...labels }, n);
  }

  /** Observes seconds on histogram `redfence_kit_<metric>`. */
  observe(metric: string, help: string, seconds: number): void {
    const full = `${PREFIX}${metric}`;
    let h = this.registry.getSingleMetric(full) as Histogram<string> | undefined;
    if (!(h instanceof Histogram)) {
      h = new Histogram({
        name: full,
        help,
        labelNames: ['name'],
        buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10],
        registers: [this.registry],
      });
    }
    h.observe({ name: this.name }, seconds);
  }

  /** A Redis call failed after its retries; `policy` is what the component did (`open`, `closed`). */
  redisError(component: string, policy: 'open' | 'closed'): void {
    this.inc(
      'redis_errors_total',
      'Kit calls whose Redis call failed after retries, by component and by what was done (open: went on without Redis; closed: failed the call).',
      { component, policy },
    );
  }
}
