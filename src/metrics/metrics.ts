/**
 * (Just over 400 lines: one typed method per metric, with its checks, on one registry; split by
 * metric they would repeat the registry and label plumbing.)
 *
 * Prometheus metrics of the redfence runtime, kept in an injected (or private) prom-client registry.
 * The runtime calls the typed methods below; it never touches prom-client objects directly.
 */
import {
  Counter,
  Gauge,
  Histogram,
  type OpenMetricsContentType,
  type PrometheusContentType,
  Registry,
} from 'prom-client';
import { RedfenceError } from '../errors/index.js';
import { LagBoard, type PartitionProgress } from './lag-board.js';

/** A prom-client registry of either exposition format. */
export type MetricsRegistry = Registry<PrometheusContentType> | Registry<OpenMetricsContentType>;

/** How offsets are committed. */
export type CommitMode = 'at-least-once' | 'exactly-once';

/** A consumer-group rebalance event. */
export type RebalanceKind = 'assign' | 'revoke' | 'lost';

/** Options for {@link RedfenceMetrics}. */
export interface RedfenceMetricsOptions {
  /**
   * Registry to register the metrics in. Default: a new private registry (never prom-client's
   * global one). One registry holds one set of redfence metrics per prefix; see {@link RedfenceMetrics}.
   */
  registry?: MetricsRegistry;
  /** Prefix of every metric name: `''` or `[a-zA-Z_:][a-zA-Z0-9_:]*`. Default `'redfence_'`. */
  prefix?: string;
  /**
   * Constant labels added to every redfence metric (and only to them, unlike
   * `registry.setDefaultLabels`). Names must be valid Prometheus label names, must not start with
   * `__`, and must not clash with the labels redfence uses itself (`topic`, `partition`, ...).
   */
  labels?: Record<string, string>;
}

/** Seconds; 0.1 ms to 1 s. */
const REDIS_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];
/** Records per batch; 1 to 10000. */
const BATCH_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000];
/** Seconds; 1 ms to 10 s (a transactional commit is far slower than a Redis call). */
const COMMIT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
/** Label names redfence itself uses (plus `le`, reserved by histograms). */
const RESERVED_LABELS = new Set([
  'topic',
  'partition',
  'verdict',
  'command',
  'mode',
  'kind',
  'reason',
  'outcome',
  'le',
]);
const REBALANCE_KINDS: readonly RebalanceKind[] = ['assign', 'revoke', 'lost'];

/** Metric names without the prefix; every one is registered by the constructor. */
const NAMES = [
  'verdicts_total',
  'redis_command_duration_seconds',
  'batch_records',
  'commit_duration_seconds',
  'consumer_lag_records',
  'consumer_lag_seconds',
  'rebalances_total',
  'dlq_records_total',
  'offset_gaps_total',
  'redis_outage',
  'fenced_partitions_total',
  'handler_in_flight_records',
  'handler_records_total',
  'handler_retries_total',
] as const;

/** How a handler's record ended (src/handler/). */
export type HandlerOutcome = 'done' | 'dead-lettered' | 'abandoned';
const HANDLER_OUTCOMES: readonly HandlerOutcome[] = ['done', 'dead-lettered', 'abandoned'];

type Labels = Record<string, string>;

function invalidArgument(message: string): RedfenceError {
  return new RedfenceError('RF_INVALID_ARGUMENT', message);
}

function checkCount(what: string, n: number): void {
  if (typeof n !== 'number' || !Number.isFinite(n) || n < 0) {
    throw invalidArgument(`${what} must be a finite number >= 0, got ${String(n)}`);
  }
}

function checkPartitionNumber(partition: number): string {
  if (typeof partition !== 'number' || !Number.isInteger(partition) || partition < 0) {
    throw invalidArgument(`partition must be a non-negative integer, got ${String(partition)}`);
  }
  return String(partition);
}

