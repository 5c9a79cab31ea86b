/**
 * Prometheus metrics of the redfence runtime, kept in an injected (or private) prom-client registry.
 * The runtime calls the typed methods below; it never touches prom-client objects directly. The
 * families themselves (names, help, labels, buckets) are registered by families.ts.
 */
import { Registry } from 'prom-client';
import { RedfenceError } from '../errors/index.js';
import {
  checkCount,
  checkName,
  checkOptions,
  checkPartitionNumber,
  invalidArgument,
  type Labels,
} from './checks.js';
import {
  type Families,
  type MetricsRegistry,
  NAMES,
  type RepartitionNode,
  registerFamilies,
} from './families.js';
import { LagBoard, type PartitionProgress } from './lag-board.js';

export type { MetricsRegistry };

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

const REBALANCE_KINDS: readonly RebalanceKind[] = ['assign', 'revoke', 'lost'];

/** How a handler's record ended (src/handler/). */
export type HandlerOutcome = 'done' | 'dead-lettered' | 'abandoned';
const HANDLER_OUTCOMES: readonly HandlerOutcome[] = ['done', 'dead-lettered', 'abandoned'];

/** Why a topology node dropped a record (src/topology/model.ts, ModelDrop). */
export type TopologyDropReason = 'null-key' | 'null-value' | 'late';
const TOPOLOGY_DROP_REASONS: readonly TopologyDropReason[] = ['null-key', 'null-value', 'late'];

/** Why an assigned partition's committed offset could not be fetched from (src/kafka/offset-resets.ts). */
export type OffsetResetReason = 'retention' | 'beyond_end';
const OFFSET_RESET_REASONS: readonly OffsetResetReason[] = ['retention', 'beyond_end'];

/** What {@link RedfenceMetrics.topology} is told of a topology's nodes. */
export interface TopologyNodes {
  /** Its `applicationId` (the `application_id` label). */
  readonly application: string;
  /** Every node's name, as the DSL names it (the `topology_node` label). */
  readonly nodes: readonly string[];
  /** Its windowed aggregations (late records are theirs). */
  readonly windowed: readonly string[];
  /** Each repartition topic and the node that reads it. */
  readonly repartition: ReadonlyMap<string, string>;
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
  readonly #m: Families;
  /** The owned partitions' lag status (`/status`) and time lag, fed by {@link lag}. */
  readonly #lagBoard = new LagBoard();
  /** By repartition topic: the topology node reading it (for `redfence_topology_repartition_lag_records`). */
  readonly #repartition = new Map<string, RepartitionNode>();
  static {
    readLagBoard = (m) => m.#lagBoard;
  }

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
    this.#m = registerFamilies(prefix, labels, registry, this.#lagBoard, this.#repartition);

