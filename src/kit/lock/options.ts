/** Options of fenced locks and of the fenced store, checked at construction before any Redis call. */
import type { Cluster, Redis } from 'ioredis';
import type { ScriptRedis } from '../../fence/script-runner.js';
import type { KeyEncoding } from '../../keys/keys.js';
import type { MetricsRegistry } from '../../metrics/index.js';
import { Checker, invalid, MAX_TIMER_MS, shown } from '../../options/checks.js';
import { checkPolicy, type RedisPolicy, type RedisPolicyOptions } from '../common/scripts.js';

/** Why a held lock was lost. */
export type LockLostReason =
  /** Another token holds it now (this one expired, e.g. during a pause, and was taken). */
  | 'taken'
  /** Extensions could not reach Redis until the lock's TTL ran out: it may be taken at any moment. */
  | 'expired';

export interface LockOptions {
  /** ioredis Redis or Cluster. */
  redis: Redis | Cluster;
  /** Names the lock family in keys and metrics: `[A-Za-z0-9_.-]{1,58}`. */
  name: string;
  /** How long a lock lasts unless extended, in ms. Required. */
  ttlMs: number;
  /** Extend held locks every ttlMs / 3 until released. Default true. */
  autoExtend?: boolean;
  /** Called once when a held lock is lost (its `signal` aborts at the same moment). */
  onLockLost?: (reason: LockLostReason, lock: { name: string; fencingToken: number }) => void;
  /** Pause between attempts while waiting for a held lock, in ms (jittered, never past its PTTL). Default 50. */
  retryDelayMs?: number;
  /** `'hash'` when ids carry personal data. Default `'auto'`. */
  keyEncoding?: KeyEncoding;
  /** Deadline and retries of each Redis call. Locks always fail closed: no Redis, no lock. */
  redisPolicy?: RedisPolicyOptions;
  metrics?: { registry?: MetricsRegistry };
}

export interface ResolvedLockOptions {
  redis: ScriptRedis;
  name: string;
  ttlMs: number;
  autoExtend: boolean;
  onLockLost: LockOptions['onLockLost'];
  retryDelayMs: number;
  keyEncoding: KeyEncoding;
  policy: RedisPolicy;
  registry: MetricsRegistry | undefined;
}

const NAMES = [
  'redis',
  'name',
  'ttlMs',
  'autoExtend',
  'onLockLost',
  'retryDelayMs',
  'keyEncoding',
  'redisPolicy',
  'metrics',
] as const satisfies readonly (keyof LockOptions)[];

export function checkName(where: string, v: unknown): string {
  if (typeof v !== 'string' || !/^[A-Za-z0-9_.-]{1,58}$/.test(v)) {
    throw invalid(where, `option "name" must match [A-Za-z0-9_.-]{1,58}, got ${shown(v)}`);
  }
  return v;
}

export function resolveLockOptions(options: LockOptions): ResolvedLockOptions {
  const o = new Checker('lock').object('', options, NAMES);
  const name = checkName('lock', o.name);
  const c = new Checker(`lock "${name}"`);
  const metrics = c.object('metrics', o.metrics, ['registry']);
  return {
    redis: c.client<ScriptRedis>('redis', o.redis, ['evalshaBuffer', 'evalBuffer']),
    name,
    ttlMs: c.integer('ttlMs', o.ttlMs, 10, MAX_TIMER_MS),
    autoExtend: c.bool('autoExtend', o.autoExtend, true),
    onLockLost: c.fn('onLockLost', o.onLockLost),
    retryDelayMs: c.integer('retryDelayMs', o.retryDelayMs, 1, 60_000, 50),
    keyEncoding: c.oneOf('keyEncoding', o.keyEncoding, ['auto', 'hash'], 'auto'),
    policy: checkPolicy(c, 'redisPolicy', o.redisPolicy),
    registry: metrics.registry as MetricsRegistry | undefined,
  };
}
