/**
 * The close-time index of open windows (emit-final; docs/architecture.md "The store interface"): per
 * partition and window store, a sorted set of the windows written there, score = window start, member
 * = `<start>:<key bytes>`, so a range read gives the due windows in Kafka Streams' emission order
 * (start, then key bytes). It cannot share the fence keys' slots, so it is written to be idempotent:
 * `add` before the key call that opens a window (ZADD NX: a replay adds nothing; an entry whose window
 * was never written finalizes to nothing), `remove` only after the final results' commit passed them.
 *
 * @example
 * const index = new CloseIndex({ redis, app: 'fraud' });
 * await index.add('orders', 3, 1, [{ key: Buffer.from('c1'), start: 300_000 }]);
 * const due = await index.due('orders', 3, 1, { from: 0, upTo: 300_000, limit: 1000 });
 * // ... a key call with a `final` effect per due window, produced and committed, then:
 * await index.remove('orders', 3, 1, 300_000);
 */
import type { Cluster, Redis } from 'ioredis';
import { RedfenceError } from '../errors/index.js';
import { wrapRedisError } from '../fence/script-runner.js';
import type { KeyEncoding } from '../keys/index.js';
import { KeySpace } from '../keys/index.js';

/** What the index needs of a Redis client (ioredis `Redis` and `Cluster` fit). */
export interface CloseIndexRedis {
  zadd(key: string, ...args: (string | number | Buffer)[]): Promise<unknown>;
  zrangebyscoreBuffer(
    key: string,
    min: number | string,
    max: number | string,
    ...args: (string | number)[]
  ): Promise<Buffer[]>;
  zremrangebyscore(key: string, min: number | string, max: number | string): Promise<number>;
}

/** True when `r` has the calls the index makes. */
export function isCloseIndexRedis(r: unknown): r is CloseIndexRedis {
  const x = r as Partial<CloseIndexRedis> | null;
  return (
    typeof x?.zadd === 'function' &&
    typeof x.zrangebyscoreBuffer === 'function' &&
    typeof x.zremrangebyscore === 'function'
  );
}

export interface CloseIndexOptions {
  readonly redis: CloseIndexRedis | Redis | Cluster;
  /** The topology's application id (as the key call's `app`). */
  readonly app: string;
  readonly tenant?: string;
  readonly keyEncoding?: KeyEncoding;
}

/** One open window of one fence key. */
export interface IndexedWindow {
  readonly key: Buffer;
  readonly start: number;
}

function bad(path: string, why: string): RedfenceError {
  return new RedfenceError('RF_INVALID_ARGUMENT', `close index: ${path} ${why}`, {
    details: { field: path },
  });
}

function start(v: unknown, path: string): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) throw bad(path, 'must be an integer >= 0');
  return v;
}

export class CloseIndex {
  readonly #redis: CloseIndexRedis;
  readonly #space: KeySpace;

  constructor(options: CloseIndexOptions) {
    if (!isCloseIndexRedis(options?.redis))
      throw new RedfenceError(
        'RF_INVALID_OPTIONS',
        'CloseIndex: redis must be an ioredis client (zadd, zrangebyscoreBuffer, zremrangebyscore)',
      );
    this.#redis = options.redis;
    try {
      this.#space = new KeySpace({
        store: options.app,
        ...(options.tenant === undefined ? {} : { tenant: options.tenant }),
        ...(options.keyEncoding === undefined ? {} : { keyEncoding: options.keyEncoding }),
      });
    } catch (err) {
      throw new RedfenceError('RF_INVALID_OPTIONS', `CloseIndex: ${(err as Error).message}`, { cause: err });
    }
  }

  /** The index's key of a partition and window store. */
  key(topic: string, partition: number, store: number): string {
    return this.#space.closeIndex(topic, partition, store);
  }

  /** Indexes windows (idempotent: one already there keeps its place). Call before the key call that opens them. */
  async add(
    topic: string,
    partition: number,
    store: number,
    windows: readonly IndexedWindow[],
  ): Promise<void> {
    const key = this.key(topic, partition, store);
    if (windows.length === 0) return;
    const args: (string | number | Buffer)[] = ['NX'];
    windows.forEach((w, i) => {
      const s = start(w?.start, `windows[${i}].start`);
      if (!Buffer.isBuffer(w.key)) throw bad(`windows[${i}].key`, 'must be a Buffer');
      args.push(s, Buffer.concat([Buffer.from(`${s}:`), w.key]));
    });
    await call('ZADD', () => this.#redis.zadd(key, ...args));
  }

  /**
   * The indexed windows with `from <= start <= upTo`, at most `limit`, by (start, key bytes). Read
   * more with `from` at the last start when `limit` came back full (windows of that start are read
   * again: finalizing twice emits once).
   */
  async due(
    topic: string,
    partition: number,
    store: number,
    range: { readonly from: number; readonly upTo: number; readonly limit: number },
  ): Promise<IndexedWindow[]> {
    const key = this.key(topic, partition, store);
    const from = start(range?.from, 'from');
    const upTo = start(range.upTo, 'upTo');
    if (!Number.isInteger(range.limit) || range.limit < 1) throw bad('limit', 'must be an integer >= 1');
    const got = await call('ZRANGEBYSCORE', () =>
      this.#redis.zrangebyscoreBuffer(key, from, upTo, 'LIMIT', 0, range.limit),
    );
    return got.map((m) => member(key, m));
  }

  /**
   * Every indexed window with `from <= start <= upTo`, by (start, key bytes), read in pages of `page`
   * (for one writer of the partition's index, as its owner is, the pages are consistent).
   */
  async dueAll(topic: string, partition: number, store: number, from: number, upTo: number, page = 10_000) {
    const key = this.key(topic, partition, store);
    const lo = start(from, 'from');
    const hi = start(upTo, 'upTo');
    const out: IndexedWindow[] = [];
    for (let offset = 0; lo <= hi; offset += page) {
      const got = await call('ZRANGEBYSCORE', () =>
        this.#redis.zrangebyscoreBuffer(key, lo, hi, 'LIMIT', offset, page),
      );
      for (const m of got) out.push(member(key, m));
      if (got.length < page) break;
    }
    return out;
  }

  /** Removes every indexed window with start <= `upTo` (after their final results were committed). */
  async remove(topic: string, partition: number, store: number, upTo: number): Promise<number> {
    const key = this.key(topic, partition, store);
    return call('ZREMRANGEBYSCORE', () => this.#redis.zremrangebyscore(key, '-inf', start(upTo, 'upTo')));
  }
}

function member(key: string, m: Buffer): IndexedWindow {
  const colon = m.indexOf(0x3a);
  const s = Number(m.subarray(0, colon).toString('latin1'));
  if (colon < 1 || !Number.isSafeInteger(s))
    throw new RedfenceError('RF_BAD_REPLY', `close index ${key} holds a malformed member`);
  return { key: Buffer.from(m.subarray(colon + 1)), start: s };
}

async function call<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw wrapRedisError(what, err);
  }
}
