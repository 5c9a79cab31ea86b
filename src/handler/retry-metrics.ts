/**
 * The retry-topic metrics of a handler, on the registry of its RedfenceMetrics (registered once per
 * registry; a second handler on the same registry shares them):
 *   redfence_handler_retry_attempts_total{topic}          records forwarded to retry topic `topic`
 *   redfence_handler_retry_waiting_records{topic,partition} records held until due (owned partitions)
 *   redfence_handler_retry_oldest_due_seconds{topic,partition} the held head's due time (epoch s, 0: none)
 *   redfence_handler_retry_dropped_total{reason}          records dropped by `dlt: 'on-fatal' | 'none'`
 * Dead letters are counted by redfence_dlq_records_total{reason} as before.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { RedfenceMetrics } from '../metrics/index.js';

export type DropReason = 'fatal' | 'exhausted';

function metric<M>(registry: Registry, name: string, make: () => M): M {
  return (registry.getSingleMetric(name) as M | undefined) ?? make();
}

export class RetryMetrics {
  readonly #attempts: Counter<string>;
  readonly #waiting: Gauge<string>;
  readonly #due: Gauge<string>;
  readonly #dropped: Counter<string>;

  constructor(metrics: RedfenceMetrics) {
    const registry = metrics.registry as Registry;
    const registers = [registry];
    this.#attempts = metric(
      registry,
      'redfence_handler_retry_attempts_total',
      () =>
        new Counter({
          name: 'redfence_handler_retry_attempts_total',
          help: 'Handler records forwarded to a retry topic, by that topic.',
          labelNames: ['topic'],
          registers,
        }),
    );
    this.#waiting = metric(
      registry,
      'redfence_handler_retry_waiting_records',
      () =>
        new Gauge({
          name: 'redfence_handler_retry_waiting_records',
          help: 'Records of an owned retry-topic partition held until their backoff timestamp.',
          labelNames: ['topic', 'partition'],
          registers,
        }),
    );
    this.#due = metric(
      registry,
      'redfence_handler_retry_oldest_due_seconds',
      () =>
        new Gauge({
          name: 'redfence_handler_retry_oldest_due_seconds',
          help: 'Due time (epoch seconds) of the first held record of a retry-topic partition; 0 when none waits.',
          labelNames: ['topic', 'partition'],
          registers,
        }),
    );
    this.#dropped = metric(
      registry,
      'redfence_handler_retry_dropped_total',
      () =>
        new Counter({
          name: 'redfence_handler_retry_dropped_total',
          help: "Handler records dropped instead of dead-lettered (retry.topics.dlt 'on-fatal' or 'none'), by why they failed.",
          labelNames: ['reason'],
          registers,
        }),
    );
  }

  forwarded(topic: string): void {
    this.#attempts.inc({ topic }, 1);
  }

  waiting(topic: string, partition: number, records: number, headDueMs: number): void {
    const labels = { topic, partition: String(partition) };
    this.#waiting.set(labels, records);
    this.#due.set(labels, headDueMs / 1000);
  }

  clear(topic: string, partition: number): void {
    const labels = { topic, partition: String(partition) };
    this.#waiting.remove(labels);
    this.#due.remove(labels);
  }

  dropped(reason: DropReason): void {
    this.#dropped.inc({ reason }, 1);
  }
}
