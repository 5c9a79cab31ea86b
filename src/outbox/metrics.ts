/**
 * Prometheus metrics of the outbox relay on an injected (or private) prom-client registry. Names start
 * with `redfence_outbox_`; no label carries row data (only the role number and the kind of change).
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { MetricsRegistry } from '../metrics/index.js';

export type RoleChange = 'gained' | 'lost' | 'released';

export class OutboxMetrics {
  readonly registry: MetricsRegistry;
  readonly #pending: Gauge;
  readonly #oldest: Gauge;
  readonly #parked: Gauge;
  readonly #published: Counter;
  readonly #parkedTotal: Counter<'reason'>;
  readonly #attempts: Counter;
  readonly #roles: Counter;
  readonly #held: Gauge;
  readonly #batch: Histogram;
  readonly #deleted: Counter;

  constructor(registry?: MetricsRegistry) {
    this.registry = registry ?? new Registry();
    const registers = [this.registry];
    this.#pending = new Gauge({
      name: 'redfence_outbox_pending_rows',
      help: 'Rows committed and not yet published (sampled by the relay)',
      registers,
    });
    this.#oldest = new Gauge({
      name: 'redfence_outbox_oldest_pending_age_seconds',
      help: 'Age of the oldest pending row: the publication lag (0 when none is pending)',
      registers,
    });
    this.#parked = new Gauge({
      name: 'redfence_outbox_parked_rows',
      help: 'Rows parked after their last attempt, waiting for `redfence outbox retry`',
      registers,
    });
    this.#published = new Counter({
      name: 'redfence_outbox_published_total',
      help: 'Rows published by this relay (rate() gives rows per second)',
      registers,
    });
    this.#parkedTotal = new Counter({
      name: 'redfence_outbox_parked_total',
      help: 'Rows this relay parked, by reason class (topic-missing, topic-invalid, too-large, kafka-refused, other)',
      labelNames: ['reason'],
      registers,
    });
    this.#attempts = new Counter({
      name: 'redfence_outbox_failed_attempts_total',
      help: 'Rows that could not be produced (each attempt counts)',
      registers,
    });
    this.#roles = new Counter({
      name: 'redfence_outbox_role_changes_total',
      help: 'Relay roles gained, lost (taken by another relay) or released by this relay',
      labelNames: ['change'],
      registers,
    });
    this.#held = new Gauge({
      name: 'redfence_outbox_roles_held',
      help: 'Relay roles this relay holds',
      registers,
    });
    this.#batch = new Histogram({
      name: 'redfence_outbox_batch_duration_seconds',
      help: 'One batch: read, produce (or transaction), mark',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.#deleted = new Counter({
      name: 'redfence_outbox_retention_deleted_total',
      help: 'Published rows deleted by retention',
      registers,
    });
    for (const c of ['gained', 'lost', 'released']) this.#roles.inc({ change: c }, 0);
  }

  sample(pending: number, oldestAgeSeconds: number, parked: number): void {
    this.#pending.set(pending);
    this.#oldest.set(oldestAgeSeconds);
    this.#parked.set(parked);
  }
  published(n: number): void {
    this.#published.inc(n);
  }
  failed(n: number, parked: number): void {
    this.#attempts.inc(n);
    if (parked > 0) this.#parkedTotal.inc({ reason: 'other' }, parked);
  }
  /** Rows parked for one class of reason (a bounded label, never the reason's text). */
  parked(reason: string, n: number): void {
    this.#parkedTotal.inc({ reason }, n);
  }
  role(change: RoleChange, held: number): void {
    this.#roles.inc({ change });
    this.#held.set(held);
  }
  batch(seconds: number): void {
    this.#batch.observe(seconds);
  }
  deleted(n: number): void {
    this.#deleted.inc(n);
  }
}
