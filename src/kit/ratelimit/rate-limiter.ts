/**
 * A GCRA rate limiter in Lua on Redis's clock (never a client's): `rate` calls per `periodMs`, up to
 * `burst` at once, per tenant and id. `consume` answers allowed / remaining / retryAfterMs /
 * resetAfterMs and never waits: a producer or HTTP handler refuses with retryAfterMs (429), and a
 * consumer can pause a partition for retryAfterMs instead of blocking its poll loop. See docs/kit.md.
 */
import type { Cluster, Redis } from 'ioredis';
import { RedfenceError } from '../../errors/index.js';
import type { ScriptRedis } from '../../fence/script-runner.js';
import type { KeyEncoding } from '../../keys/keys.js';
import { type KitKey, KitKeys } from '../../keys/kit.js';
import type { MetricsRegistry } from '../../metrics/index.js';
import { Checker, invalid, shown } from '../../options/checks.js';
import { KitMetrics } from '../common/metrics.js';
import { checkPolicy, int, KitScripts, type RedisPolicyOptions } from '../common/scripts.js';

/** A limit: `rate` calls per `periodMs`, at most `burst` at once. */
export interface RateLimit {
  rate: number;
  /** Default 1000. */
  periodMs?: number;
  /** Calls admitted at once (the bucket's size), >= 1. */
  burst: number;
}

export interface RateLimiterOptions extends RateLimit {
  redis: Redis | Cluster;
  /** Names the limiter in keys and metrics: `[A-Za-z0-9_.-]{1,58}`. */
  name: string;
  /** `'hash'` when ids carry personal data (user ids, IPs). Default `'auto'`. */
  keyEncoding?: KeyEncoding;
  /** `'fail-closed'` (default): throw RF_REDIS_UNAVAILABLE. `'fail-open'`: admit, with `degraded: true`. */
  onRedisDown?: 'fail-open' | 'fail-closed';
  /** Deadline and retries of each Redis call (a retried call may be charged twice: errs towards limiting). */
  redisPolicy?: RedisPolicyOptions;
  metrics?: { registry?: MetricsRegistry };
}

export interface ConsumeOptions {
  /** Default 1; at most the limit's burst. */
  cost?: number;
  /** Another limit for this call (e.g. the tenant's plan); default the limiter's. */
  limit?: RateLimit;
}

export interface RateLimitResult {
  allowed: boolean;
  /** Calls of cost 1 that would be admitted right after this one. */
  remaining: number;
  /** When this call would be admitted, in ms (0 when it was). */
  retryAfterMs: number;
  /** When the limiter is back to a full burst, in ms. */
  resetAfterMs: number;
  /** True when Redis was down and the call was admitted by `onRedisDown: 'fail-open'`. */
  degraded: boolean;
}

interface Resolved {
  intervalUs: number;
  burst: number;
}

const NAMES = [
  'redis',
  'name',
  'rate',
  'periodMs',
  'burst',
  'keyEncoding',
  'onRedisDown',
  'redisPolicy',
  'metrics',
] as const satisfies readonly (keyof RateLimiterOptions)[];

function checkLimit(c: Checker, path: string, l: Record<string, unknown>): Resolved {
  const p = path === '' ? '' : `${path}.`;
  const rate = c.number(`${p}rate`, l.rate, 0.000001, 1e9);
  const periodMs = c.integer(`${p}periodMs`, l.periodMs, 1, 86_400_000 * 366, 1000);
  const burst = c.integer(`${p}burst`, l.burst, 1, 1e9);
  return { intervalUs: (periodMs * 1000) / rate, burst };
}

export class RateLimiter {
  readonly name: string;
  readonly #c: Checker;
  readonly #limit: Resolved;
  readonly #keys: KitKeys;
  readonly #scripts: KitScripts;
  readonly #metrics: KitMetrics;
  readonly #open: boolean;

  constructor(options: RateLimiterOptions) {
    const o = new Checker('rate limiter').object('', options, NAMES);
    if (typeof o.name !== 'string' || !/^[A-Za-z0-9_.-]{1,58}$/.test(o.name)) {
      throw invalid('rate limiter', `option "name" must match [A-Za-z0-9_.-]{1,58}, got ${shown(o.name)}`);
    }
    this.name = o.name;
    const c = new Checker(`rate limiter "${this.name}"`);
    this.#c = c;
    const redis = c.client<ScriptRedis>('redis', o.redis, ['evalshaBuffer', 'evalBuffer']);
    this.#limit = checkLimit(c, '', o);
    this.#keys = new KitKeys('ratelimit', this.name, {
      keyEncoding: c.oneOf<KeyEncoding>('keyEncoding', o.keyEncoding, ['auto', 'hash'], 'auto'),
    });
    this.#open =
      c.oneOf('onRedisDown', o.onRedisDown, ['fail-open', 'fail-closed'], 'fail-closed') === 'fail-open';
    this.#scripts = new KitScripts(import.meta.url, redis, checkPolicy(c, 'redisPolicy', o.redisPolicy));
    this.#metrics = new KitMetrics(
      this.name,
      c.object('metrics', o.metrics, ['registry']).registry as MetricsRegistry | undefined,
    );
  }

  get registry(): MetricsRegistry {
    return this.#metrics.registry;
  }

  /** Charges `cost` to `key` if the limit admits it now; never waits. */
  async consume(key: KitKey, options: ConsumeOptions = {}): Promise<RateLimitResult> {
    const o = this.#c.object('consume options', options, ['cost', 'limit']);
    const limit =
      o.limit === undefined
        ? this.#limit
        : checkLimit(this.#c, 'limit', this.#c.object('limit', o.limit, ['rate', 'periodMs', 'burst']));
    const cost = o.cost === undefined ? 1 : o.cost;
    if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 0 || cost > limit.burst) {
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        `rate limiter "${this.name}": cost must be an integer from 0 to the burst (${limit.burst}), got ${shown(cost)}`,
      );
    }
    const [tat] = this.#keys.parts(key, 'tat') as [string];
    let reply: unknown;
    try {
      reply = await this.#scripts.run('gcra', [tat], [String(limit.intervalUs), limit.burst, cost]);
    } catch (err) {
      if (!this.#open || !RedfenceError.is(err, 'RF_REDIS_UNAVAILABLE')) {
        this.#metrics.redisError('ratelimit', 'closed');
        throw err;
      }
      this.#metrics.redisError('ratelimit', 'open');
      return { allowed: true, remaining: 0, retryAfterMs: 0, resetAfterMs: 0, degraded: true };
    }
    const allowed = int(reply, 0) === 1;
    this.#metrics.inc(
      allowed ? 'ratelimit_allowed_total' : 'ratelimit_limited_total',
      allowed ? 'Calls the rate limit admitted.' : 'Calls the rate limit refused.',
    );
    return {
      allowed,
      remaining: int(reply, 1),
      retryAfterMs: int(reply, 2),
      resetAfterMs: int(reply, 3),
      degraded: false,
    };
  }

  /** `consume`, throwing RF_KIT_RATE_LIMITED (details.retryAfterMs) when refused. */
  async take(key: KitKey, options: ConsumeOptions = {}): Promise<RateLimitResult> {
    const r = await this.consume(key, options);
    if (r.allowed) return r;
    throw new RedfenceError(
      'RF_KIT_RATE_LIMITED',
      `rate limiter "${this.name}" refused the call; retry in ${r.retryAfterMs} ms`,
      {
        details: { retryAfterMs: r.retryAfterMs, resetAfterMs: r.resetAfterMs },
      },
    );
  }
}
