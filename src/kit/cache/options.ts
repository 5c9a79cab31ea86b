/** Options of the read-through cache, checked once at construction (and per call) before any Redis call. */

import type { Cluster, Redis } from 'ioredis';
import type { ScriptRedis } from '../../fence/script-runner.js';
import type { KeyEncoding } from '../../keys/keys.js';
import type { MetricsRegistry } from '../../metrics/index.js';
import { Checker, invalid, MAX_TIMER_MS, shown } from '../../options/checks.js';
import { checkPolicy, type RedisPolicy, type RedisPolicyOptions } from '../common/scripts.js';

/** Turns values into bytes and back. Default: JSON. */
export interface CacheCodec<V> {
  encode(value: V): string | Buffer;
  decode(bytes: Buffer): V;
}

/** What the cache needs of its subscriber connection (ioredis provides it). */
export interface CacheSubscriber {
  subscribe(channel: string): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  on(event: 'message', listener: (channel: string, message: string) => void): unknown;
  disconnect(): void;
}

/** The client: ioredis' Redis or Cluster (scripts, plus `duplicate()` for the subscriber unless one is given). */
export type CacheRedis = Redis | Cluster;
/** What the cache uses of it. */
export type CacheRedisUse = ScriptRedis & { duplicate?: () => unknown };

export interface CacheReadOptions {
  /** How long a loaded value is fresh, in ms. Required (here or at construction). */
  ttlMs?: number;
  /** After that, how long it is still served while one caller reloads it. Default 0. */
  staleWhileRevalidateMs?: number;
  /** A random 0..jitterMs added to each entry's ttl, so entries loaded together do not expire together. Default 0. */
  jitterMs?: number;
}

export interface CacheOptions<V> extends CacheReadOptions {
  redis: CacheRedis;
  /** Names the cache in keys and metrics: `[A-Za-z0-9_.-]`, at most 58 characters. */
  name: string;
  codec?: CacheCodec<V>;
  /** `'hash'` when ids carry personal data. Default `'auto'`. */
  keyEncoding?: KeyEncoding;
  /** The load lease, in ms: a loader that has not written by then loses its write. Default 10000. */
  leaseMs?: number;
  /** Longest a caller waits for another process's load before failing with RF_KIT_CACHE_WAIT_TIMEOUT. Default 2 x leaseMs. */
  waitTimeoutMs?: number;
  /** XFetch beta for early probabilistic refresh (0: off). Default 1. */
  earlyRefreshBeta?: number;
  /** `'fail-open'`: with Redis down, call the loader directly. `'fail-closed'` (default): throw RF_REDIS_UNAVAILABLE. */
  onRedisDown?: 'fail-open' | 'fail-closed';
  /** Deadline and retries of each Redis call. */
  redisPolicy?: RedisPolicyOptions;
  /** Default: `redis.duplicate()`, disconnected by `close()`. */
  subscriber?: CacheSubscriber;
  metrics?: { registry?: MetricsRegistry };
  /** Tests only: writes without the generation check (to show the race it closes). */
  unsafeSkipGenerationCheck?: boolean;
}

export interface ResolvedCacheOptions<V> {
  redis: CacheRedisUse;
  name: string;
  codec: CacheCodec<V>;
  keyEncoding: KeyEncoding;
  read: Required<CacheReadOptions> | undefined;
  defaults: CacheReadOptions;
  leaseMs: number;
  waitTimeoutMs: number;
  earlyRefreshBeta: number;
  onRedisDown: 'fail-open' | 'fail-closed';
  policy: RedisPolicy;
  subscriber: CacheSubscriber | undefined;
  registry: MetricsRegistry | undefined;
  checkGeneration: boolean;
}

const NAMES = [
  'redis',
  'name',
  'codec',
  'keyEncoding',
  'leaseMs',
  'waitTimeoutMs',
  'earlyRefreshBeta',
  'onRedisDown',
  'redisPolicy',
  'subscriber',
  'metrics',
  'unsafeSkipGenerationCheck',
  'ttlMs',
  'staleWhileRevalidateMs',
  'jitterMs',
] as const satisfies readonly (keyof CacheOptions<unknown>)[];