function checkOptions(options: RedfenceMetricsOptions): { prefix: string; labels: Labels } {
  if (typeof options !== 'object' || options === null) {
    throw new RedfenceError('RF_INVALID_OPTIONS', 'metrics options must be an object');
  }
  const prefix = options.prefix ?? 'redfence_';
  if (typeof prefix !== 'string' || (prefix !== '' && !METRIC_NAME.test(prefix))) {
    throw new RedfenceError(
      'RF_INVALID_OPTIONS',
      `metrics.prefix must be '' or match ${METRIC_NAME.source}, got ${JSON.stringify(prefix)}`,
    );
  }
  const labels: Labels = {};
  const given = options.labels ?? {};
  if (typeof given !== 'object' || given === null || Array.isArray(given)) {
    throw new RedfenceError('RF_INVALID_OPTIONS', 'metrics.labels must be an object of strings');
  }
  for (const [name, value] of Object.entries(given)) {
    if (!LABEL_NAME.test(name) || name.startsWith('__') || RESERVED_LABELS.has(name)) {
      throw new RedfenceError(
        'RF_INVALID_OPTIONS',
        `metrics.labels: ${JSON.stringify(name)} is not a usable label name (must match ` +
          `${LABEL_NAME.source}, not start with '__', and not be one of ${[...RESERVED_LABELS].join(', ')})`,
      );
    }
    if (typeof value !== 'string') {
      throw new RedfenceError('RF_INVALID_OPTIONS', `metrics.labels.${name} must be a string`);
    }
    labels[name] = value;
  }
  return { prefix, labels };
}

/**
 * The runtime's Prometheus metrics.
 *
 * Each instance registers its metrics in one registry: by default a new private `Registry`, never
 * prom-client's global one, so two instances never collide. Constructing a second instance on a
 * registry that already holds metrics of the same names **fails** with `RF_INVALID_OPTIONS`
 * (before registering anything): reusing would silently merge two runtimes' series. To put two
 * runtimes in one registry, share one instance between them, or give each a distinct `prefix`
 * (distinct `labels` alone do not make metric names distinct).
 *
 * @example
 * ```ts
 * import { Registry } from 'prom-client';
 * const registry = new Registry();
 * const metrics = new RedfenceMetrics({ registry, labels: { app: 'billing' } });
 * metrics.verdict('orders', 0, 'applied', 25);
 * metrics.redisCommand('fence', 0.0012);
 * const text = await metrics.metricsText(); // redfence_verdicts_total{topic="orders",...} 25
 * ```
 */
let readLagBoard: (m: RedfenceMetrics) => LagBoard;

/** The lag board behind `/status` (for src/metrics/server.ts; not part of the public surface). */
export function lagBoardOf(metrics: RedfenceMetrics): LagBoard {
  return readLagBoard(metrics);
}

export class RedfenceMetrics {
  readonly #registry: MetricsRegistry;
  readonly #defaults: Labels;
  readonly #verdicts: Counter<string>;
  readonly #redisCommands: Histogram<string>;
  readonly #batches: Histogram<string>;
  readonly #commits: Histogram<string>;
  readonly #lag: Gauge<string>;
  /** The owned partitions' lag status (`/status`) and time lag, fed by {@link lag}. */
  readonly #lagBoard = new LagBoard();
  static {
    readLagBoard = (m) => m.#lagBoard;
  }
  readonly #rebalances: Counter<string>;
  readonly #deadLetters: Counter<string>;
  readonly #offsetGaps: Counter<string>;
  readonly #redisOutage: Gauge<string>;
  readonly #fenced: Counter<string>;
  readonly #handlerInFlight: Gauge<string>;
  readonly #handlerRecords: Counter<string>;
  readonly #handlerRetries: Counter<string>;

