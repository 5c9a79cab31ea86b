/**
 * The metric families {@link RedfenceMetrics} (metrics.ts) registers: each one's name, help, own labels
 * and buckets, in registration order (the order of the exposition). metrics.ts holds the typed methods
 * that feed them and the option checks.
 */
import {
  Counter,
  Gauge,
  Histogram,
  type OpenMetricsContentType,
  type PrometheusContentType,
  type Registry,
} from 'prom-client';
import type { LagBoard } from './lag-board.js';

/** A prom-client registry of either exposition format. */
export type MetricsRegistry = Registry<PrometheusContentType> | Registry<OpenMetricsContentType>;

/** Seconds; 0.1 ms to 1 s. */
const REDIS_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];
/** Records per batch; 1 to 10000. */
const BATCH_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000];
/** Seconds; 1 ms to 10 s (a transactional commit is far slower than a Redis call). */
const COMMIT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Metric names without the prefix, in the order {@link registerFamilies} registers them. */
export const NAMES = [
  'verdicts_total',
  'redis_command_duration_seconds',
  'batch_records',
  'commit_duration_seconds',
  'consumer_lag_records',
  'consumer_lag_seconds',
  'rebalances_total',
  'dlq_records_total',
  'offset_gaps_total',
  'input_offset_resets_total',
  'input_records_skipped_total',
  'redis_outage',
  'fenced_partitions_total',
  'handler_in_flight_records',
  'handler_records_total',
  'handler_retries_total',
  'topology_records_in_total',
  'topology_records_out_total',
  'topology_late_records_total',
  'topology_dropped_records_total',
  'topology_repartition_lag_records',
  'owner_cache_reads_total',
  'topology_ticks_total',
] as const;

/** The node reading a topology's repartition topic (the repartition lag's labels). */
export interface RepartitionNode {
  readonly application: string;
  readonly node: string;
}

/** The registered families the methods feed (consumer_lag_seconds is read from the lag board at scrape time). */
export type Families = ReturnType<typeof registerFamilies>;

/**
 * Registers every family on `registry` with `prefix` and the constant `labels` (added after each
 * family's own labels). The caller has checked that none of {@link NAMES} is registered there yet.
 */
