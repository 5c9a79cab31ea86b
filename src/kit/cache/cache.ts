/**
 * The read-through cache: `get(key, loader)` with one loader call per entry across every process
 * (a load lease in Redis; the other processes wait on a pub/sub channel, then read once), stale-while-
 * revalidate, early probabilistic refresh (XFetch), TTL jitter, and `invalidate(key)` that a load begun
 * before it can never undo (the entry's generation is read with the lease and checked at write time).
 * Within one process, concurrent gets of one entry share one flow. See docs/kit.md.
 */
import { randomBytes, randomInt } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { RedfenceError } from '../../errors/index.js';
import type { KeyEncoding } from '../../keys/keys.js';
import { type KitKey, KitKeys } from '../../keys/kit.js';
import type { MetricsRegistry } from '../../metrics/index.js';
import { Checker } from '../../options/checks.js';
import { KitMetrics } from '../common/metrics.js';
import { bytes, int, KitScripts } from '../common/scripts.js';
import {
  type CacheOptions,
  type CacheReadOptions,
  type CacheSubscriber,
  checkRead,
  type ResolvedCacheOptions,
  resolveCacheOptions,
} from './options.js';

/** Kept this long after an invalidation: far longer than any lease, so a load never sees it reset. */
export const GENERATION_TTL_MS = 86_400_000;

const STATUS = { fresh: 1, stale: 2, miss: 3, early: 4 } as const;

interface Entry {
  keys: string[];
  channel: string;
}

export class Cache<V> {
  readonly name: string;
  /** How ids become key names (an invalidation consumer builds the same keys: src/kit/invalidation/). */
  readonly keyEncoding: KeyEncoding;
  readonly #o: ResolvedCacheOptions<V>;
  readonly #c: Checker;
  readonly #keys: KitKeys;
  readonly #scripts: KitScripts;
  readonly #metrics: KitMetrics;
  readonly #inflight = new Map<string, Promise<V>>();
  readonly #background = new Set<Promise<unknown>>();
  readonly #waiters = new Map<string, Set<() => void>>();
  readonly #subscriptions = new Map<string, number>();
  #subscriber: CacheSubscriber | undefined;
  #ownSubscriber = false;
  #listening: CacheSubscriber | undefined;
  #closed: Promise<void> | undefined;

  constructor(options: CacheOptions<V>) {
    this.#o = resolveCacheOptions(options);
    this.name = this.#o.name;
    this.keyEncoding = this.#o.keyEncoding;
    this.#c = new Checker(`cache "${this.name}"`);
    this.#keys = new KitKeys('cache', this.name, { keyEncoding: this.#o.keyEncoding });
    this.#scripts = new KitScripts(import.meta.url, this.#o.redis, this.#o.policy);
    this.#metrics = new KitMetrics(this.name, this.#o.registry);
    this.#subscriber = this.#o.subscriber;
  }

  /** The registry the cache's metrics are in. */
  get registry(): MetricsRegistry {
    return this.#metrics.registry;
  }