  constructor(options: RedfenceMetricsOptions = {}) {
    const { prefix, labels } = checkOptions(options);
    const registry = options.registry ?? new Registry();
    if (!(registry instanceof Registry)) {
      throw new RedfenceError('RF_INVALID_OPTIONS', 'metrics.registry must be a prom-client Registry');
    }
    for (const name of NAMES) {
      if (registry.getSingleMetric(prefix + name) !== undefined) {
        throw new RedfenceError(
          'RF_INVALID_OPTIONS',
          `metrics.registry already has a metric named ${prefix + name}; share one RedfenceMetrics ` +
            'instance per registry, or give each a distinct metrics.prefix',
          { details: { metric: prefix + name } },
        );
      }
    }
    this.#registry = registry;
    this.#defaults = labels;
    const constant = Object.keys(labels);
    const registers = [registry];
    const names = (...own: string[]): string[] => [...own, ...constant];

    this.#verdicts = new Counter({
      name: `${prefix}verdicts_total`,
      help: 'Records processed, by fence verdict.',
      labelNames: names('topic', 'partition', 'verdict'),
      registers,
    });
    this.#redisCommands = new Histogram({
      name: `${prefix}redis_command_duration_seconds`,
      help: 'Duration of Redis commands and fence scripts, in seconds.',
      labelNames: names('command'),
      buckets: REDIS_BUCKETS,
      registers,
    });
    this.#batches = new Histogram({
      name: `${prefix}batch_records`,
      help: 'Records per processed batch.',
      labelNames: names(),
      buckets: BATCH_BUCKETS,
      registers,
    });
    this.#commits = new Histogram({
      name: `${prefix}commit_duration_seconds`,
      help: 'Duration of offset commits, in seconds, by commit mode.',
      labelNames: names('mode'),
      buckets: COMMIT_BUCKETS,
      registers,
    });
    this.#lag = new Gauge({
      name: `${prefix}consumer_lag_records`,
      help: 'Records between the last processed offset and the high watermark of an owned partition.',
      labelNames: names('topic', 'partition'),
      registers,
    });
    const board = this.#lagBoard;
    const timeLabels = (topic: string, partition: number) => ({
      ...labels,
      topic,
      partition: String(partition),
    });
    new Gauge({
      name: `${prefix}consumer_lag_seconds`,
      help: 'Age of the last committed record of an owned partition while it has lag (0 without lag).',
      labelNames: names('topic', 'partition'),
      registers,
      collect() {
        this.reset();
        for (const p of board.report().partitions)
          if (p.timeLagSeconds !== null) this.set(timeLabels(p.topic, p.partition), p.timeLagSeconds);
      },
    });
    this.#rebalances = new Counter({
      name: `${prefix}rebalances_total`,
      help: 'Consumer-group rebalance events, by kind.',
      labelNames: names('kind'),
      registers,
    });
    this.#deadLetters = new Counter({
      name: `${prefix}dlq_records_total`,
      help: 'Records sent to the dead-letter topic, by reason.',
      labelNames: names('reason'),
      registers,
    });
    this.#offsetGaps = new Counter({
      name: `${prefix}offset_gaps_total`,
      help: 'Offsets skipped within a partition (holes from compaction or transaction markers).',
      labelNames: names('topic', 'partition'),
      registers,
    });
    this.#redisOutage = new Gauge({
      name: `${prefix}redis_outage`,
      help: '1 while Redis is unreachable, else 0.',
      labelNames: names(),
      registers,
    });
    this.#fenced = new Counter({
      name: `${prefix}fenced_partitions_total`,
      help: 'Times a partition was fenced off (a newer owner epoch took it over).',
      labelNames: names('topic', 'partition'),
      registers,
    });

    this.#handlerInFlight = new Gauge({
      name: `${prefix}handler_in_flight_records`,
      help: 'Handler records accepted and not finished (running, queued behind their key, or waiting for a retry), per owned partition.',
      labelNames: names('topic', 'partition'),
      registers,
    });
    this.#handlerRecords = new Counter({
      name: `${prefix}handler_records_total`,
      help: 'Handler records finished, by outcome (done, dead-lettered, abandoned on revocation or close).',
      labelNames: names('topic', 'partition', 'outcome'),
      registers,
    });
    this.#handlerRetries = new Counter({
      name: `${prefix}handler_retries_total`,
      help: 'Handler attempts that failed with a retriable error and were tried again.',
      labelNames: names('topic', 'partition'),
      registers,
    });

    // Series that should exist from the start, so rate() and alerts see a 0 rather than nothing.
    for (const kind of REBALANCE_KINDS) this.#rebalances.inc(this.#labels({ kind }), 0);
    this.#redisOutage.set(this.#labels({}), 0);
  }

  /** The registry holding these metrics (and whatever else the caller registered in it). */
  get registry(): MetricsRegistry {
    return this.#registry;
  }

  /** Counts `n` records of one partition that got `verdict` from the fence. */
  verdict(topic: string, partition: number, verdict: string, n = 1): void {
    checkCount('n', n);
    this.#verdicts.inc(this.#labels({ topic, partition: checkPartitionNumber(partition), verdict }), n);
  }

  /** Observes the duration of one Redis command or fence script. */
  redisCommand(command: string, seconds: number): void {
    checkCount('seconds', seconds);
    this.#redisCommands.observe(this.#labels({ command }), seconds);
  }

  /** Observes the size of one processed batch. */
  batch(records: number): void {
    checkCount('records', records);
    this.#batches.observe(this.#labels({}), records);
  }

  /** Observes the duration of one offset commit. */
  commit(mode: CommitMode, seconds: number): void {
    if (mode !== 'at-least-once' && mode !== 'exactly-once') {
      throw invalidArgument(`mode must be 'at-least-once' or 'exactly-once', got ${JSON.stringify(mode)}`);
    }
    checkCount('seconds', seconds);
    this.#commits.observe(this.#labels({ mode }), seconds);
  }

  /** Sets the consumer lag of an owned partition; `progress` (at a commit) feeds the lag board behind `/status`. */
  lag(topic: string, partition: number, records: number, progress?: PartitionProgress): void {
    checkCount('records', records);
    this.#lag.set(this.#labels({ topic, partition: checkPartitionNumber(partition) }), records);
    if (progress !== undefined) this.#lagBoard.record(topic, partition, progress);
  }

  /**
   * A partition this consumer now owns: its rare-event counters (fencings, FENCE and REBASE verdicts)
   * get a series at 0, so `increase()` and `rate()` in alert rules see the first event (a counter that
   * first appears at 1 shows no increase).
   */
  owned(topic: string, partition: number): void {
    const labels = this.#labels({ topic, partition: checkPartitionNumber(partition) });
    this.#fenced.inc(labels, 0);
    for (const verdict of ['FENCE', 'REBASE']) this.#verdicts.inc({ ...labels, verdict }, 0);
  }

  /**
   * Forgets the per-partition gauges of a partition this consumer no longer owns (on revocation or
   * loss), so a stale lag is not reported. Counters are kept: they stay meaningful totals.
   */
  clearPartition(topic: string, partition: number): void {
    this.#lag.remove(this.#labels({ topic, partition: checkPartitionNumber(partition) }));
    this.#handlerInFlight.remove(this.#labels({ topic, partition: String(partition) }));
    this.#lagBoard.forget(topic, partition);
  }

  /** Sets a handler's in-flight records of an owned partition. */
  handlerInFlight(topic: string, partition: number, records: number): void {
    checkCount('records', records);
    this.#handlerInFlight.set(this.#labels({ topic, partition: checkPartitionNumber(partition) }), records);
  }

  /** Counts `n` handler records of a partition that ended with `outcome`. */
  handlerRecord(topic: string, partition: number, outcome: HandlerOutcome, n = 1): void {
    if (!HANDLER_OUTCOMES.includes(outcome))
      throw invalidArgument(
        `outcome must be one of ${HANDLER_OUTCOMES.join(', ')}, got ${JSON.stringify(outcome)}`,
      );
    checkCount('n', n);
    this.#handlerRecords.inc(this.#labels({ topic, partition: checkPartitionNumber(partition), outcome }), n);
  }

  /** Counts one retried handler attempt. */
  handlerRetry(topic: string, partition: number): void {
    this.#handlerRetries.inc(this.#labels({ topic, partition: checkPartitionNumber(partition) }), 1);
  }

  /** Counts one rebalance event. */
  rebalance(kind: RebalanceKind): void {
    if (!REBALANCE_KINDS.includes(kind)) {
      throw invalidArgument(`kind must be one of ${REBALANCE_KINDS.join(', ')}, got ${JSON.stringify(kind)}`);
    }
    this.#rebalances.inc(this.#labels({ kind }), 1);
  }

  /** Counts `n` records sent to the dead-letter topic for `reason`. */
  deadLetter(reason: string, n = 1): void {
    checkCount('n', n);
    this.#deadLetters.inc(this.#labels({ reason }), n);
  }

  /** Counts `n` offsets skipped in a partition. A gap is expected (compaction, transactions), not an error. */
  offsetGap(topic: string, partition: number, n: number): void {
    checkCount('n', n);
    this.#offsetGaps.inc(this.#labels({ topic, partition: checkPartitionNumber(partition) }), n);
  }

  /** Marks a Redis outage as started (`true`) or over (`false`). */
  redisOutage(active: boolean): void {
    this.#redisOutage.set(this.#labels({}), active ? 1 : 0);
  }

  /** Counts one fencing of a partition (another owner with a newer epoch took it over). */
  fenced(topic: string, partition: number): void {
    this.#fenced.inc(this.#labels({ topic, partition: checkPartitionNumber(partition) }), 1);
  }

  /** The whole registry in its exposition format (`registry.contentType`). */
  metricsText(): Promise<string> {
    return this.#registry.metrics();
  }

  #labels(own: Labels): Labels {
    return { ...own, ...this.#defaults };
  }
}
