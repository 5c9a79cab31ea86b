/**
 * The protected store's half of a fenced lock. `FencedStore` keeps values in Redis and refuses a write
 * whose fencing number is older than one it has accepted (Lua, atomic). For any other store, do the same
 * compare inside its own transaction; `checkFencingToken` is that rule for code that holds both numbers.
 */
import type { Cluster, Redis } from 'ioredis';
import { RedfenceError } from '../../errors/index.js';
import type { ScriptRedis } from '../../fence/script-runner.js';
import type { KeyEncoding } from '../../keys/keys.js';
import { type KitKey, KitKeys } from '../../keys/kit.js';
import type { MetricsRegistry } from '../../metrics/index.js';
import { Checker, MAX_TIMER_MS } from '../../options/checks.js';
import { KitMetrics } from '../common/metrics.js';
import { checkPolicy, int, KitScripts, type RedisPolicyOptions } from '../common/scripts.js';
import { checkName } from './options.js';

export interface FencedStoreOptions {
  redis: Redis | Cluster;
  /** The lock family's name (keys `rf:t=<tenant>:{lock.<name>:<id>}:data`). */
  name: string;
  /** TTL of stored values, in ms; 0 keeps them. Default 0. */
  ttlMs?: number;
  keyEncoding?: KeyEncoding;
  redisPolicy?: RedisPolicyOptions;
  metrics?: { registry?: MetricsRegistry };
}

/** Throws RF_KIT_FENCED when `incoming` is older than `newest` (equal: the same holder again, allowed). */
export function checkFencingToken(newest: number | undefined, incoming: number): void {
  if (newest !== undefined && incoming < newest) {
    throw new RedfenceError(
      'RF_KIT_FENCED',
      `fencing number ${incoming} is older than ${newest}: the lock was lost`,
      {
        details: { incoming, newest },
      },
    );
  }
}

export class FencedStore {
  readonly name: string;
  readonly #keys: KitKeys;
  readonly #scripts: KitScripts;
  readonly #metrics: KitMetrics;
  readonly #ttlMs: number;

  constructor(options: FencedStoreOptions) {
    const o = new Checker('fenced store').object('', options, [
      'redis',
      'name',
      'ttlMs',
      'keyEncoding',
      'redisPolicy',
      'metrics',
    ]);
    this.name = checkName('fenced store', o.name);
    const c = new Checker(`fenced store "${this.name}"`);
    const redis = c.client<ScriptRedis>('redis', o.redis, ['evalshaBuffer', 'evalBuffer']);
    this.#ttlMs = c.integer('ttlMs', o.ttlMs, 0, MAX_TIMER_MS, 0);
    this.#keys = new KitKeys('lock', this.name, {
      keyEncoding: c.oneOf<KeyEncoding>('keyEncoding', o.keyEncoding, ['auto', 'hash'], 'auto'),
    });
    this.#scripts = new KitScripts(import.meta.url, redis, checkPolicy(c, 'redisPolicy', o.redisPolicy));
    this.#metrics = new KitMetrics(
      this.name,
      c.object('metrics', o.metrics, ['registry']).registry as MetricsRegistry | undefined,
    );
  }

  /** Writes `value` for `key` if `fencingToken` is not older than the newest accepted; else RF_KIT_FENCED. */
  async write(key: KitKey, fencingToken: number, value: string | Buffer): Promise<void> {
    if (!Number.isSafeInteger(fencingToken) || fencingToken < 1) {
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        `fenced store "${this.name}": fencingToken must be a positive integer`,
      );
    }
    const [data] = this.#keys.parts(key, 'data') as [string];
    const reply = await this.#scripts.run('fencedWrite', [data], [fencingToken, value, this.#ttlMs]);
    if (int(reply, 0) === 1) return;
    this.#metrics.inc(
      'lock_fenced_writes_total',
      'Writes the fenced store refused: their fencing number was older.',
    );
    checkFencingToken(int(reply, 1), fencingToken);
  }

  /** The stored value and the fencing number that wrote it. */
  async read(key: KitKey): Promise<{ value: Buffer; fencingToken: number } | undefined> {
    const [data] = this.#keys.parts(key, 'data') as [string];
    const reply = await this.#scripts.run('fencedRead', [data], []);
    if (!Array.isArray(reply) || reply[0] === null || reply[0] === undefined) return undefined;
    return { value: reply[1] as Buffer, fencingToken: int(reply, 0) };
  }
}
