/**
 * The invalidation consumer's options: a handler's (src/handler/options.ts, which checks the options
 * every runtime shares through src/runtime/options.ts) without the ones for handle calls, plus its
 * Redis and pipeline settings. Checked once, at construction, before any connection; errors are
 * RF_INVALID_OPTIONS naming the option, and unknown ones name this consumer and list its options.
 */
import { Cluster, type Redis } from 'ioredis';
import { defineHandler } from '../definition/handler.js';
import type { InvalidationDefinition } from '../definition/invalidation.js';
import {
  type HandlerOptions,
  type HandlerVariant,
  type ResolvedHandlerOptions,
  resolveHandlerOptions,
} from '../handler/options.js';
import type { MetricsRegistry } from '../metrics/index.js';
import { Checker, invalid } from '../options/checks.js';

export interface InvalidationOptions
  extends Omit<
    HandlerOptions,
    | 'redis'
    | 'postgres'
    | 'onceTtlMs'
    | 'concurrency'
    | 'maxInFlight'
    | 'maxInFlightPerPartition'
    | 'maxPerKey'
  > {
  /** Where the caches are: an ioredis Redis or Cluster (not closed by the consumer). */
  redis: Redis | Cluster;
  /** Deadline of one pipeline, in ms; past it its batch is tried again. Default 1000. */
  redisTimeoutMs?: number;
  /** Most entries in one pipeline. Default 1000. */
  maxKeysPerPipeline?: number;
  /** Registry of the invalidation metrics. Default: `metrics.registry`, else a private one. */
  registry?: MetricsRegistry;
  /** Accepted for compatibility and ignored: batches, not concurrent calls, set the pace. */
  concurrency?: number;
  maxInFlight?: number;
  maxInFlightPerPartition?: number;
  maxPerKey?: number;
}

/** The options after validation: the handler's, with the consumer's own. */
export interface ResolvedInvalidationOptions extends ResolvedHandlerOptions {
  readonly redis: Redis | Cluster;
  readonly redisTimeoutMs: number;
  readonly maxKeysPerPipeline: number;
  readonly registry: MetricsRegistry | undefined;
}

/** The options only this consumer takes; the handler's table checks the rest. */
const OWN = { redis: true, redisTimeoutMs: true, maxKeysPerPipeline: true, registry: true } as const;
const WHERE = 'invalidation consumer';
const VARIANT: HandlerVariant = { what: WHERE, own: OWN };

/** Validates every option and fills in the defaults. Throws RF_INVALID_OPTIONS naming the option. */
export function resolveInvalidationOptions(
  d: InvalidationDefinition<unknown>,
  options: InvalidationOptions,
): ResolvedInvalidationOptions {
  const c = new Checker(WHERE);
  if (typeof options !== 'object' || options === null) throw invalid(WHERE, 'options must be an object');
  const o = options as unknown as Record<string, unknown>;
  const redis = c.client<Redis | Cluster>('redis', o.redis, [
    'pipeline',
    'evalsha',
    'evalshaBuffer',
    'evalBuffer',
  ]);
  const redisTimeoutMs = c.integer('redisTimeoutMs', o.redisTimeoutMs, 1, 600_000, 1000);
  const maxKeysPerPipeline = c.integer('maxKeysPerPipeline', o.maxKeysPerPipeline, 1, 100_000, 1000);
  const rest: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (!Object.hasOwn(OWN, k)) rest[k] = v;
  // the handler's table checks the rest (kafka, groupId, retry, logger, metrics...), the shared ones once
  const resolved = resolveHandlerOptions(
    defineHandler<unknown>({
      input: d.input.topic,
      name: d.name,
      ...(d.input.deadLetter === undefined ? {} : { deadLetter: d.input.deadLetter }),
      handle: async () => undefined,
    }),
    rest as unknown as HandlerOptions,
    VARIANT,
  );
  if (resolved.retry.topics !== undefined)
    throw invalid(
      WHERE,
      'option "retry.topics" does not apply: a bad event is dead-lettered at once, Redis down is retried in place',
    );
  if (resolved.retry.attemptTimeoutMs !== 0)
    throw invalid(
      WHERE,
      'option "retry.attemptTimeoutMs" does not apply: there is no handle call; redisTimeoutMs bounds a pipeline',
    );
  return {
    ...resolved,
    redis,
    cluster: redis instanceof Cluster,
    redisTimeoutMs,
    maxKeysPerPipeline,
    registry: o.registry as MetricsRegistry | undefined,
  };
}
