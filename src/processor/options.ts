/**
 * The processor's options: their types, defaults and validation. Everything is checked once, at
 * construction, before any connection is made; an error is `RF_INVALID_OPTIONS` and names the option's
 * path (`kafka.sessionTimeoutMs`). Unknown keys are refused at every level, numbers are checked for
 * type and range, and a 0 is a value like any other (never taken for "not given"). The options every
 * runtime shares (kafka, groupId, logger, ...) are declared and checked in src/runtime/options.ts.
 */
import { Cluster, type Redis } from 'ioredis';
import { defineProcessor, type ProcessorDefinition } from '../definition/definition.js';
import type { FencingMode } from '../fence/index.js';
import {
  bool,
  checkKeys,
  fn,
  integer,
  invalid,
  isObject,
  MAX_TIMER_MS,
  oneOf,
  shown,
} from '../options/checks.js';
import {
  type ResolvedRuntimeOptions,
  type RuntimeField,
  type RuntimeOptions,
  resolveRuntimeOptions,
} from '../runtime/options.js';
import type { CrashHook } from './crash-points.js';
import { type ResolvedSnapshot, type SnapshotOptions, snapshotOptions } from './snapshot-options.js';

/** How outputs and offsets reach Kafka. The one definition of the processing modes. */
export const PROCESSING_MODES = ['exactly-once', 'at-least-once'] as const;
export type ProcessingMode = (typeof PROCESSING_MODES)[number];

export type {
  ClientConfig,
  KafkaOptions,
  KafkaSasl,
  KafkaSsl,
  OAuthBearerProvider,
  OAuthBearerToken,
  SecurityProtocol,
} from '../runtime/kafka-options.js';

export interface WatchdogOptions {
  /** No batch delivered for this long while there is lag counts as a stall. Default 60000. */
  stallMs?: number;
  /** How often the watchdog looks. Default 10000. */
  intervalMs?: number;
  /** Recoveries tried before liveness is no longer reported. Default 3. */
  maxRecoveries?: number;
}

export interface WaitReplicasOptions {
  /** Replicas that must acknowledge (on Redis Cluster: of every master). */
  replicas: number;
  timeoutMs: number;
}

/**
 * The processor's options: the shared ones (`RuntimeOptions`: kafka, groupId, instanceId, logger,
 * metrics, health, onFatal, tracing, createTopics; not closeTimeoutMs) and its own.
 */
export interface ProcessorOptions<T = unknown, S = unknown> extends Omit<RuntimeOptions, 'closeTimeoutMs'> {
  definition: ProcessorDefinition<T, S>;
  /** An ioredis Redis or Cluster; the processor does not close it. */
  redis: Redis | Cluster;
  /** Default 'exactly-once'. */
  mode?: ProcessingMode;
  /** Default: 'cluster' for a Redis Cluster client, else 'strict' ('strict' needs a single Redis). */
  fencing?: FencingMode;
  /** Retries of a user function that throws a retriable error (err.retriable === true) before dead-lettering. Default 3. */
  userRetries?: number;
  /** Refuse to start unless Redis' maxmemory-policy is noeviction. Default true. */
  requireNoEviction?: boolean;
  /**
   * Owner-local state of a reducer (docs/operations.md, "Owner-local state"): while this process owns a
   * partition it keeps each key's state and token after its last call, up to `maxBytes`, and folds the
   * key's next records without reading Redis; the compare-and-set still carries the token, so a key
   * changed elsewhere is read again. Default `{ maxBytes: 16 MiB }`; `false` turns it off. Operation
   * processors never read, so it does not apply to them.
   */
  ownerCache?: OwnerCacheOptions | false;
  /**
   * After each cycle's Redis writes and each epoch INCR, WAIT for this many replicas before committing.
   * On Redis Cluster the WAIT runs on every master.
   */
  waitReplicas?: WaitReplicasOptions;
  /** Sweep pending outputs of keys not written again every N committed batches per partition. Default 20. */
  sweepEvery?: number;
  /**
   * Also sweep a partition that committed since its last sweep once this long has passed, so an idle or
   * slow partition does not keep pending outputs below its committed offset. Default 5000.
   */
  sweepIntervalMs?: number;
  /**
   * Group commit: batches whose Redis step is done while the previous Kafka step (produce + commit, or
   * the transaction) is still running wait for it and then go together in one Kafka step. At most this
   * many records wait; past it the next batch waits for the Kafka step in flight before it is
   * accepted. Default 2000; 0 gives every batch its own Kafka step.
   */
  groupCommitRecords?: number;
  /**
   * How many partitions' batches may be in the Redis stage at once, so one batch's Redis step overlaps
   * the next one's planning and emitting. A partition never has two batches in flight: its records are
   * still applied, produced and committed in offset order. Default 1 (one batch at a time). Pays with
   * frequent Kafka steps (`commitIntervalMs: 0`); docs/benchmarks.md, "Fast-path step 4".
   */
  partitionsInFlight?: number;
  /**
   * Least time between the starts of two Kafka steps, as Kafka Streams' `commit.interval.ms`: applied
   * batches wait up to this long to go together (unless `groupCommitRecords` are waiting), giving fewer,
   * larger transactions and commits for that much more latency. Default 100 in exactly-once mode (as
   * Kafka Streams' exactly_once_v2), 0 in at-least-once mode (a Kafka step starts as soon as the
   * previous one has finished). `groupCommitRecords` waiting records start a step at once.
   */
  commitIntervalMs?: number;
  /**
   * Stalled-consumer watchdog: with lag and no batch delivered for `stallMs`, seek the owned partitions
   * back to their committed offsets; after `maxRecoveries` stop reporting liveness. `false` turns it off.
   */
  watchdog?: WatchdogOptions | false;
  /** Replication factor of topics made by `createTopics`: an integer >= 1, or -1 (default) for the broker's default. */
  replicationFactor?: number;
  /**
   * Periodic snapshots of the owned partitions' state into a compacted topic, from which
   * `redfence rebuild` restores a Redis that lost the store (docs/operations.md, "Snapshot and
   * rebuild"). Needs `kafka` as connection settings. Default: none.
   */
  snapshot?: SnapshotOptions | false;
  /**
   * Fault tests only: called at each crash point of the cycle (src/processor/crash-points.ts);
   * `redfence run` sets it from `REDFENCE_CRASH_AT`. Default: none.
   * @internal
   */
  crashHook?: CrashHook;
}