  /**
   * The value of `key`: from Redis when fresh (or stale within staleWhileRevalidateMs, refreshed in the
   * background by one caller), else loaded by exactly one caller across processes while the others wait
   * for its write. Concurrent gets of one key in this process share one flow (and the first loader).
   */
  get(key: KitKey, loader: () => V | Promise<V>, options?: CacheReadOptions): Promise<V> {
    let read: Required<CacheReadOptions>;
    let base: string;
    try {
      if (this.#closed) throw this.#closedError('get');
      read =
        options === undefined && this.#o.read
          ? this.#o.read
          : checkRead(this.#c, options ?? {}, this.#o.defaults);
      if (typeof loader !== 'function') {
        throw new RedfenceError('RF_INVALID_ARGUMENT', `cache "${this.name}": loader must be a function`);
      }
      base = this.#keys.base(key);
    } catch (err) {
      return Promise.reject(err); // every failure of get() is a rejection, never a throw
    }
    const running = this.#inflight.get(base);
    if (running) {
      this.#count(
        'coalesced_total',
        'Cache gets that joined a get of the same entry already running in this process.',
      );
      return running;
    }
    const entry: Entry = { keys: [`${base}:v`, `${base}:g`, `${base}:lease`], channel: `${base}:ch` };
    const flow = this.#flow(entry, loader, read).finally(() => this.#inflight.delete(base));
    this.#inflight.set(base, flow);
    return flow;
  }

  /**
   * Drops the entry and moves its generation: a load that began before this call does not write. Always
   * fails closed (RF_REDIS_UNAVAILABLE after the retries): an invalidation that did not happen must not
   * be committed past.
   */
  async invalidate(key: KitKey): Promise<void> {
    if (this.#closed) throw this.#closedError('invalidate');
    const base = this.#keys.base(key);
    try {
      await this.#scripts.run('cacheInvalidate', [`${base}:v`, `${base}:g`], [GENERATION_TTL_MS]);
    } catch (err) {
      this.#metrics.redisError('cache', 'closed');
      throw err;
    }
    this.#count('invalidations_total', 'Cache entries invalidated.');
  }

  /** Waits for background refreshes, then disconnects the subscriber it made. Idempotent. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      await Promise.allSettled([...this.#inflight.values(), ...this.#background]);
      if (this.#ownSubscriber) this.#subscriber?.disconnect();
    })();
    return this.#closed;
  }

  #closedError(method: string): RedfenceError {
    return new RedfenceError('RF_INVALID_STATE', `cache "${this.name}": ${method}() after close()`);
  }

  #count(metric: string, help: string, labels?: Record<string, string>): void {
    this.#metrics.inc(`cache_${metric}`, help, labels);
  }

  #early(): string {
    const beta = this.#o.earlyRefreshBeta;
    return beta === 0 ? '0' : String(-Math.log(1 - Math.random()) * beta);
  }

  async #flow(entry: Entry, loader: () => V | Promise<V>, read: Required<CacheReadOptions>): Promise<V> {
    const token = randomBytes(16).toString('base64url');
    const deadline = Date.now() + this.#o.waitTimeoutMs;
    let subscribed = false;
    let first = true;
    try {
      for (;;) {
        let reply: unknown;
        try {
          reply = await this.#scripts.run('cacheGet', entry.keys, [token, this.#o.leaseMs, this.#early()]);
        } catch (err) {
          return await this.#redisDown(err, loader);
        }
        const status = int(reply, 0);
        const data = bytes(reply, 1);
        const leased = int(reply, 2) === 1;
        if (status !== STATUS.miss && data !== undefined) {
          if (status === STATUS.stale)
            this.#count(
              'stale_served_total',
              'Cache gets answered with a stale value while it is refreshed.',
            );
          else this.#count('hits_total', 'Cache gets answered with a fresh value.');
          if (leased) {
            if (status === STATUS.early)
              this.#count('early_refreshes_total', 'Early probabilistic refreshes started.');
            this.#refreshInBackground(entry, token, int(reply, 3), loader, read);
          }
          return this.#o.codec.decode(data);
        }
        if (first) this.#count('misses_total', 'Cache gets that found no usable value.');
        first = false;
        if (leased) return await this.#load(entry, token, int(reply, 3), loader, read);
        // Another process is loading: listen, read again (the write may have landed before the
        // subscription), then wait for its message or its lease to run out.
        if (!subscribed) {
          subscribed = true;
          await this.#subscribe(entry.channel);
          continue;
        }
        const left = deadline - Date.now();
        if (left <= 0) {
          throw new RedfenceError(
            'RF_KIT_CACHE_WAIT_TIMEOUT',
            `cache "${this.name}": waited ${this.#o.waitTimeoutMs} ms for another process's load`,
          );
        }
        this.#count('waits_total', "Waits for another process's load of an entry.");
        const pttl = int(reply, 4);
        await this.#wait(entry.channel, Math.min(left, pttl > 0 ? pttl + 5 : 20));
      }
    } finally {
      if (subscribed) this.#unsubscribe(entry.channel);
    }
  }

  async #redisDown(err: unknown, loader: () => V | Promise<V>): Promise<V> {
    if (!RedfenceError.is(err, 'RF_REDIS_UNAVAILABLE') || this.#o.onRedisDown === 'fail-closed') {
      this.#metrics.redisError('cache', 'closed');
      throw err;
    }
    this.#metrics.redisError('cache', 'open');
    return await this.#callLoader(loader);
  }

  async #callLoader(loader: () => V | Promise<V>): Promise<V> {
    try {
      const value = await loader();
      this.#count('loads_total', 'Loader calls, by outcome.', { outcome: 'ok' });
      return value;
    } catch (err) {
      this.#count('loads_total', 'Loader calls, by outcome.', { outcome: 'error' });
      throw err;
    }
  }

  /** Loads under the lease and writes the value (unless invalidated meanwhile); returns it either way. */
  async #load(
    entry: Entry,
    token: string,
    generation: number,
    loader: () => V | Promise<V>,
    read: Required<CacheReadOptions>,
  ): Promise<V> {
    const started = performance.now();
    let value: V;
    let encoded: string | Buffer;
    try {
      value = await this.#callLoader(loader);
      encoded = this.#o.codec.encode(value);
    } catch (err) {
      await this.#scripts.run('cacheRelease', [entry.keys[2] as string], [token, entry.channel]).catch(() => {
        this.#metrics.redisError('cache', 'open');
      });
      throw err;
    }
    const loadMs = Math.ceil(performance.now() - started);
    const fresh = read.ttlMs + (read.jitterMs > 0 ? randomInt(read.jitterMs + 1) : 0);
    try {
      const written = await this.#scripts.run('cacheSet', entry.keys, [
        token,
        String(generation),
        encoded,
        fresh,
        read.staleWhileRevalidateMs,
        loadMs,
        entry.channel,
        this.#o.checkGeneration ? '1' : '0',
      ]);
      if (written === 2 || written === 3) {
        this.#count(
          'writes_rejected_total',
          'Loaded values not written: the lease ran out, or the entry was invalidated during the load.',
          {
            reason: written === 2 ? 'lease' : 'generation',
          },
        );
      }
    } catch {
      // The value came from the source of truth: it is returned; the entry is simply not cached.
      this.#metrics.redisError('cache', 'open');
    }
    return value;
  }

  #refreshInBackground(
    entry: Entry,
    token: string,
    generation: number,
    loader: () => V | Promise<V>,
    read: Required<CacheReadOptions>,
  ): void {
    const p = this.#load(entry, token, generation, loader, read)
      .catch(() => {}) // counted in loads_total{outcome="error"}; the stale value was served
      .finally(() => this.#background.delete(p));
    this.#background.add(p);
  }

  /** Called once (memoised in #listening): the subscriber, with this cache's message listener on it. */
  #ensureSubscriber(): CacheSubscriber {
    if (this.#subscriber === undefined) {
      this.#subscriber = this.#o.redis.duplicate?.() as CacheSubscriber;
      this.#ownSubscriber = true;
      // An unhandled 'error' event would throw; the timed wait covers a subscriber that is down.
      (this.#subscriber as unknown as { on(e: string, l: () => void): unknown }).on('error', () => {});
    }
    this.#subscriber.on('message', (channel) => {
      const set = this.#waiters.get(channel);
      if (set) for (const wake of [...set]) wake();
    });
    return this.#subscriber;
  }

  async #subscribe(channel: string): Promise<void> {
    const n = this.#subscriptions.get(channel) ?? 0;
    this.#subscriptions.set(channel, n + 1);
    if (n > 0) return;
    try {
      this.#listening ??= this.#ensureSubscriber();
      const sub = this.#listening;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        sub.subscribe(channel),
        new Promise((r) => {
          timer = setTimeout(r, this.#o.policy.timeoutMs);
        }),
      ]).finally(() => clearTimeout(timer));
    } catch {
      // Not listening: the wait falls back to the lease's remaining time.
    }
  }

  #unsubscribe(channel: string): void {
    const n = (this.#subscriptions.get(channel) ?? 1) - 1;
    if (n > 0) {
      this.#subscriptions.set(channel, n);
      return;
    }
    this.#subscriptions.delete(channel);
    this.#listening?.unsubscribe(channel).catch(() => {});
  }

  #wait(channel: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      let set = this.#waiters.get(channel);
      if (!set) {
        set = new Set();
        this.#waiters.set(channel, set);
      }
      const waiters = set;
      const wake = (): void => {
        clearTimeout(timer);
        waiters.delete(wake);
        if (waiters.size === 0) this.#waiters.delete(channel);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      waiters.add(wake);
    });
  }
}
