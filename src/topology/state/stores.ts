/**
 * The read-only stores of queryable state (docs/streams.md, "Queryable state"): a key-value store's
 * `get`, a window store's `fetch` and a session store's `fetch` / `findSessions`, in Kafka Streams'
 * names. Each answer is one consistent read of the key's fence key (KeyStore.read: the values and the
 * stamp of the last record applied to the key, in one script), so the values are exactly what that
 * record left. Keys are encoded and values decoded as the executor writes them (../run/stored.ts).
 */
import { RedfenceError } from '../../errors/index.js';
import { backoffMs, delay } from '../../runtime/backoff.js';
import {
  type KeyStore,
  MAX_READ_WINDOWS,
  type StateStamp,
  type StoreReadAnswer,
  type StoreReadRequest,
} from '../../store/index.js';
import type { AggregatePlan } from '../run/plan.js';
import { fenceKeyOf, storedAggregate, storedNumber } from '../run/stored.js';
import { timeWindowStartsIn } from '../windows.js';

/**
 * At most this many windows in one window fetch: each is a key probed in Lua (its value, final marker
 * and timestamp in one HMGET; about 2 µs of Redis time per key, measured), read in parts of
 * {@link MAX_READ_WINDOWS} keys, and Redis is shared with the processor's key calls.
 */
export const MAX_FETCH_WINDOWS = 20_000;
/** Reads of a fetch in parts before RF_STATE_BUSY (parts whose stamps differ are read again). */
const FETCH_ATTEMPTS = 8;

/** A key-value store's answer for one key. */
export interface KeyValueAnswer<V> {
  /** The key's aggregate (a count's number; a reduce's or aggregate's value through the store's serde); null: none. */
  readonly value: V | null;
  /** The largest record timestamp behind the value (Kafka Streams' ValueAndTimestamp); null with no value. */
  readonly timestamp: number | null;
  /** The last record applied to the key (null: none ever): the answer holds exactly what it left. */
  readonly stamp: TopologyStamp | null;
}

/** One window of a key, `[start, end)`. */
export interface WindowEntry<V> {
  readonly start: number;
  readonly end: number;
  readonly value: V;
  /** The largest record timestamp of the window. */
  readonly timestamp: number;
  /** Its final result has been emitted (`emit('final')`). */
  readonly final: boolean;
}

/** A window store's answer: the key's windows whose start is in the range, by start. */
export interface WindowFetchAnswer<V> {
  readonly windows: readonly WindowEntry<V>[];
  readonly stamp: TopologyStamp | null;
}

/** One session of a key, `[start, end]` (its first and last record timestamps). */
export interface SessionEntry<V> {
  readonly start: number;
  readonly end: number;
  readonly value: V;
}

/** A session store's answer: the key's sessions, by end then start. */
export interface SessionFetchAnswer<V> {
  readonly sessions: readonly SessionEntry<V>[];
  readonly stamp: TopologyStamp | null;
}

/** A key-value store (an unwindowed count, reduce or aggregate), read-only. */
export interface ReadOnlyKeyValueStore<K, V> {
  readonly name: string;
  readonly kind: 'key-value';
  /** The key's value, its timestamp and the stamp of the last record applied to it. */
  get(key: K): Promise<KeyValueAnswer<V>>;
}

/** A window store (a count, reduce or aggregate in time windows), read-only. */
export interface ReadOnlyWindowStore<K, V> {
  readonly name: string;
  readonly kind: 'window';
  /** The key's windows whose start is in `[fromMs, toMs]` (Kafka Streams' `fetch(key, timeFrom, timeTo)`), by start. */
  fetch(key: K, fromMs: number, toMs: number): Promise<WindowFetchAnswer<V>>;
}

/** A session store (a count in session windows), read-only. */
export interface ReadOnlySessionStore<K, V> {
  readonly name: string;
  readonly kind: 'session';
  /** Every session of the key, by end then start. */
  fetch(key: K): Promise<SessionFetchAnswer<V>>;
  /** The key's sessions ending at or after `earliestEndMs` and starting at or before `latestStartMs` (Kafka Streams' `findSessions`). */
  findSessions(key: K, earliestEndMs: number, latestStartMs: number): Promise<SessionFetchAnswer<V>>;
}

