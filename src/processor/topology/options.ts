/**
 * The topology processor's options: their types, defaults and one check, at construction, before any
 * connection. Errors are RF_INVALID_OPTIONS naming the option; a topology the Redis runtime cannot run
 * yet is RF_TOPOLOGY_UNSUPPORTED naming the node (src/topology/run/plan.ts). The shared options
 * (kafka, groupId, logger, ...) are declared and checked in src/runtime/options.ts.
 */
import type { Cluster, Redis } from 'ioredis';
import { bool, fn, integer, invalid, isObject, oneOf, text } from '../../options/checks.js';
import {
  type ResolvedRuntimeOptions,
  type RuntimeOptions,
  resolveRuntimeOptions,
} from '../../runtime/options.js';
import { windowedAggregations } from '../../topology/tick.js';
import type { BuiltTopology } from '../../topology/types.js';
import type { CrashHook } from '../crash-points.js';
import {
  defaultCommitIntervalMs,
  type OwnerCacheOptions,
  ownerCacheOption,
  PROCESSING_MODES,
  type ProcessingMode,
  type WaitReplicasOptions,
  type WatchdogOptions,
  waitReplicasOption,
  watchdogOptions,
} from '../options.js';
import { type ResolvedSnapshot, type SnapshotOptions, snapshotOptions } from '../snapshot-options.js';

/** The shared options a topology processor takes (those its interface picks from RuntimeOptions). */
type Shared = Extract<keyof TopologyProcessorOptions, keyof RuntimeOptions>;

/**
 * A topology processor's options: the shared ones (`RuntimeOptions`: kafka, groupId (default: the
 * topology's applicationId, as Kafka Streams' application.id), instanceId, logger, metrics, health,
 * onFatal, createTopics, tracing: a span per batch, docs/operations.md "Traces") and its own.
 */
export interface TopologyProcessorOptions
  extends Pick<
    RuntimeOptions,
    | 'kafka'
    | 'groupId'
    | 'instanceId'
    | 'logger'
    | 'metrics'
    | 'health'
    | 'onFatal'
    | 'createTopics'
    | 'tracing'
  > {
  /** A built topology (`topology({ applicationId }) ... .build()`). */
  topology: BuiltTopology;
  /** An ioredis Redis or Cluster; the processor does not close it. */
  redis: Redis | Cluster;
  /** Default 'exactly-once': outputs, dead letters, offsets and stream time in one transaction. */
  mode?: ProcessingMode;
  /** Where late and refused records go. Default `<first input topic>.DLT`; `<applicationId>.DLT` when the first source reads a pattern. */
  deadLetterTopic?: string;
  /** Part of every Redis key (`rf:t=<tenant>:...`). Default: none. */
  tenant?: string;
  /** How long a window key lives past its close, in ms of wall-clock time. Default one day. */
  retentionMs?: number;
  /**
   * Owner-local state for reduce and aggregate (docs/streams.md, "Owner-local state"): keep up to
   * `maxBytes` of the unwindowed aggregates this process last wrote for its partitions, and fold onto
   * them without reading Redis; each write still carries the key's token, so a key changed elsewhere
   * is read again. Default `{ maxBytes: 16 MiB }`; `false` turns it off.
   */
  ownerCache?: OwnerCacheOptions | false;
  /** Refuse to start unless Redis' maxmemory-policy is noeviction. Default true. */
  requireNoEviction?: boolean;
  /** Group commit, as the processor's (src/processor/options.ts). Default 2000. */
  groupCommitRecords?: number;
  /** Least time between the starts of two Kafka steps, as the processor's: default 100 in exactly-once mode, else 0. */
  commitIntervalMs?: number;
  /** Replication factor of topics made by `createTopics`: 1..32767, or -1 (default) for the broker's. */
  replicationFactor?: number;
  /**
   * After each batch's key calls and each epoch taken, WAIT for this many Redis replicas (on Redis
   * Cluster: of every master) before producing and committing, as the processor's `waitReplicas`; a
   * batch whose connection closed meanwhile is run again. Default: no WAIT.
   */
  waitReplicas?: WaitReplicasOptions;
  /**
   * Least time between two purges of a repartition partition (its committed records deleted), as Kafka
   * Streams' `repartition.purge.interval.ms`. Default 30000; 0: after every commit.
   */
  repartitionPurgeIntervalMs?: number;
  /**
   * Stalled-consumer watchdog, as the processor's: with lag on the topics it reads and no batch
   * delivered for `stallMs`, seek the owned partitions back to their committed offsets; after
   * `maxRecoveries` failed tries, stop reporting liveness (/livez). `false` turns it off. Default on.
   */
  watchdog?: WatchdogOptions | false;
  /**
   * The wall-clock close of idle partitions (docs/streams.md, "Closing the windows of an idle
   * partition"): the owner of an input partition of a windowed sub-topology (an input topic or a
   * repartition topic) that has had no record for this many ms, while some window it wrote is still
   * open, produces a tick into it (null key, empty value, header `redfence-tick`, the wall clock as its
   * timestamp), so its windows close (emit('final'): their final results go out) with no further
   * record. Other consumers of those topics see the ticks, and the processor needs write access to
   * them. 100 to 86400000 (a day); refused for a topology without a windowed aggregation. Default: off.
   */
  idleCloseMs?: number;
  /**
   * Periodic snapshots of the owned partitions' state (fence keys with their windows and sessions,
   * close indexes, stream times) into a compacted topic (docs/operations.md, "Snapshots of a
   * topology"): `{ topic?, intervalMs?, pageSize?, maxKeysPerSecond? }` as the processor's, topic default
   * `<applicationId>-snapshot`. Needs `kafka` as connection settings. Default: off.
   */
  snapshot?: SnapshotOptions | false;
  /**
   * How often a running processor whose topology reads a pattern lists the cluster's topics (a full
   * metadata request), as Kafka Streams' `metadata.max.age.ms`: a matching topic made meanwhile is
   * read from then on (docs/streams.md, "Sources reading a pattern"). 100 to 86400000. Default 60000.
   */
  patternRefreshMs?: number;
  /**
   * Fault tests only: called at each crash point of the cycle (src/processor/crash-points.ts), at the
   * same points as the processor's; `redfence run` sets it from `REDFENCE_CRASH_AT`. Default: none.
   * @internal
   */
  crashHook?: CrashHook;
}