export function registerFamilies(
  prefix: string,
  labels: Record<string, string>,
  registry: MetricsRegistry,
  board: LagBoard,
  repartitionNodes: ReadonlyMap<string, RepartitionNode>,
) {
  const registers = [registry];
  const labelNames = (own: string[]): string[] => [...own, ...Object.keys(labels)];
  const counter = (name: (typeof NAMES)[number], help: string, own: string[]) =>
    new Counter({ name: prefix + name, help, labelNames: labelNames(own), registers });
  const gauge = (name: (typeof NAMES)[number], help: string, own: string[]) =>
    new Gauge({ name: prefix + name, help, labelNames: labelNames(own), registers });
  const histogram = (name: (typeof NAMES)[number], help: string, own: string[], buckets: number[]) =>
    new Histogram({ name: prefix + name, help, labelNames: labelNames(own), buckets, registers });
  const timeLabels = (topic: string, partition: number) => ({
    ...labels,
    topic,
    partition: String(partition),
  });
  // property order is registration order
  return {
    verdicts: counter('verdicts_total', 'Records processed, by fence verdict.', [
      'topic',
      'partition',
      'verdict',
    ]),
    redisCommands: histogram(
      'redis_command_duration_seconds',
      'Duration of Redis commands and fence scripts, in seconds.',
      ['command'],
      REDIS_BUCKETS,
    ),
    batches: histogram('batch_records', 'Records per processed batch.', [], BATCH_BUCKETS),
    commits: histogram(
      'commit_duration_seconds',
      'Duration of offset commits, in seconds, by commit mode.',
      ['mode'],
      COMMIT_BUCKETS,
    ),
    lag: gauge(
      'consumer_lag_records',
      'Records between the last processed offset and the high watermark of an owned partition.',
      ['topic', 'partition'],
    ),
    lagSeconds: new Gauge({
      name: `${prefix}consumer_lag_seconds`,
      help: 'Age of the last committed record of an owned partition while it has lag (0 without lag).',
      labelNames: labelNames(['topic', 'partition']),
      registers,
      collect() {
        this.reset();
        for (const p of board.report().partitions)
          if (p.timeLagSeconds !== null) this.set(timeLabels(p.topic, p.partition), p.timeLagSeconds);
      },
    }),
    rebalances: counter('rebalances_total', 'Consumer-group rebalance events, by kind.', ['kind']),
    deadLetters: counter('dlq_records_total', 'Records sent to the dead-letter topic, by reason.', [
      'reason',
    ]),
    offsetGaps: counter(
      'offset_gaps_total',
      'Offsets skipped within a partition (holes from compaction or transaction markers).',
      ['topic', 'partition'],
    ),
    offsetResets: counter(
      'input_offset_resets_total',
      'Assigned partitions whose committed offset the log no longer held, by reason (retention: below the log start; beyond_end: above the log end, a topic made again).',
      ['topic', 'partition', 'reason'],
    ),
    recordsSkipped: counter(
      'input_records_skipped_total',
      'Input records deleted before the group processed them (between its committed offset and the log start), by reason.',
      ['topic', 'partition', 'reason'],
    ),
    redisOutage: gauge('redis_outage', '1 while Redis is unreachable, else 0.', []),
    fenced: counter(
      'fenced_partitions_total',
      'Times a partition was fenced off (a newer owner epoch took it over).',
      ['topic', 'partition'],
    ),
    handlerInFlight: gauge(
      'handler_in_flight_records',
      'Handler records accepted and not finished (running, queued behind their key, or waiting for a retry), per owned partition.',
      ['topic', 'partition'],
    ),
    handlerRecords: counter(
      'handler_records_total',
      'Handler records finished, by outcome (done, dead-lettered, abandoned on revocation or close).',
      ['topic', 'partition', 'outcome'],
    ),
    handlerRetries: counter(
      'handler_retries_total',
      'Handler attempts that failed with a retriable error and were tried again.',
      ['topic', 'partition'],
    ),
    topologyIn: counter(
      'topology_records_in_total',
      'Records that reached a topology node, in committed batches.',
      ['application_id', 'topology_node'],
    ),
    topologyOut: counter(
      'topology_records_out_total',
      "Records a topology node forwarded (passed, mapped, an aggregation's updates or final results, a sink's writes), in committed batches.",
      ['application_id', 'topology_node'],
    ),
    topologyLate: counter(
      'topology_late_records_total',
      "Records too late for a windowed aggregation (its windows closed past their grace): dead-lettered, or dropped with onLate('drop'), in committed batches.",
      ['application_id', 'topology_node'],
    ),
    topologyDropped: counter(
      'topology_dropped_records_total',
      "Records a topology node dropped, by reason (null-key, null-value, late with onLate('drop')), in committed batches.",
      ['application_id', 'topology_node', 'reason'],
    ),
    ownerCache: counter(
      'owner_cache_reads_total',
      'Keys a batch folded from owner-local state (result="hit") or read from Redis first (result="miss"): a reducer processor\'s keys (store: its store) and a topology\'s reduce and aggregate keys (store: its application id).',
      ['store', 'result'],
    ),
    topologyTicks: counter(
      'topology_ticks_total',
      'Ticks of the wall-clock close of idle partitions (idleCloseMs): produced by this instance (event="produced"), and read in committed batches (event="consumed").',
      ['application_id', 'event'],
    ),
    topologyRepartitionLag: new Gauge({
      name: `${prefix}topology_repartition_lag_records`,
      help: "Records between the committed offset and the high watermark of a repartition topic's owned partitions, summed per reading node.",
      labelNames: labelNames(['application_id', 'topology_node']),
      registers,
      collect() {
        this.reset();
        if (repartitionNodes.size === 0) return;
        const sums = new Map<RepartitionNode, number>();
        for (const p of board.report().partitions) {
          const reader = repartitionNodes.get(p.topic);
          if (reader !== undefined && p.lag !== null) sums.set(reader, (sums.get(reader) ?? 0) + p.lag);
        }
        for (const [r, lag] of sums)
          this.set({ application_id: r.application, topology_node: r.node, ...labels }, lag);
      },
    }),
  };
}
