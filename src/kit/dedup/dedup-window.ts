/**
 * A dedup window for consumers: `seen(id)` marks an event id with `SET NX PX windowMs` and answers
 * whether it was already marked. A FRONT FILTER, not a guarantee: the mark is not atomic with the work
 * it filters (a crash between the mark and the work skips the work on redelivery unless `forget` ran),
 * it is gone after the window, and Redis losing it (failover, eviction, a flush) lets the duplicate
 * through. Put it in front of an inbox table or a version check, never instead of one.
 */
import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { RedfenceError } from '../../errors/index.js';
import type { ScriptRedis } from '../../fence/script-runner.js';
import type { KeyEncoding } from '../../keys/keys.js';
import { KitRecordKeys } from '../../keys/kit.js';
import type { MetricsRegistry } from '../../metrics/index.js';
import { Checker, invalid, MAX_TIMER_MS, shown } from '../../options/checks.js';
import { KitMetrics } from '../common/metrics.js';
import { checkPolicy, int, KitScripts, type RedisPolicyOptions } from '../common/scripts.js';

export interface DedupWindowOptions {
  redis: Redis | Cluster;
  /** Names the window in keys and metrics (a consumer group, a handler): `[A-Za-z0-9_.-]{1,52}`. */
  name: string;
  /** `[A-Za-z0-9_.-]{1,64}`: the tenant every mark belongs to. */
  tenant: string;
  /** How long a mark lives, in ms. Required. */
  windowMs: number;
  keyEncoding?: KeyEncoding;
  /** `'fail-closed'` (default): throw RF_REDIS_UNAVAILABLE. `'fail-open'`: answer `false` (not seen: process it). */
  onRedisDown?: 'fail-open' | 'fail-closed';
  redisPolicy?: RedisPolicyOptions;
  metrics?: { registry?: MetricsRegistry };
}

const NAMES = [
  'redis',
  'name',
  'tenant',
  'windowMs',
  'keyEncoding',
  'onRedisDown',
  'redisPolicy',
  'metrics',
] as const satisfies readonly (keyof DedupWindowOptions)[];

export class DedupWindow {
  readonly name: string;
  readonly windowMs: number;
  readonly #keys: KitRecordKeys;
  readonly #scripts: KitScripts;
  readonly #metrics: KitMetrics;
  readonly #open: boolean;

  constructor(options: DedupWindowOptions) {
    const o = new Checker('dedup window').object('', options, NAMES);
    if (typeof o.name !== 'string' || !/^[A-Za-z0-9_.-]{1,52}$/.test(o.name)) {
      throw invalid('dedup window', `option "name" must match [A-Za-z0-9_.-]{1,52}, got ${shown(o.name)}`);
    }
    this.name = o.name;
    const c = new Checker(`dedup window "${this.name}"`);
    const redis = c.client<ScriptRedis>('redis', o.redis, ['evalshaBuffer', 'evalBuffer']);
    if (typeof o.tenant !== 'string' || !/^[A-Za-z0-9_.-]{1,64}$/.test(o.tenant)) {
      throw invalid(c.where, `option "tenant" must match [A-Za-z0-9_.-]{1,64}, got ${shown(o.tenant)}`);
    }
    this.windowMs = c.integer('windowMs', o.windowMs, 1, MAX_TIMER_MS);
    this.#keys = new KitRecordKeys('dedup', this.name, o.tenant, {
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

  /** Marks `id` for `windowMs`; true when it was already marked (skip it), false on its first sighting. */
  async seen(id: string | Uint8Array): Promise<boolean> {
    const mark = this.#keys.part(id, 'm');
    let reply: unknown;
    try {
      // The token makes a retried call (reply lost) answer as its first run did.
      reply = await this.#scripts.run('dedupSeen', [mark], [this.windowMs, randomBytes(12).toString('hex')]);
    } catch (err) {
      if (!this.#open || !RedfenceError.is(err, 'RF_REDIS_UNAVAILABLE')) {
        this.#metrics.redisError('dedup', 'closed');
        throw err;
      }
      this.#metrics.redisError('dedup', 'open');
      return false;
    }
    const dup = int([reply], 0) === 1;
    this.#metrics.inc('dedup_checks_total', 'Dedup window checks, by outcome (first or duplicate).', {
      outcome: dup ? 'duplicate' : 'first',
    });
    return dup;
  }

  /** Removes `id`'s mark (its work failed and must be redone on redelivery). Fails closed. */
  async forget(id: string | Uint8Array): Promise<boolean> {
    const mark = this.#keys.part(id, 'm');
    try {
      return int([await this.#scripts.run('dedupForget', [mark], [])], 0) === 1;
    } catch (err) {
      this.#metrics.redisError('dedup', 'closed');
      throw err;
    }
  }
}
