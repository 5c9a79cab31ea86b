/**
 * Version-aware projection updates: a consumer writes an entity's cached state from an event only when
 * the event's aggregate version is newer than the stored one (Lua compare), so out-of-order, retried and
 * replayed events never overwrite newer state; they are counted, never written. Rules: an equal version
 * is a duplicate (not written); an event without a version is refused before any Redis call
 * (RF_INVALID_ARGUMENT: without a version, invalidate instead); `remove` leaves a versioned tombstone so
 * an older update cannot bring a removed entity back. Every entry has a TTL (with jitter).
 */
import { randomInt } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { RedfenceError } from '../../errors/index.js';
import type { ScriptRedis } from '../../fence/script-runner.js';
import type { KeyEncoding } from '../../keys/keys.js';
import { type KitKey, KitKeys } from '../../keys/kit.js';
import type { MetricsRegistry } from '../../metrics/index.js';
import { Checker, invalid, MAX_TIMER_MS, shown } from '../../options/checks.js';
import { KitMetrics } from '../common/metrics.js';
import { bytes, checkPolicy, KitScripts, type RedisPolicyOptions } from '../common/scripts.js';

export interface ProjectionCodec<V> {
  encode(value: V): string | Buffer;
  decode(bytes: Buffer): V;
}

export interface ProjectionOptions<V> {
  redis: Redis | Cluster;
  /** Names the projection in keys and metrics: `[A-Za-z0-9_.-]{1,58}`. */
  name: string;
  /** Time to live of every entry, in ms. Required: the safety net when invalidations or updates are missed. */
  ttlMs: number;
  /** A random 0..jitterMs added to each write's TTL. Default 0. */
  jitterMs?: number;
  /** Default JSON. */
  codec?: ProjectionCodec<V>;
  keyEncoding?: KeyEncoding;
  /** `'fail-closed'` (default): throw RF_REDIS_UNAVAILABLE (do not commit the event). `'fail-open'`: answer `{ written: false, reason: 'redis-down' }`. */
  onRedisDown?: 'fail-open' | 'fail-closed';
  redisPolicy?: RedisPolicyOptions;
  metrics?: { registry?: MetricsRegistry };
}

/** An aggregate version: a non-negative safe integer or a bigint below 2^64. */
export type Version = number | bigint;

export type UpdateResult =
  | { written: true; previousVersion: bigint | undefined }
  | { written: false; reason: 'older' | 'equal'; storedVersion: bigint }
  | { written: false; reason: 'redis-down' };

const NAMES = [
  'redis',
  'name',
  'ttlMs',
  'jitterMs',
  'codec',
  'keyEncoding',
  'onRedisDown',
  'redisPolicy',
  'metrics',
] as const satisfies readonly (keyof ProjectionOptions<unknown>)[];
const MAX_VERSION = (1n << 64n) - 1n;

const JSON_CODEC: ProjectionCodec<unknown> = {
  encode: (v) => JSON.stringify(v) ?? 'null',
  decode: (b) => JSON.parse(b.toString('utf8')) as unknown,
};

export class Projection<V> {
  readonly name: string;
  readonly #keys: KitKeys;
  readonly #scripts: KitScripts;
  readonly #metrics: KitMetrics;
  readonly #codec: ProjectionCodec<V>;
  readonly #ttlMs: number;
  readonly #jitterMs: number;
  readonly #open: boolean;

  constructor(options: ProjectionOptions<V>) {
    const o = new Checker('projection').object('', options, NAMES);
    if (typeof o.name !== 'string' || !/^[A-Za-z0-9_.-]{1,58}$/.test(o.name)) {
      throw invalid('projection', `option "name" must match [A-Za-z0-9_.-]{1,58}, got ${shown(o.name)}`);
    }
    this.name = o.name;
    const c = new Checker(`projection "${this.name}"`);
    const redis = c.client<ScriptRedis>('redis', o.redis, ['evalshaBuffer', 'evalBuffer']);
    this.#ttlMs = c.integer('ttlMs', o.ttlMs, 1, MAX_TIMER_MS);
    this.#jitterMs = c.integer('jitterMs', o.jitterMs, 0, MAX_TIMER_MS, 0);
    const codec = c.object('codec', o.codec, ['encode', 'decode']);
    if (o.codec !== undefined) {
      c.fn('codec.encode', codec.encode ?? 0);
      c.fn('codec.decode', codec.decode ?? 0);
    }
    this.#codec = (o.codec as ProjectionCodec<V> | undefined) ?? (JSON_CODEC as ProjectionCodec<V>);
    this.#keys = new KitKeys('projection', this.name, {
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

  #version(v: unknown): string {
    const ok =
      (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) ||
      (typeof v === 'bigint' && v >= 0n && v <= MAX_VERSION);
    if (!ok) {
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        `projection "${this.name}": version must be a non-negative integer (number or bigint < 2^64), got ${v === undefined ? 'none' : shown(v)}; an event without a version should invalidate, not update`,
      );
    }
    return BigInt(v as number | bigint)
      .toString()
      .padStart(20, '0');
  }

  /** Writes `value` as of `version` if newer than the stored version; stale events are counted, never written. */
  async update(key: KitKey, version: Version, value: V): Promise<UpdateResult> {
    const v = this.#version(version);
    return await this.#write(key, v, this.#codec.encode(value), false);
  }

  /** Records the entity's removal at `version`: reads see nothing, older updates stay refused (until the TTL). */
  async remove(key: KitKey, version: Version): Promise<UpdateResult> {
    return await this.#write(key, this.#version(version), '', true);
  }

  async #write(
    key: KitKey,
    version: string,
    data: string | Buffer,
    tombstone: boolean,
  ): Promise<UpdateResult> {
    const [entry] = this.#keys.parts(key, 'p') as [string];
    const ttl = this.#ttlMs + (this.#jitterMs > 0 ? randomInt(this.#jitterMs + 1) : 0);
    let reply: unknown;
    try {
      reply = await this.#scripts.run('projectionSet', [entry], [version, data, ttl, tombstone ? '1' : '0']);
    } catch (err) {
      if (!this.#open || !RedfenceError.is(err, 'RF_REDIS_UNAVAILABLE')) {
        this.#metrics.redisError('projection', 'closed');
        throw err;
      }
      this.#metrics.redisError('projection', 'open');
      return { written: false, reason: 'redis-down' };
    }
    const r = reply as unknown[];
    if (r[0] === 1) {
      this.#metrics.inc('projection_writes_total', 'Projection entries written (newer versions).');
      const prev = bytes(reply, 1);
      return { written: true, previousVersion: prev === undefined ? undefined : BigInt(prev.toString()) };
    }
    const reason = String(r[1]) === 'equal' ? 'equal' : 'older';
    this.#metrics.inc(
      'projection_stale_total',
      'Projection updates refused: the event was older than (or equal to) the stored version.',
      { reason },
    );
    return { written: false, reason, storedVersion: BigInt((bytes(reply, 2) as Buffer).toString()) };
  }

  /** The stored value and its version (undefined when absent or removed). Fails closed when Redis is down. */
  async get(key: KitKey): Promise<{ version: bigint; value: V } | undefined> {
    const [entry] = this.#keys.parts(key, 'p') as [string];
    const reply = await this.#scripts.run('projectionGet', [entry], []);
    const version = bytes(reply, 0);
    if (version === undefined || bytes(reply, 2)?.toString() === '1') return undefined;
    return { version: BigInt(version.toString()), value: this.#codec.decode(bytes(reply, 1) as Buffer) };
  }
}
