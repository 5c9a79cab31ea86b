/**
 * KeyStore: runs key calls (lua/keyCall-N.lua) on Redis or Redis Cluster. One script call per fence
 * key; every key of a call is in that key's slot, so a cluster client routes it whole (no CROSSSLOT).
 *
 * @example
 * const store = new KeyStore({ redis, app: 'fraud' });
 * const [r] = await store.call({
 *   partition: 0, epoch: 1, committedOffset: -1, key: 'c1',
 *   records: [{ offset: 7, emit: 1, effects: [
 *     { store: 1, kind: 'window', start: 60_000, expireAt: Date.now() + 3_600_000, op: { op: 'add', by: 1 } },
 *   ] }],
 * });
 * // r: { verdict: 'APPLY', offset: 7, results: [Buffer.from('1')] }
 */
import { fileURLToPath } from 'node:url';
import type { Cluster, Redis } from 'ioredis';
import { RedfenceError } from '../errors/index.js';
import { type LoadedScript, loadScripts } from '../fence/index.js';
import { runScript } from '../fence/script-runner.js';
import type { KeyEncoding } from '../keys/index.js';
import { type EncodedCall, type EncodedMany, encodeKeyCall, encodeKeyCallMany } from './codec.js';
import { StoreKeys } from './keys.js';
import { checkLayout, type LayoutCheck, STORE_LAYOUT } from './layout.js';
import {
  decodeRead,
  encodeRead,
  MAX_READ_WINDOWS,
  type StateStamp,
  type StoreReadAnswer,
  type StoreReadRequest,
} from './read.js';
import { decodeKeyCall, decodeKeyCallMany } from './reply.js';
import type { KeyCall, KeyRecordResult } from './types.js';

/** The folder of the store's Lua scripts (beside this module in src/ and dist/). */
export const STORE_LUA_DIR = fileURLToPath(new URL('./lua/', import.meta.url));

let cached: Map<string, LoadedScript> | undefined;
function script(id: 'keyCall' | 'keyCallMany' | 'readKey' | 'layout'): LoadedScript {
  cached ??= loadScripts(STORE_LUA_DIR);
  return cached.get(id) as LoadedScript;
}

/** What a key call needs of a Redis client (ioredis `Redis` and `Cluster` fit). */
export interface StoreRedis {
  evalshaBuffer(sha: string, numKeys: number, ...args: (string | Buffer | number)[]): Promise<unknown>;
  evalBuffer(script: string, numKeys: number, ...args: (string | Buffer | number)[]): Promise<unknown>;
}

/** At most this many fence keys in one keyCallMany script call (single Redis). */
export const MANY_KEYS_PER_CALL = 64;

export interface KeyStoreOptions {
  /** An ioredis `Redis` or `Cluster` (or anything with its two eval methods). */
  readonly redis: StoreRedis | Redis | Cluster;
  /** The processor's store name or the topology's application id: `[A-Za-z0-9_.-]{1,64}`. */
  readonly app: string;
  readonly tenant?: string;
  /** How fence keys become part of key names (default `auto`: raw when safe, else hashed). */
  readonly keyEncoding?: KeyEncoding;
  /**
   * The fence space (a topic name; StoreKeysOptions.space): the fence hashes of another offset order
   * than the app's own, `{<app>@<space>:<key>}`. Default none.
   */
  readonly space?: string;
}

const OPTION_KEYS: readonly (keyof KeyStoreOptions)[] = ['redis', 'app', 'tenant', 'keyEncoding', 'space'];

export class KeyStore {
  readonly keys: StoreKeys;
  readonly #redis: StoreRedis;
  /** A Redis Cluster client: one script call per key. */
  readonly #cluster: boolean;

