/**
 * redfence/kit: Redis patterns beside Kafka, each in its own room — a read-through cache with
 * cross-process single-flight and its invalidation consumer, fenced locks, GCRA rate limits and
 * version-aware projections. Every key
 * is built by src/keys/kit.ts (tenant-scoped, `rf:`, one hash slot per entry). See docs/kit.md.
 */

export {
  type CacheRef,
  createInvalidation,
  defineInvalidation,
  InvalidationConsumer,
  type InvalidationDefinition,
  type InvalidationKey,
  type InvalidationOptions,
  type InvalidationState,
} from '../invalidation/index.js';
export type { KitKey } from '../keys/kit.js';
export {
  Cache,
  type CacheCodec,
  type CacheOptions,
  type CacheReadOptions,
  type CacheRedis,
  type CacheSubscriber,
} from './cache/index.js';
export type { RedisPolicyOptions } from './common/scripts.js';
export { DedupWindow, type DedupWindowOptions } from './dedup/index.js';
export {
  createIdempotencyMiddleware,
  fingerprint,
  type IdempotencyCodec,
  type IdempotencyMiddlewareOptions,
  type IdempotencyResult,
  IdempotencyStore,
  type IdempotencyStoreOptions,
  type IdempotentHandler,
  type IdempotentResponse,
  type PgPool,
  type PgQueryable,
} from './idempotency/index.js';
export {
  type AcquireOptions,
  checkFencingToken,
  FencedStore,
  type FencedStoreOptions,
  type Lock,
  type LockLostReason,
  LockManager,
  type LockOptions,
} from './lock/index.js';
export {
  Projection,
  type ProjectionCodec,
  type ProjectionOptions,
  type UpdateResult,
  type Version,
} from './projection/index.js';
export {
  type ConsumeOptions,
  type RateLimit,
  RateLimiter,
  type RateLimiterOptions,
  type RateLimitResult,
} from './ratelimit/index.js';
