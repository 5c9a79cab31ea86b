/**
 * A handler's options: types, defaults and validation, in the processor's style (src/processor/
 * options.ts): checked once, before any connection; RF_INVALID_OPTIONS names the option's path;
 * unknown keys are refused at every level (a `keyof` table keeps the lists from drifting). The options
 * every runtime shares (kafka, groupId, logger, closeTimeoutMs, ...) are declared and checked in
 * src/runtime/options.ts; the invalidation consumer resolves its options through this file too.
 */
import { Cluster, type Redis } from 'ioredis';
import { defineHandler, type HandlerDefinition } from '../definition/handler.js';
import {
  checkKeys,
  integer,
  invalid,
  isObject,
  MAX_TIMER_MS,
  shown,
  text,
  withMethods,
} from '../options/checks.js';
import {
  type ResolvedRetryTopics,
  type RetryTopicsOptions,
  resolveRetryTopics,
} from '../retry/retry-topics.js';
import {
  type ResolvedRuntimeOptions,
  type RuntimeField,
  type RuntimeOptions,
  resolveRuntimeOptions,
} from '../runtime/options.js';
import { quotedTable, type SqlPool } from './postgres.js';

export interface RetryOptions {
  /** Tries of one record in place, in all (the first included), before it is dead-lettered or, with `topics`, forwarded to the next retry topic. Default 4; 1 with `topics`. */
  attempts?: number;
  /** Backoff before the first retry, doubled each time (full jitter). Default 200. */
  baseMs?: number;
  /** Longest backoff. Default 10000. */
  maxMs?: number;
  /**
   * Longest one `handle` call may take, in ms; 0 (the default) sets none. Past it `ctx.signal` aborts
   * with an RF_HANDLER_TIMEOUT reason, and when the call settles by throwing, the attempt has failed
   * with RF_HANDLER_TIMEOUT (retriable: retried, forwarded or dead-lettered as any retriable failure).
   * A call that ignores the signal keeps its slot and its key until it returns: no second call of a
   * record, or of a later record of its key, starts meanwhile.
   */
  attemptTimeoutMs?: number;
  /** Non-blocking retries through retry topics, Spring Kafka's layout (docs/handlers.md "Retry topics"). */
  topics?: RetryTopicsOptions;
}

export interface ResolvedRetry {
  readonly attempts: number;
  readonly baseMs: number;
  readonly maxMs: number;
  /** 0: none. */
  readonly attemptTimeoutMs: number;
  readonly topics: ResolvedRetryTopics | undefined;
}

export interface PostgresOptions {
  /** A pg Pool (or anything with `connect()` giving a client with `query` and `release`); not closed by the handler. */
  pool: SqlPool;
  /** The processed-ids table, `<table>` or `<schema>.<table>`. Default `redfence_processed`. */
  table?: string;
}

/** A handler's options: the shared ones (`RuntimeOptions`: kafka, groupId, logger, closeTimeoutMs, ...) and its own. */
export interface HandlerOptions extends RuntimeOptions {
  /** For `ctx.once` (and the partition epochs that fence it). The handler does not close it. */
  redis?: Redis | Cluster;
  /** For `ctx.transaction`. */
  postgres?: PostgresOptions;
  /** Most `handle` calls running at once in this instance. Default 64. */
  concurrency?: number;
  /** Most records accepted and not finished in this instance; past it every partition pauses. Default 5000. */
  maxInFlight?: number;
  /** Most accepted, unfinished records of one partition; past it the partition pauses. Default 1000. */
  maxInFlightPerPartition?: number;
  /** Most records waiting for one key (they run one at a time, in order); past it the key's partition pauses. Default 100. */
  maxPerKey?: number;
  retry?: RetryOptions;
  /** How often finished offsets are committed. Default 1000. */
  commitIntervalMs?: number;
  /** On revocation, how long running calls get to finish before they are abandoned (on close(): `closeTimeoutMs`). Default 10000. */
  drainTimeoutMs?: number;
  /** How long a `ctx.once` done marker is kept in Redis. Default 7 days. */
  onceTtlMs?: number;
}

export interface ResolvedHandlerOptions extends ResolvedRuntimeOptions {
  readonly definition: HandlerDefinition<unknown>;
  readonly redis: Redis | Cluster | undefined;
  readonly cluster: boolean;
  readonly postgres: { readonly pool: SqlPool; readonly table: string } | undefined;
  readonly concurrency: number;
  readonly maxInFlight: number;
  readonly maxInFlightPerPartition: number;
  readonly maxPerKey: number;
  readonly retry: ResolvedRetry;
  readonly commitIntervalMs: number;
  readonly drainTimeoutMs: number;
  readonly onceTtlMs: number;
  readonly deadLetterTopic: string;
}