export interface ResolvedTopologyOptions extends Pick<ResolvedRuntimeOptions, Shared> {
  readonly topology: BuiltTopology;
  readonly redis: Redis | Cluster;
  readonly mode: ProcessingMode;
  /** Undefined: `<input topic>.DLT` (the input is known once the topology is planned). */
  readonly deadLetterTopic: string | undefined;
  readonly tenant: string | undefined;
  readonly retentionMs: number | undefined;
  readonly ownerCache: { readonly maxBytes: number } | undefined;
  readonly requireNoEviction: boolean;
  readonly groupCommitRecords: number;
  readonly commitIntervalMs: number;
  readonly replicationFactor: number;
  readonly waitReplicas: WaitReplicasOptions | undefined;
  readonly repartitionPurgeIntervalMs: number;
  readonly watchdog: Required<WatchdogOptions> | undefined;
  /** Undefined: no ticks. */
  readonly idleCloseMs: number | undefined;
  /** Undefined: no snapshots. */
  readonly snapshot: ResolvedSnapshot | undefined;
  readonly patternRefreshMs: number;
  readonly crashHook: CrashHook | undefined;
}

const SHARED: Record<Shared, true> = {
  kafka: true,
  groupId: true,
  instanceId: true,
  logger: true,
  metrics: true,
  health: true,
  onFatal: true,
  createTopics: true,
  tracing: true,
};
const OWN: Record<Exclude<keyof TopologyProcessorOptions, Shared>, true> = {
  topology: true,
  redis: true,
  mode: true,
  deadLetterTopic: true,
  tenant: true,
  retentionMs: true,
  ownerCache: true,
  requireNoEviction: true,
  groupCommitRecords: true,
  commitIntervalMs: true,
  replicationFactor: true,
  waitReplicas: true,
  repartitionPurgeIntervalMs: true,
  watchdog: true,
  idleCloseMs: true,
  snapshot: true,
  patternRefreshMs: true,
  crashHook: true,
};
/** idleCloseMs' bounds: ticks at most ten times a second per partition, at least once a day. */
export const IDLE_CLOSE_MIN_MS = 100;
export const IDLE_CLOSE_MAX_MS = 86_400_000;
/** patternRefreshMs' bounds and default (Kafka Streams' metadata refresh is 5 minutes; ours was a minute's warning). */
export const PATTERN_REFRESH_MIN_MS = 100;
export const PATTERN_REFRESH_MAX_MS = 86_400_000;
export const PATTERN_REFRESH_DEFAULT_MS = 60_000;
const TOPIC = /^[A-Za-z0-9._-]{1,249}$/;