/** The shared options the processor takes. */
type Shared = Extract<keyof ProcessorOptions, RuntimeField>;

/** The options after validation, with every default filled in. */
export interface ResolvedOptions extends Pick<ResolvedRuntimeOptions, Shared> {
  readonly definition: ProcessorDefinition<unknown, unknown>;
  readonly redis: Redis | Cluster;
  readonly cluster: boolean;
  readonly mode: ProcessingMode;
  readonly fencing: FencingMode;
  readonly userRetries: number;
  readonly requireNoEviction: boolean;
  readonly ownerCache: OwnerCacheOptions | undefined;
  readonly waitReplicas: WaitReplicasOptions | undefined;
  readonly sweepEvery: number;
  readonly sweepIntervalMs: number;
  readonly groupCommitRecords: number;
  readonly partitionsInFlight: number;
  readonly commitIntervalMs: number;
  readonly watchdog: Required<WatchdogOptions> | undefined;
  /** -1: the broker's default. */
  readonly replicationFactor: number;
  readonly deadLetterTopic: string;
  readonly snapshot: ResolvedSnapshot | undefined;
  readonly crashHook: CrashHook | undefined;
}

// Every option at every level, checked by the compiler against the interfaces so the lists cannot drift.
const SHARED: Record<Shared, true> = {
  kafka: true,
  groupId: true,
  instanceId: true,
  logger: true,
  metrics: true,
  health: true,
  onFatal: true,
  tracing: true,
  createTopics: true,
};
const OWN: Record<Exclude<keyof ProcessorOptions, Shared>, true> = {
  definition: true,
  redis: true,
  mode: true,
  fencing: true,
  userRetries: true,
  requireNoEviction: true,
  ownerCache: true,
  waitReplicas: true,
  sweepEvery: true,
  sweepIntervalMs: true,
  groupCommitRecords: true,
  partitionsInFlight: true,
  commitIntervalMs: true,
  watchdog: true,
  replicationFactor: true,
  snapshot: true,
  crashHook: true,
};
const WATCHDOG_NAMES: Record<keyof WatchdogOptions, true> = {
  stallMs: true,
  intervalMs: true,
  maxRecoveries: true,
};
const WAIT_NAMES: Record<keyof WaitReplicasOptions, true> = { replicas: true, timeoutMs: true };
/** Owner-local state's bound (a processor's reducer, a topology's reduce and aggregate). */
export interface OwnerCacheOptions {
  /** The keys' and values' lengths plus a fixed amount per entry, at most. */
  maxBytes: number;
}

/** The owner cache's default bound: about 16 MiB of keys and state. */
export const OWNER_CACHE_BYTES = 16 * 1024 * 1024;

/** The `ownerCache` option, checked: undefined when `false` (off); the default bound when absent. */
export function ownerCacheOption(v: unknown): OwnerCacheOptions | undefined {
  if (v === false) return undefined;
  if (v === undefined) return { maxBytes: OWNER_CACHE_BYTES };
  if (!isObject(v) || v.maxBytes === undefined || Object.keys(v).some((k) => k !== 'maxBytes'))
    throw invalid('option "ownerCache" must be { maxBytes: n } or false');
  return { maxBytes: integer('ownerCache.maxBytes', v.maxBytes, 1, Number.MAX_SAFE_INTEGER, 1) };
}