/**
 * What a store reader needs: the application's key store and the aggregation's plan; `layout`: the
 * check that the application's time windows are in the layout this version reads (RF_STATE_LAYOUT).
 */
/**
 * The record a topology store's answer reflects: the last one applied to the key, on `topic` (the one
 * topic the store's sub-topology reads: an input, or a repartition topic for a store after a re-key).
 */
export interface TopologyStamp extends StateStamp {
  readonly topic: string;
}

/** A read's stamp with the store's topic. */
function stampOf(agg: AggregatePlan, s: StateStamp | null): TopologyStamp | null {
  return s === null ? null : { topic: agg.topic, partition: s.partition, offset: s.offset, epoch: s.epoch };
}

export interface StoreContext {
  readonly store: KeyStore;
  readonly agg: AggregatePlan;
  readonly layout?: () => Promise<void>;
}

function bad(name: string, call: string, message: string, field: string): RedfenceError {
  return new RedfenceError('RF_INVALID_ARGUMENT', `store "${name}": ${call}: ${message}`, {
    details: { store: name, field },
  });
}

/** The fence key of a user key, as the executor makes it (the key's text never in the error). */
function fenceKey(ctx: StoreContext, key: unknown, call: string): Buffer {
  const name = ctx.agg.node.store;
  if (key === null || key === undefined)
    throw bad(name, call, 'key must not be null (a null key never reaches a store)', 'key');
  try {
    return fenceKeyOf(ctx.agg.node, key);
  } catch {
    throw bad(name, call, "the store's key serde could not serialize the key", 'key');
  }
}

function time(name: string, call: string, field: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v))
    throw bad(name, call, `${field} must be an integer (ms since the epoch)`, field);
  return v;
}

/** A stored value through the store's serde; a serde that throws is RF_STATE_CORRUPT (the value never shown). */
function decode(agg: AggregatePlan, bytes: Buffer): unknown {
  try {
    return storedAggregate(agg, bytes);
  } catch (err) {
    if (RedfenceError.is(err)) throw err;
    throw new RedfenceError(
      'RF_STATE_CORRUPT',
      `store "${agg.node.store}": its value serde could not read a stored value`,
      { details: { store: agg.node.store, node: agg.node.name } },
    );
  }
}

export class KeyValueReader<K, V> implements ReadOnlyKeyValueStore<K, V> {
  readonly kind = 'key-value';
  readonly #ctx: StoreContext;

  constructor(ctx: StoreContext) {
    this.#ctx = ctx;
  }

  get name(): string {
    return this.#ctx.agg.node.store;
  }

  async get(key: K): Promise<KeyValueAnswer<V>> {
    const { store, agg } = this.#ctx;
    const fence = fenceKey(this.#ctx, key, 'get');
    const a = await store.read({ key: fence, kv: [agg.valueStore, agg.timeStore] });
    const bytes = a.kv[0] ?? null;
    if (bytes === null) return { value: null, timestamp: null, stamp: stampOf(agg, a.stamp) };
    const value = decode(agg, bytes) as V;
    return { value, timestamp: storedNumber(a.kv[1], agg.node.name), stamp: stampOf(agg, a.stamp) };
  }
}

export class WindowReader<K, V> implements ReadOnlyWindowStore<K, V> {
  readonly kind = 'window';
  readonly #ctx: StoreContext;

  constructor(ctx: StoreContext) {
    this.#ctx = ctx;
  }

  get name(): string {
    return this.#ctx.agg.node.store;
  }