function isBuilt(v: unknown): v is BuiltTopology {
  return (
    isObject(v) &&
    typeof v.applicationId === 'string' &&
    Array.isArray(v.nodes) &&
    Array.isArray(v.subTopologies) &&
    Object.isFrozen(v)
  );
}

/** Checks every option and fills in the defaults. Throws RF_INVALID_OPTIONS naming the option. */
export function resolveTopologyOptions(options: TopologyProcessorOptions): ResolvedTopologyOptions {
  if (!isObject(options)) throw invalid('topology processor options must be an object');
  const o = options as unknown as Record<string, unknown>;
  if (!isBuilt(o.topology))
    throw invalid('option "topology" must be a built topology (topology({ applicationId }) ... .build())');
  const topology = o.topology;
  const shared = resolveRuntimeOptions(o, {
    what: 'topology processor',
    fields: SHARED,
    own: OWN,
    groupId: topology.applicationId,
    metricsMethods: ['commit', 'redisOutage', 'deadLetter'],
  });
  if (!isObject(o.redis) || typeof o.redis.config !== 'function')
    throw invalid('option "redis" must be an ioredis Redis or Cluster');
  const dlt = text('deadLetterTopic', o.deadLetterTopic);
  if (dlt !== undefined && !TOPIC.test(dlt))
    throw invalid('option "deadLetterTopic" must be a topic name ([A-Za-z0-9._-]{1,249})');
  const rf = o.replicationFactor;
  if (
    rf !== undefined &&
    rf !== -1 &&
    !(Number.isSafeInteger(rf) && (rf as number) >= 1 && (rf as number) <= 32_767)
  )
    throw invalid(
      'option "replicationFactor" must be an integer from 1 to 32767, or -1 for the broker\'s default',
    );
  const mode = oneOf('mode', o.mode, PROCESSING_MODES, 'exactly-once');
  return {
    ...shared,
    topology,
    redis: options.redis,
    mode,
    deadLetterTopic: dlt,
    tenant: text('tenant', o.tenant),
    retentionMs:
      o.retentionMs === undefined
        ? undefined
        : integer('retentionMs', o.retentionMs, 0, Number.MAX_SAFE_INTEGER, 0),
    ownerCache: ownerCacheOption(o.ownerCache),
    requireNoEviction: bool('requireNoEviction', o.requireNoEviction, true),
    groupCommitRecords: integer('groupCommitRecords', o.groupCommitRecords, 0, Number.MAX_SAFE_INTEGER, 2000),
    commitIntervalMs: integer(
      'commitIntervalMs',
      o.commitIntervalMs,
      0,
      60_000,
      defaultCommitIntervalMs(mode),
    ),
    replicationFactor: rf === undefined ? -1 : (rf as number),
    waitReplicas: waitReplicasOption(o.waitReplicas),
    repartitionPurgeIntervalMs: integer(
      'repartitionPurgeIntervalMs',
      o.repartitionPurgeIntervalMs,
      0,
      Number.MAX_SAFE_INTEGER,
      30_000,
    ),
    watchdog: watchdogOptions(o.watchdog),
    idleCloseMs: idleCloseOption(topology, o.idleCloseMs),
    snapshot: snapshotOptions(o.snapshot, topology.applicationId, 'port' in shared.kafka),
    patternRefreshMs: integer(
      'patternRefreshMs',
      o.patternRefreshMs,
      PATTERN_REFRESH_MIN_MS,
      PATTERN_REFRESH_MAX_MS,
      PATTERN_REFRESH_DEFAULT_MS,
    ),
    crashHook: o.crashHook === undefined ? undefined : (fn('crashHook', o.crashHook) as unknown as CrashHook),
  };
}

/**
 * `idleCloseMs`: undefined (off), or its bounds; refused for a topology with no window to close. The one
 * check of the option: `redfence run --idle-close` and `redfence chaos --idle-close` (before it starts
 * the instances) call it too.
 */
export function idleCloseOption(topology: BuiltTopology, v: unknown): number | undefined {
  if (v === undefined) return undefined;
  const ms = integer('idleCloseMs', v, IDLE_CLOSE_MIN_MS, IDLE_CLOSE_MAX_MS, 0);
  if (windowedAggregations(topology).length === 0)
    throw invalid(
      `option "idleCloseMs": topology ${topology.applicationId} has no windowed aggregation, so a tick would close nothing; leave the option out`,
    );
  return ms;
}