/** The `watchdog` option of a processor or topology processor, checked (RF_INVALID_OPTIONS naming it). */
export function watchdogOptions(v: unknown): Required<WatchdogOptions> | undefined {
  if (v === false) return undefined;
  if (v !== undefined && !isObject(v))
    throw invalid(`option "watchdog" must be an object or false, got ${shown(v)}`);
  const w = v ?? {};
  checkKeys('watchdog', w, WATCHDOG_NAMES);
  return {
    stallMs: integer('watchdog.stallMs', w.stallMs, 1, MAX_TIMER_MS, 60_000),
    intervalMs: integer('watchdog.intervalMs', w.intervalMs, 1, MAX_TIMER_MS, 10_000),
    maxRecoveries: integer('watchdog.maxRecoveries', w.maxRecoveries, 0, Number.MAX_SAFE_INTEGER, 3),
  };
}

/** Checks `waitReplicas` (the processor's and the topology processor's): RF_INVALID_OPTIONS naming the field. */
export function waitReplicasOption(v: unknown): WaitReplicasOptions | undefined {
  if (v === undefined) return undefined;
  if (!isObject(v)) throw invalid(`option "waitReplicas" must be { replicas, timeoutMs }, got ${shown(v)}`);
  checkKeys('waitReplicas', v, WAIT_NAMES);
  if (v.replicas === undefined || v.timeoutMs === undefined)
    throw invalid('option "waitReplicas" needs both "replicas" and "timeoutMs"');
  return {
    replicas: integer('waitReplicas.replicas', v.replicas, 1, 1000, 0),
    // WAIT with timeout 0 blocks forever: a lost replica would stall the processor with no error
    timeoutMs: integer('waitReplicas.timeoutMs', v.timeoutMs, 1, MAX_TIMER_MS, 0),
  };
}

/** Validates every option and fills in the defaults. Throws RF_INVALID_OPTIONS naming the option. */
export function resolveOptions<T, S>(options: ProcessorOptions<T, S>): ResolvedOptions {
  if (!isObject(options)) throw invalid('processor options must be an object');
  const o = options as unknown as Record<string, unknown>;
  const definition = defineProcessor(options.definition) as unknown as ProcessorDefinition<unknown, unknown>;
  const shared = resolveRuntimeOptions(o, {
    what: 'processor',
    fields: SHARED,
    own: OWN,
    groupId: `redfence-${definition.store}`,
    metricsMethods: ['verdict', 'commit', 'redisOutage'],
  });
  if (!isObject(o.redis) || typeof o.redis.config !== 'function')
    throw invalid('option "redis" must be an ioredis Redis or Cluster');
  const redis = options.redis;
  const cluster = redis instanceof Cluster;
  const mode = oneOf('mode', o.mode, PROCESSING_MODES, 'exactly-once');
  const fencing = oneOf<FencingMode>(
    'fencing',
    o.fencing,
    ['strict', 'cluster'],
    cluster ? 'cluster' : 'strict',
  );
  if (cluster && fencing === 'strict')
    throw invalid(
      "option \"fencing\" is 'strict', which reads the partition's epoch key in the same script as the state key; on Redis Cluster the two are in different hash slots: use 'cluster'",
    );
  const rf = o.replicationFactor;
  if (
    rf !== undefined &&
    rf !== -1 &&
    !(typeof rf === 'number' && Number.isSafeInteger(rf) && rf >= 1 && rf <= 32_767)
  )
    throw invalid(
      `option "replicationFactor" must be an integer from 1 to 32767, or -1 for the broker's default, got ${shown(rf)}`,
    );
  const replicationFactor = rf === undefined ? -1 : (rf as number);
  return {
    ...shared,
    definition,
    redis,
    cluster,
    mode,
    fencing,
    userRetries: integer('userRetries', o.userRetries, 0, 1000, 3),
    requireNoEviction: bool('requireNoEviction', o.requireNoEviction, true),
    ownerCache: ownerCacheOption(o.ownerCache),
    waitReplicas: waitReplicasOption(o.waitReplicas),
    sweepEvery: integer('sweepEvery', o.sweepEvery, 1, Number.MAX_SAFE_INTEGER, 20),
    sweepIntervalMs: integer('sweepIntervalMs', o.sweepIntervalMs, 1, MAX_TIMER_MS, 5000),
    groupCommitRecords: integer('groupCommitRecords', o.groupCommitRecords, 0, Number.MAX_SAFE_INTEGER, 2000),
    partitionsInFlight: integer('partitionsInFlight', o.partitionsInFlight, 1, 64, 1),
    commitIntervalMs: integer(
      'commitIntervalMs',
      o.commitIntervalMs,
      0,
      60_000,
      defaultCommitIntervalMs(mode),
    ),
    watchdog: watchdogOptions(o.watchdog),
    replicationFactor,
    deadLetterTopic: definition.deadLetter ?? `${definition.input}.DLT`,
    snapshot: snapshotOptions(o.snapshot, definition.store, 'port' in shared.kafka),
    crashHook: o.crashHook === undefined ? undefined : (fn('crashHook', o.crashHook) as unknown as CrashHook),
  };
}

/**
 * The default least time between two Kafka steps: 100 ms in exactly-once mode, where each step is a
 * transaction (Kafka Streams' exactly_once_v2 default; docs/benchmarks.md measures it), 0 otherwise.
 */
export function defaultCommitIntervalMs(mode: ProcessingMode): number {
  return mode === 'exactly-once' ? 100 : 0;
}