  async fetch(key: K, fromMs: number, toMs: number): Promise<WindowFetchAnswer<V>> {
    const { store, agg } = this.#ctx;
    const name = this.name;
    const fence = fenceKey(this.#ctx, key, 'fetch');
    const from = time(name, 'fetch', 'fromMs', fromMs);
    const to = time(name, 'fetch', 'toMs', toMs);
    if (agg.node.window?.kind === 'sliding') return this.#fetchSliding(fence, from, to);
    const w = agg.node.window as { sizeMs: number; advanceMs: number };
    const range = timeWindowStartsIn(w, from, to);
    if (range.count > MAX_FETCH_WINDOWS)
      throw bad(
        name,
        'fetch',
        `[fromMs, toMs] holds ${range.count} window starts; at most ${MAX_FETCH_WINDOWS} in one fetch: narrow the range`,
        'toMs',
      );
    const starts = range.starts();
    // a window's value and timestamp: the two fields of its one key
    const request: StoreReadRequest = {
      key: fence,
      windows: starts.length === 0 ? [] : [{ store: agg.valueStore, starts }],
    };
    await this.#ctx.layout?.();
    const a = await readConsistent(store, request, name);
    const windows = a.windows
      .flatMap((x) => (x.value !== null ? [{ ...x, value: x.value }] : []))
      .map((x) => ({
        start: x.start,
        end: x.start + w.sizeMs,
        value: decode(agg, x.value) as V,
        timestamp: storedNumber(x.time, agg.node.name),
        final: x.final,
      }))
      .sort((x, y) => x.start - y.start);
    return { windows, stamp: stampOf(agg, a.stamp) };
  }

  /**
   * Sliding windows: the key's two window hashes (values, timestamps) read whole in one script (their
   * size is bounded by the store's retention), the windows starting in the range kept; `final`: the
   * value hash's mark `f<start>`.
   */
  async #fetchSliding(fence: Buffer, from: number, to: number): Promise<WindowFetchAnswer<V>> {
    const { store, agg } = this.#ctx;
    const d = (agg.node.window as { timeDifferenceMs: number }).timeDifferenceMs;
    const a = await store.read({ key: fence, hashes: [agg.valueStore, agg.timeStore] });
    const [values, times] = [
      a.hashes[0] ?? new Map<number, Buffer>(),
      a.hashes[1] ?? new Map<number, Buffer>(),
    ];
    const windows = [...values]
      .filter(([start]) => start >= from && start <= to)
      .map(([start, v]) => ({
        start,
        end: start + d,
        value: decode(agg, v) as V,
        timestamp: storedNumber(times.get(start), agg.node.name),
        final: a.hashFinals[0]?.has(start) === true,
      }))
      .sort((x, y) => x.start - y.start);
    return { windows, stamp: stampOf(agg, a.stamp) };
  }
}

/** A read of a key in parts, read again while the parts' stamps differ; RF_STATE_BUSY after FETCH_ATTEMPTS. */
async function readConsistent(
  store: KeyStore,
  request: StoreReadRequest,
  name: string,
): Promise<StoreReadAnswer> {
  for (let attempt = 0; attempt < FETCH_ATTEMPTS; attempt++) {
    if (attempt > 0) await delay(backoffMs(attempt - 1, 5, 200));
    const a = await store.readParts(request);
    if (a !== null) return a;
  }
  throw new RedfenceError(
    'RF_STATE_BUSY',
    `store "${name}": a fetch of more than ${MAX_READ_WINDOWS / 2} windows is read in parts, and the key changed between them in ${FETCH_ATTEMPTS} attempts: ask again or narrow the range`,
    { retriable: true, details: { store: name } },
  );
}

export class SessionReader<K, V> implements ReadOnlySessionStore<K, V> {
  readonly kind = 'session';
  readonly #ctx: StoreContext;

  constructor(ctx: StoreContext) {
    this.#ctx = ctx;
  }

  get name(): string {
    return this.#ctx.agg.node.store;
  }

  fetch(key: K): Promise<SessionFetchAnswer<V>> {
    return this.#find(key, Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER, 'fetch');
  }

  findSessions(key: K, earliestEndMs: number, latestStartMs: number): Promise<SessionFetchAnswer<V>> {
    return this.#find(key, earliestEndMs, latestStartMs, 'findSessions');
  }

  async #find(key: K, earliestEnd: number, latestStart: number, call: string) {
    const { store, agg } = this.#ctx;
    const fence = fenceKey(this.#ctx, key, call);
    const lo = time(this.name, call, 'earliestEndMs', earliestEnd);
    const hi = time(this.name, call, 'latestStartMs', latestStart);
    const a = await store.read({ key: fence, sessions: [agg.valueStore] });
    const sessions = a.sessions
      .filter((s) => s.end >= lo && s.start <= hi)
      .map((s) => ({ start: s.start, end: s.end, value: decode(agg, s.value) as V }));
    return { sessions, stamp: stampOf(agg, a.stamp) };
  }
}