  constructor(options: KeyStoreOptions) {
    if (options === null || typeof options !== 'object')
      throw new RedfenceError('RF_INVALID_OPTIONS', 'KeyStore options must be an object');
    for (const k of Object.keys(options))
      if (!OPTION_KEYS.includes(k as keyof KeyStoreOptions))
        throw new RedfenceError('RF_INVALID_OPTIONS', `KeyStore: unknown option ${JSON.stringify(k)}`);
    const r = options.redis as Partial<StoreRedis> | null | undefined;
    if (typeof r?.evalshaBuffer !== 'function' || typeof r.evalBuffer !== 'function')
      throw new RedfenceError(
        'RF_INVALID_OPTIONS',
        'KeyStore: redis must be an ioredis client (Redis or Cluster)',
      );
    try {
      this.keys = new StoreKeys(options);
    } catch (err) {
      throw new RedfenceError('RF_INVALID_OPTIONS', `KeyStore: ${(err as Error).message}`, { cause: err });
    }
    this.#redis = options.redis as StoreRedis;
    this.#cluster = (options.redis as { isCluster?: unknown }).isCluster === true;
  }

  /** Checks and encodes a call (nothing sent): what `call` would send. */
  encode(call: KeyCall): EncodedCall {
    return encodeKeyCall(this.keys, call);
  }

  /** One key call: the records' verdicts and, with emit 1, their effects' results. */
  async call(call: KeyCall): Promise<KeyRecordResult[]> {
    return this.send(this.encode(call));
  }