    // Series that should exist from the start, so rate() and alerts see a 0 rather than nothing.
    for (const kind of REBALANCE_KINDS) this.#m.rebalances.inc(this.#labels({ kind }), 0);
    this.#m.redisOutage.set(this.#labels({}), 0);
  }

  /** The registry holding these metrics (and whatever else the caller registered in it). */
  get registry(): MetricsRegistry {
    return this.#registry;
  }

  /** Counts `n` records of one partition that got `verdict` from the fence. */
  verdict(topic: string, partition: number, verdict: string, n = 1): void {
    checkCount('n', n);
    this.#m.verdicts.inc(this.#labels({ topic, partition: checkPartitionNumber(partition), verdict }), n);
  }

  /** Observes the duration of one Redis command or fence script. */
  redisCommand(command: string, seconds: number): void {
    checkCount('seconds', seconds);
    this.#m.redisCommands.observe(this.#labels({ command }), seconds);
  }

  /** Observes the size of one processed batch. */
  batch(records: number): void {
    checkCount('records', records);
    this.#m.batches.observe(this.#labels({}), records);
  }

  /** Observes the duration of one offset commit. */
  commit(mode: CommitMode, seconds: number): void {
    if (mode !== 'at-least-once' && mode !== 'exactly-once') {
      throw invalidArgument(`mode must be 'at-least-once' or 'exactly-once', got ${JSON.stringify(mode)}`);
    }
    checkCount('seconds', seconds);
    this.#m.commits.observe(this.#labels({ mode }), seconds);
  }

  /** Sets the consumer lag of an owned partition; `progress` (at a commit) feeds the lag board behind `/status`. */
  lag(topic: string, partition: number, records: number, progress?: PartitionProgress): void {
    checkCount('records', records);
    this.#m.lag.set(this.#labels({ topic, partition: checkPartitionNumber(partition) }), records);
    if (progress !== undefined) this.#lagBoard.record(topic, partition, progress);
  }

  /**
   * A partition this consumer now owns: its rare-event counters (fencings, FENCE and REBASE verdicts)
   * get a series at 0, so `increase()` and `rate()` in alert rules see the first event (a counter that
   * first appears at 1 shows no increase).
   */
  owned(topic: string, partition: number): void {
    const labels = this.#labels({ topic, partition: checkPartitionNumber(partition) });
    this.#m.fenced.inc(labels, 0);
    for (const verdict of ['FENCE', 'REBASE']) this.#m.verdicts.inc({ ...labels, verdict }, 0);
  }

  /**
   * Forgets the per-partition gauges of a partition this consumer no longer owns (on revocation or
   * loss), so a stale lag is not reported. Counters are kept: they stay meaningful totals.
   */
  clearPartition(topic: string, partition: number): void {
    this.#m.lag.remove(this.#labels({ topic, partition: checkPartitionNumber(partition) }));
    this.#m.handlerInFlight.remove(this.#labels({ topic, partition: String(partition) }));
    this.#lagBoard.forget(topic, partition);
  }

  /** Sets a handler's in-flight records of an owned partition. */
  handlerInFlight(topic: string, partition: number, records: number): void {
    checkCount('records', records);
    this.#m.handlerInFlight.set(this.#labels({ topic, partition: checkPartitionNumber(partition) }), records);
  }

  /** Counts `n` handler records of a partition that ended with `outcome`. */
  handlerRecord(topic: string, partition: number, outcome: HandlerOutcome, n = 1): void {
    if (!HANDLER_OUTCOMES.includes(outcome))
      throw invalidArgument(
        `outcome must be one of ${HANDLER_OUTCOMES.join(', ')}, got ${JSON.stringify(outcome)}`,
      );
    checkCount('n', n);
    this.#m.handlerRecords.inc(
      this.#labels({ topic, partition: checkPartitionNumber(partition), outcome }),
      n,
    );
  }

  /** Counts one retried handler attempt. */
  handlerRetry(topic: string, partition: number): void {
    this.#m.handlerRetries.inc(this.#labels({ topic, partition: checkPartitionNumber(partition) }), 1);
  }

  /** Counts one rebalance event. */
  rebalance(kind: RebalanceKind): void {
    if (!REBALANCE_KINDS.includes(kind)) {
      throw invalidArgument(`kind must be one of ${REBALANCE_KINDS.join(', ')}, got ${JSON.stringify(kind)}`);
    }
    this.#m.rebalances.inc(this.#labels({ kind }), 1);
  }

  /** Counts `n` records sent to the dead-letter topic for `reason`. */
  deadLetter(reason: string, n = 1): void {
    checkCount('n', n);
    this.#m.deadLetters.inc(this.#labels({ reason }), n);
  }

  /** Counts `n` offsets skipped in a partition. A gap is expected (compaction, transactions), not an error. */
  offsetGap(topic: string, partition: number, n: number): void {
    checkCount('n', n);
    this.#m.offsetGaps.inc(this.#labels({ topic, partition: checkPartitionNumber(partition) }), n);
  }

  /**
   * An assigned partition whose committed offset its log no longer held (src/kafka/offset-resets.ts):
   * `skipped` records deleted unprocessed (`retention`), 0 when not known (`beyond_end`).
   */
  inputOffsetReset(topic: string, partition: number, reason: OffsetResetReason, skipped: number): void {
    if (!OFFSET_RESET_REASONS.includes(reason))
      throw invalidArgument(
        `reason must be one of ${OFFSET_RESET_REASONS.join(', ')}, got ${String(reason)}`,
      );
    checkCount('skipped', skipped);
    const labels = this.#labels({ topic, partition: checkPartitionNumber(partition), reason });
    this.#m.offsetResets.inc(labels, 1);
    this.#m.recordsSkipped.inc(labels, skipped);
  }

  /** Marks a Redis outage as started (`true`) or over (`false`). */
  redisOutage(active: boolean): void {
    this.#m.redisOutage.set(this.#labels({}), active ? 1 : 0);
  }

  /** Counts one fencing of a partition (another owner with a newer epoch took it over). */
  fenced(topic: string, partition: number): void {
    this.#m.fenced.inc(this.#labels({ topic, partition: checkPartitionNumber(partition) }), 1);
  }

  /**
   * A topology this registry reports on: every node's in and out counters and each windowed
   * aggregation's late counter get a series at 0 (so `increase()` sees the first record), and the lag
   * of each repartition topic's owned partitions is reported under the node reading it. Labels carry
   * the application id and node names only (bounded by the topology's size), never keys or values.
   * A `TopologyProcessor` given `metrics` calls it and the `topology*` counters below.
   *
   * @example
   * metrics.topology({ application: 'fraud', nodes: ['orders', 'big'], windowed: [], repartition: new Map() });
   * metrics.topologyNode('fraud', 'big', 40, 12); // redfence_topology_records_in_total{application_id="fraud",topology_node="big"} 40
   */
  topology(t: TopologyNodes): void {
    const application_id = checkName('application', t.application);
    for (const node of t.nodes) {
      const labels = this.#labels({ application_id, topology_node: checkName('node', node) });
      this.#m.topologyIn.inc(labels, 0);
      this.#m.topologyOut.inc(labels, 0);
    }
    for (const node of t.windowed)
      this.#m.topologyLate.inc(this.#labels({ application_id, topology_node: checkName('node', node) }), 0);
    for (const [topic, node] of t.repartition)
      this.#repartition.set(checkName('topic', topic), {
        application: application_id,
        node: checkName('node', node),
      });
  }

  /** Counts a committed topology batch's records in and out of one node. */
  topologyNode(application: string, node: string, recordsIn: number, recordsOut: number): void {
    checkCount('recordsIn', recordsIn);
    checkCount('recordsOut', recordsOut);
    const labels = this.#labels({
      application_id: checkName('application', application),
      topology_node: checkName('node', node),
    });
    if (recordsIn > 0) this.#m.topologyIn.inc(labels, recordsIn);
    if (recordsOut > 0) this.#m.topologyOut.inc(labels, recordsOut);
  }

  /**
   * Counts keys folded from owner-local state (`hits`) or read from Redis first (`misses`)
   * (docs/operations.md, "Owner-local state"): a reducer processor's (`store`: its store) or a
   * topology's reduce and aggregate (`store`: its application id).
   *
   * @example
   * metrics.ownerCache('totals', 480, 20); // redfence_owner_cache_reads_total{store="totals",result="hit"} 480
   */
  ownerCache(store: string, hits: number, misses: number): void {
    checkCount('hits', hits);
    checkCount('misses', misses);
    const name = checkName('store', store);
    if (hits > 0) this.#m.ownerCache.inc(this.#labels({ store: name, result: 'hit' }), hits);
    if (misses > 0) this.#m.ownerCache.inc(this.#labels({ store: name, result: 'miss' }), misses);
  }

  /**
   * Counts ticks of the wall-clock close of idle partitions (docs/streams.md, "Closing the windows of an
   * idle partition"): `produced` by this instance, or `consumed` in committed batches.
   *
   * @example
   * metrics.topologyTicks('fraud', 'produced', 1); // redfence_topology_ticks_total{application_id="fraud",event="produced"} 1
   */
  topologyTicks(application: string, event: 'produced' | 'consumed', n: number): void {
    checkCount('n', n);
    if (event !== 'produced' && event !== 'consumed')
      throw new RedfenceError('RF_INVALID_ARGUMENT', 'topologyTicks: event must be "produced" or "consumed"');
    if (n > 0)
      this.#m.topologyTicks.inc(
        this.#labels({ application_id: checkName('application', application), event }),
        n,
      );
  }

  /** Counts `n` records of a committed topology batch that were late for a windowed aggregation. */
  topologyLate(application: string, node: string, n: number): void {
    checkCount('n', n);
    this.#m.topologyLate.inc(
      this.#labels({
        application_id: checkName('application', application),
        topology_node: checkName('node', node),
      }),
      n,
    );
  }

  /** Counts `n` records of a committed topology batch that a node dropped for `reason`. */
  topologyDropped(application: string, node: string, reason: TopologyDropReason, n: number): void {
    if (!TOPOLOGY_DROP_REASONS.includes(reason))
      throw invalidArgument(
        `reason must be one of ${TOPOLOGY_DROP_REASONS.join(', ')}, got ${JSON.stringify(reason)}`,
      );
    checkCount('n', n);
    this.#m.topologyDropped.inc(
      this.#labels({
        application_id: checkName('application', application),
        topology_node: checkName('node', node),
        reason,
      }),
      n,
    );
  }

  /** The whole registry in its exposition format (`registry.contentType`). */
  metricsText(): Promise<string> {
    return this.#registry.metrics();
  }

  #labels(own: Labels): Labels {
    return { ...own, ...this.#defaults };
  }
}