// Every option, checked by the compiler against the interfaces so the lists cannot drift.
const SHARED: Record<RuntimeField, true> = {
  kafka: true,
  groupId: true,
  instanceId: true,
  logger: true,
  metrics: true,
  health: true,
  onFatal: true,
  tracing: true,
  createTopics: true,
  closeTimeoutMs: true,
};
const OWN: Record<Exclude<keyof HandlerOptions, RuntimeField>, true> = {
  redis: true,
  postgres: true,
  concurrency: true,
  maxInFlight: true,
  maxInFlightPerPartition: true,
  maxPerKey: true,
  retry: true,
  commitIntervalMs: true,
  drainTimeoutMs: true,
  onceTtlMs: true,
};
const RETRY_NAMES: Record<keyof RetryOptions, true> = {
  attempts: true,
  baseMs: true,
  maxMs: true,
  attemptTimeoutMs: true,
  topics: true,
};
const POSTGRES_NAMES: Record<keyof PostgresOptions, true> = { pool: true, table: true };

/**
 * A runtime whose options are a handler's (the invalidation consumer): its name in messages and the
 * options it adds (checked by it, listed among the known ones).
 */
export interface HandlerVariant {
  readonly what: string;
  readonly own: Readonly<Record<string, true>>;
}
const HANDLER: HandlerVariant = { what: 'handler', own: {} };

function retryOptions(v: unknown, declared: unknown, what: string): ResolvedRetry {
  if (v !== undefined && !isObject(v)) throw invalid(`option "retry" must be an object, got ${shown(v)}`);
  const r = v ?? {};
  checkKeys('retry', r, RETRY_NAMES, what);
  const baseMs = integer('retry.baseMs', r.baseMs, 1, MAX_TIMER_MS, 200);
  const maxMs = integer('retry.maxMs', r.maxMs, 1, MAX_TIMER_MS, Math.max(10_000, baseMs));
  if (maxMs < baseMs) throw invalid(`option "retry.maxMs" (${maxMs}) must be >= "retry.baseMs" (${baseMs})`);
  const attemptTimeoutMs = integer('retry.attemptTimeoutMs', r.attemptTimeoutMs, 0, MAX_TIMER_MS, 0);
  const topics = resolveRetryTopics(r.topics ?? declared, what);
  return {
    attempts: integer('retry.attempts', r.attempts, 1, 1000, topics ? 1 : 4),
    baseMs,
    maxMs,
    attemptTimeoutMs,
    topics,
  };
}

function postgresOptions(v: unknown, what: string): ResolvedHandlerOptions['postgres'] {
  if (v === undefined) return undefined;
  if (!isObject(v)) throw invalid(`option "postgres" must be { pool, table? }, got ${shown(v)}`);
  checkKeys('postgres', v, POSTGRES_NAMES, what);
  const pool = withMethods<SqlPool>('postgres.pool', v.pool, ['connect'], 'a pg Pool');
  if (pool === undefined) throw invalid('option "postgres.pool" is required (a pg Pool)');
  const table = text('postgres.table', v.table) ?? 'redfence_processed';
  quotedTable(table);
  return { pool, table };
}

/** Validates every option and fills in the defaults. Throws RF_INVALID_OPTIONS naming the option. */
export function resolveHandlerOptions<T>(
  definition: HandlerDefinition<T>,
  options: HandlerOptions,
  variant: HandlerVariant = HANDLER,
): ResolvedHandlerOptions {
  const d = defineHandler(definition) as HandlerDefinition<unknown>;
  const { what } = variant;
  const shared = resolveRuntimeOptions(options, {
    what,
    fields: SHARED,
    own: { ...OWN, ...variant.own },
    groupId: `redfence-handler-${d.name}`,
    closeTimeoutMs: 30_000,
    metricsMethods: ['handlerInFlight', 'handlerRecord', 'deadLetter'],
  });
  const o = options as unknown as Record<string, unknown>;
  if (o.redis !== undefined && (!isObject(o.redis) || typeof o.redis.config !== 'function'))
    throw invalid('option "redis" must be an ioredis Redis or Cluster');
  const redis = o.redis as Redis | Cluster | undefined;
  const maxInFlight = integer('maxInFlight', o.maxInFlight, 1, 10_000_000, 5000);
  const maxInFlightPerPartition = integer(
    'maxInFlightPerPartition',
    o.maxInFlightPerPartition,
    1,
    10_000_000,
    Math.min(1000, maxInFlight),
  );
  const retry = retryOptions(o.retry, d.retry?.topics, what);
  if (retry.topics?.keyOrder && redis === undefined)
    throw invalid(
      'option "retry.topics.keyOrder" needs the option "redis" (the blocked keys are kept there)',
    );
  return {
    ...shared,
    definition: d,
    redis,
    cluster: redis instanceof Cluster,
    postgres: postgresOptions(o.postgres, what),
    concurrency: integer('concurrency', o.concurrency, 1, 100_000, 64),
    maxInFlight,
    maxInFlightPerPartition,
    maxPerKey: integer('maxPerKey', o.maxPerKey, 1, 10_000_000, 100),
    retry,
    commitIntervalMs: integer('commitIntervalMs', o.commitIntervalMs, 1, 60_000, 1000),
    drainTimeoutMs: integer('drainTimeoutMs', o.drainTimeoutMs, 0, MAX_TIMER_MS, 10_000),
    onceTtlMs: integer('onceTtlMs', o.onceTtlMs, 1000, Number.MAX_SAFE_INTEGER, 7 * 24 * 3600 * 1000),
    deadLetterTopic: d.deadLetter ?? `${d.input}.DLT`,
  };
}