const JSON_CODEC: CacheCodec<unknown> = {
  encode: (v) => JSON.stringify(v) ?? 'null',
  decode: (b) => JSON.parse(b.toString('utf8')) as unknown,
};

/** Checks the per-call read options merged over the defaults. */
export function checkRead(
  c: Checker,
  o: CacheReadOptions,
  defaults: CacheReadOptions,
): Required<CacheReadOptions> {
  const ttlMs = o.ttlMs ?? defaults.ttlMs;
  return {
    ttlMs: c.integer('ttlMs', ttlMs, 1, MAX_TIMER_MS),
    staleWhileRevalidateMs: c.integer(
      'staleWhileRevalidateMs',
      o.staleWhileRevalidateMs ?? defaults.staleWhileRevalidateMs,
      0,
      MAX_TIMER_MS,
      0,
    ),
    jitterMs: c.integer('jitterMs', o.jitterMs ?? defaults.jitterMs, 0, MAX_TIMER_MS, 0),
  };
}

export function resolveCacheOptions<V>(options: CacheOptions<V>): ResolvedCacheOptions<V> {
  const pre = new Checker('cache');
  const o = pre.object('', options, NAMES);
  if (typeof o.name !== 'string' || !/^[A-Za-z0-9_.-]{1,58}$/.test(o.name)) {
    throw invalid('cache', `option "name" must match [A-Za-z0-9_.-]{1,58}, got ${shown(o.name)}`);
  }
  const c = new Checker(`cache "${o.name as string}"`);
  const leaseMs = c.integer('leaseMs', o.leaseMs, 10, MAX_TIMER_MS, 10_000);
  const codec = c.object('codec', o.codec, ['encode', 'decode']);
  if (o.codec !== undefined) {
    c.fn('codec.encode', codec.encode ?? 0);
    c.fn('codec.decode', codec.decode ?? 0);
  }
  const defaults: CacheReadOptions = {
    ttlMs: o.ttlMs as number | undefined,
    staleWhileRevalidateMs: o.staleWhileRevalidateMs as number | undefined,
    jitterMs: o.jitterMs as number | undefined,
  };
  const read = defaults.ttlMs === undefined ? undefined : checkRead(c, {}, defaults);
  if (read === undefined) {
    // Still check the other two now, so a bad one is named at construction.
    checkRead(c, { ttlMs: 1 }, defaults);
  }
  let subscriber: CacheSubscriber | undefined;
  if (o.subscriber !== undefined) {
    subscriber = c.client<CacheSubscriber>('subscriber', o.subscriber, ['subscribe', 'unsubscribe', 'on']);
  }
  const redis = c.client<CacheRedisUse>('redis', o.redis, ['evalshaBuffer', 'evalBuffer']);
  if (subscriber === undefined && typeof redis.duplicate !== 'function') {
    c.client('subscriber', undefined, ['subscribe']);
  }
  const metrics = c.object('metrics', o.metrics, ['registry']);
  return {
    redis,
    name: o.name as string,
    codec: (o.codec as CacheCodec<V> | undefined) ?? (JSON_CODEC as CacheCodec<V>),
    keyEncoding: c.oneOf('keyEncoding', o.keyEncoding, ['auto', 'hash'], 'auto'),
    read,
    defaults,
    leaseMs,
    waitTimeoutMs: c.integer('waitTimeoutMs', o.waitTimeoutMs, 1, MAX_TIMER_MS, 2 * leaseMs),
    earlyRefreshBeta: c.number('earlyRefreshBeta', o.earlyRefreshBeta, 0, 100, 1),
    onRedisDown: c.oneOf('onRedisDown', o.onRedisDown, ['fail-open', 'fail-closed'], 'fail-closed'),
    policy: checkPolicy(c, 'redisPolicy', o.redisPolicy),
    subscriber,
    registry: metrics.registry as MetricsRegistry | undefined,
    checkGeneration: !c.bool('unsafeSkipGenerationCheck', o.unsafeSkipGenerationCheck, false),
  };
}