  /**
   * The key calls of one partition batch, every one checked before any is sent. On Redis Cluster one
   * script call per key (their keys are in several slots); on a single Redis up to
   * {@link MANY_KEYS_PER_CALL} keys per script call (keyCallMany-N.lua: the fixed cost of a call is
   * shared) when the calls share partition, epoch and committed offset. All sent before any reply is read.
   */
  async callMany(calls: readonly KeyCall[]): Promise<KeyRecordResult[][]> {
    if (this.#cluster || calls.length < 2) {
      const encoded = calls.map((c) => this.encode(c));
      return Promise.all(encoded.map((e) => this.send(e)));
    }
    // chunks of one partition batch (partition, epoch, committed offset), in call order, each encoded
    // straight into its script call's arguments; all encoded (checked) before any is sent
    const chunks: (EncodedCall | EncodedMany)[] = [];
    const places: number[][] = [];
    for (const idx of batchesOf(calls))
      for (let i = 0; i < idx.length; i += MANY_KEYS_PER_CALL) {
        const at = idx.length <= MANY_KEYS_PER_CALL ? idx : idx.slice(i, i + MANY_KEYS_PER_CALL);
        chunks.push(
          at.length === 1
            ? this.encode(calls[at[0] as number] as KeyCall)
            : encodeKeyCallMany(
                this.keys,
                at.length === calls.length ? calls : at.map((j) => calls[j] as KeyCall),
              ),
        );
        places.push(at);
      }
    const out: KeyRecordResult[][] = new Array(calls.length);
    await Promise.all(
      chunks.map(async (chunk, c) => {
        const at = places[c] as number[];
        if (!('starts' in chunk)) {
          out[at[0] as number] = await this.send(chunk);
          return;
        }
        const replies = decodeKeyCallMany(
          chunk,
          await runScript(this.#redis, script('keyCallMany'), chunk.keys, chunk.args),
        );
        for (let k = 0; k < at.length; k++) out[at[k] as number] = replies[k] as KeyRecordResult[];
      }),
    );
    return out;
  }

  /**
   * Queryable state: one consistent read of a key's stores, stamped with the partition and offset of
   * the last record applied to the key (from any process; read-only). Checked before any call.
   *
   * @example
   * const { stamp, kv, windows } = await store.read({ key: 'c1', kv: [0], windows: [{ store: 1, starts: [60_000] }] });
   * // stamp: { partition: 0, offset: 7, epoch: 1 }; windows: [{ store: 1, start: 60_000, value: <Buffer 31>, final: false }]
   */
  async read(request: StoreReadRequest): Promise<StoreReadAnswer> {
    const encoded = encodeRead(this.keys, request);
    return decodeRead(encoded, await runScript(this.#redis, script('readKey'), encoded.keys, encoded.args));
  }

  /**
   * A read of any number of windows: at most {@link MAX_READ_WINDOWS} per script, so a wider one is read
   * in parts (sent together) that must all carry the same stamp; null when they do not (a write came
   * between them: read again). Key-value stores and sessions are read with the first part.
   */
  async readParts(request: StoreReadRequest): Promise<StoreReadAnswer | null> {
    const all = (request.windows ?? []).flatMap((w) => w.starts.map((start) => ({ store: w.store, start })));
    if (all.length <= MAX_READ_WINDOWS) return this.read(request);
    const parts: StoreReadRequest[] = [];
    for (let i = 0; i < all.length; i += MAX_READ_WINDOWS) {
      const byStore = new Map<number, number[]>();
      for (const w of all.slice(i, i + MAX_READ_WINDOWS)) {
        const starts = byStore.get(w.store);
        if (starts === undefined) byStore.set(w.store, [w.start]);
        else starts.push(w.start);
      }
      const windows = [...byStore].map(([store, starts]) => ({ store, starts }));
      const first =
        i === 0
          ? {
              kv: request.kv ?? [],
              sessions: request.sessions ?? [],
              hashes: request.hashes ?? [],
              pending: request.pending ?? [],
            }
          : {};
      parts.push({ key: request.key, ...first, windows });
    }
    const answers = await Promise.all(parts.map((r) => this.read(r)));
    const head = answers[0] as StoreReadAnswer;
    if (!answers.every((a) => sameStamp(a.stamp, head.stamp))) return null;
    return { ...head, windows: answers.flatMap((a) => a.windows) };
  }

  /**
   * Checks that the application's state is in the layout this version reads (src/store/layout.ts): a
   * processor at start, before it takes any partition (`claim`: the marker is written when absent);
   * RF_STATE_LAYOUT when it is not. Returns the marker's layout after the check (null: none).
   *
   * @example
   * await store.checkLayout({ topics: ['orders'], windowed: true, claim: true }); // '2'
   */
  async checkLayout(check: LayoutCheck): Promise<string | null> {
    const text = (v: unknown) => (v === null || v === undefined ? null : String(v));
    return checkLayout(
      {
        app: this.keys.space.store,
        marker: async (claim) =>
          text(
            await runScript(
              this.#redis,
              script('layout'),
              [this.keys.layout()],
              claim ? ['claim', STORE_LAYOUT] : ['get'],
            ),
          ),
        ran: async (topic) =>
          Number(await runScript(this.#redis, script('layout'), [this.keys.epoch(topic, 0)], ['probe'])) ===
          1,
      },
      check,
    );
  }

  /** Sends an encoded call. */
  async send(encoded: EncodedCall): Promise<KeyRecordResult[]> {
    const reply = await runScript(this.#redis, script('keyCall'), encoded.keys, encoded.args);
    return decodeKeyCall(encoded, reply);
  }
}

function sameStamp(a: StateStamp | null, b: StateStamp | null): boolean {
  return (
    a === b ||
    (a !== null && b !== null && a.partition === b.partition && a.offset === b.offset && a.epoch === b.epoch)
  );
}

/**
 * The calls' indexes per partition batch (partition, epoch, committed offset), in call order: one list
 * when they share it (a topology batch's calls always do), found without a Map.
 */
function batchesOf(calls: readonly KeyCall[]): number[][] {
  const first = calls[0] as KeyCall;
  let same = first !== null && typeof first === 'object';
  for (let i = 1; i < calls.length && same; i++) {
    const c = calls[i] as KeyCall;
    same =
      c !== null &&
      typeof c === 'object' &&
      c.partition === first.partition &&
      c.epoch === first.epoch &&
      c.committedOffset === first.committedOffset;
  }
  if (same) {
    const all: number[] = new Array(calls.length);
    for (let i = 0; i < calls.length; i++) all[i] = i;
    return [all];
  }
  const groups = new Map<string, number[]>();
  calls.forEach((c, i) => {
    const id =
      c === null || typeof c !== 'object' ? `?${i}` : `${c.partition},${c.epoch},${c.committedOffset}`;
    const g = groups.get(id);
    if (g === undefined) groups.set(id, [i]);
    else g.push(i);
  });
  return [...groups.values()];
}
