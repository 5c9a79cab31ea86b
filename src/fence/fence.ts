import type { Cluster, Redis } from 'ioredis';
import { RedfenceError } from '../errors/index.js';
import { checkPartition, checkTopic, type KeyEncoding, KeySpace, keySlot } from '../keys/index.js';
import { type ApplyKeysContext, applyKeys, slotCache } from './apply-keys.js';
import { decodeApply, decodeApplyAt, decodeState, encodeApply, KEY_ARGS } from './codec.js';
import { type BatchResults, KeyBatch } from './key-batch.js';
import { asFenceRedis, type FenceRedis, type RedisArg } from './redis-port.js';
import { type LoadedScript, loadScripts } from './script-loader.js';
import { runScript, wrapRedisError } from './script-runner.js';
import type { ApplyRequest, FencingMode, RecordResult, StoredState } from './types.js';

export interface FenceOptions {
  /** An ioredis `Redis` or `Cluster` (or anything implementing {@link FenceRedis}). */
  redis: FenceRedis | Redis | Cluster;
  /** Logical store name; part of every key. */
  store: string;
  /** `strict` on a single Redis (also checks the partition epoch key); `cluster` on Redis Cluster. */
  mode: FencingMode;
  tenant?: string;
  keyEncoding?: KeyEncoding;
  maxRawKeyLength?: number;
  /**
   * TTL of state keys in ms, refreshed on every write; 0 (default) keeps state forever. It must exceed
   * the topic's retention plus the largest consumer lag, or a replay of old records is applied again.
   */
  ttlMs?: number;
  /** Keep a per-partition index of keys with pending entries so {@link Fence.sweep} can prune them. Default true. */
  pendingIndex?: boolean;
}

const OPTION_KEYS = new Set([
  'redis',
  'store',
  'mode',
  'tenant',
  'keyEncoding',
  'maxRawKeyLength',
  'ttlMs',
  'pendingIndex',
]);

/** Most keys one multi-key apply call carries (bounds the time Redis spends in one script). */
export const MAX_KEYS_PER_CALL = 128;

let cachedScripts: Map<string, LoadedScript> | undefined;
function script(name: string): LoadedScript {
  cachedScripts ??= loadScripts();
  const s = cachedScripts.get(name);
  if (!s) throw new RedfenceError('RF_SCRIPT_NOT_FOUND', `fence script ${name} is missing from the package`);
  return s;
}

/**
 * The fence: applies records to per-key state in Redis atomically with their (partition, offset, epoch)
 * fence and pending outputs. Knows nothing about Kafka; the runtime feeds it.
 *
 * @example
 * const fence = new Fence({ redis, store: 'totals', mode: 'strict' });
 * const epoch = await fence.acquireEpoch('orders', 3);
 * const [r] = await fence.apply({ topic: 'orders', partition: 3, epoch, committedOffset: 41, key: 'c-7',
 *   records: [{ offset: 41, operation: { op: 'add', by: 250 }, output: 'state' }] });
 * // r.verdict === 'APPLY' and r.output.value is the new total
 */
export class Fence {
  readonly keys: KeySpace;
  readonly mode: FencingMode;
  readonly ttlMs: number;
  readonly #redis: FenceRedis;
  readonly #index: boolean;
  /** A Redis Cluster client: multi-key calls only for keys of one hash slot. */
  readonly #cluster: boolean;
  readonly #applyKeys: ApplyKeysContext;

  constructor(options: FenceOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new RedfenceError('RF_INVALID_OPTIONS', 'Fence options must be an object');
    }
    for (const k of Object.keys(options)) {
      if (!OPTION_KEYS.has(k)) {
        throw new RedfenceError(
          'RF_INVALID_OPTIONS',
          `unknown Fence option "${k}"; known: ${[...OPTION_KEYS].join(', ')}`,
        );
      }
    }
    const redis = asFenceRedis(options.redis);
    if (typeof redis === 'string') {
      throw new RedfenceError(
        'RF_INVALID_OPTIONS',
        `Fence option "redis" must be an ioredis Redis or Cluster (method ${redis} missing)`,
      );
    }
    if (options.mode !== 'strict' && options.mode !== 'cluster') {
      throw new RedfenceError(
        'RF_INVALID_OPTIONS',
        `Fence option "mode" must be 'strict' or 'cluster', got ${JSON.stringify(options.mode)}`,
      );
    }
    const ttl = options.ttlMs ?? 0;
    if (!Number.isSafeInteger(ttl) || ttl < 0) {
      throw new RedfenceError(
        'RF_INVALID_OPTIONS',
        `Fence option "ttlMs" must be a non-negative integer, got ${String(ttl)}`,
      );
    }
    try {
      this.keys = new KeySpace({
        store: options.store,
        ...(options.tenant === undefined ? {} : { tenant: options.tenant }),
        ...(options.keyEncoding === undefined ? {} : { keyEncoding: options.keyEncoding }),
        ...(options.maxRawKeyLength === undefined ? {} : { maxRawKeyLength: options.maxRawKeyLength }),
      });
    } catch (err) {
      throw new RedfenceError('RF_INVALID_OPTIONS', `Fence options: ${(err as Error).message}`, {
        cause: err,
      });
    }
    this.#redis = redis;
    this.mode = options.mode;
    this.ttlMs = ttl;
    this.#index = options.pendingIndex ?? true;
    this.#cluster = (options.redis as { isCluster?: unknown }).isCluster === true;
    this.#applyKeys = {
      redis,
      keys: this.keys,
      strict: this.mode === 'strict',
      cluster: this.#cluster,
      index: this.#index,
      ttlMs: ttl,
      maxKeysPerCall: MAX_KEYS_PER_CALL,
      slots: slotCache(this.#cluster ? 65_536 : 0),
      script,
    };
  }

  /**
   * A new encoder for one partition batch (the hot path's form of {@link applyBatch}): open each key
   * with `key()`, add its records, send it with {@link applyKeys}. Checks the topic, partition, epoch
   * and committed offset now, once.
   *
   * @example
   * const batch = fence.batch('orders', 3, epoch, 41);
   * batch.key('c-7');
   * batch.record(0, 41, { op: 'add', by: 250 }, 2); // record number 0, offset 41, output: the new state
   * const results = new BatchResults(1);
   * await fence.applyKeys(batch, results);
   * // results.verdicts[0] === V.APPLY, results.outputs[0] is the new total
   * @internal the processor's hot path; users call {@link applyBatch}
   */
  batch(topic: string, partition: number, epoch: number, committedOffset: number): KeyBatch {
    return new KeyBatch((key) => this.keys.state(key), topic, partition, epoch, committedOffset);
  }

  /**
   * Applies a {@link batch} with the same script calls {@link applyBatch} makes, writing each record's
   * verdict into `into` at its record number. Returns the indexes of the keys that answered CONFLICT.
   * @internal the processor's hot path; users call {@link applyBatch}
   */
  applyKeys(batch: KeyBatch, into: BatchResults): Promise<number[]> {
    return applyKeys(this.#applyKeys, batch, into);
  }

  /** Raises the partition's epoch; call on assignment, before processing any of its records. */
  async acquireEpoch(topic: string, partition: number): Promise<number> {
    const reply = await runScript(
      this.#redis,
      script('acquireEpoch'),
      [this.keys.epoch(topic, partition)],
      [],
    );
    return Number(reply);
  }

  /**
   * Records that the input `topic` has `count` partitions and returns every count recorded for it in
   * this store, ascending (the current one among them).
   */
  async partitionCounts(topic: string, count: number): Promise<number[]> {
    const key = this.keys.partitionCounts(topic);
    await this.#redis.zadd(key, count, String(count));
    const all = await this.#redis.zrangeBuffer(key, 0, -1);
    return all.map((b) => Number(b.toString('utf8'))).filter((n) => Number.isInteger(n) && n > 0);
  }

  /** Applies the records of one key (one partition batch) and returns one result per record. */
  async apply(request: ApplyRequest): Promise<RecordResult[]> {
    const [results] = await this.applyBatch([request]);
    return results as RecordResult[];
  }

  /**
   * Applies many keys' requests. Requests of one partition batch (same topic, partition, epoch and
   * committed offset) go in as few script calls as possible: up to {@link MAX_KEYS_PER_CALL} keys per
   * call (on a Redis Cluster client, per hash slot), so Redis runs one script per chunk instead of one per key.
   * A request alone in its group uses the one-key script. Keys with outputs join their partition's
   * pending index (in strict mode inside the same call; in cluster mode one ZADD per partition, another
   * slot), so {@link sweep} can prune them later. Calls run concurrently (ioredis' auto-pipelining
   * shares round trips). Each chunk is atomic; chunks are independent (every key's fence is its own).
   */
  async applyBatch(requests: readonly ApplyRequest[]): Promise<RecordResult[][]> {
    const strict = this.mode === 'strict';
    // Strict calls add their keys to the pending index themselves (same script, same call).
    const selfIndex = strict && this.#index;
    const prepared = requests.map((req, i) => {
      checkTopic(req.topic);
      checkPartition(req.partition);
      const stateKey = this.keys.state(req.key);
      return { i, req, stateKey, args: encodeApply(req, this.ttlMs, selfIndex) };
    });
    type Prepared = (typeof prepared)[number];
    if (prepared.length === 1 && (selfIndex || !this.#index)) {
      // One key, nothing else to send: no grouping.
      const p = prepared[0] as Prepared;
      const reply = await runScript(
        this.#redis,
        script(strict ? 'applyRecordsStrict' : 'applyRecords'),
        strict ? this.#strictKeys(p.stateKey, p.req) : [p.stateKey],
        p.args,
      );
      return [decodeApply(p.req, reply)];
    }

    // Group: one partition batch (and, on a cluster, one slot) per group.
    const groups = new Map<string, Prepared[]>();
    for (const p of prepared) {
      const { topic, partition, epoch, committedOffset } = p.req;
      const g = `${topic}\u0000${partition}\u0000${epoch}\u0000${committedOffset}${this.#cluster ? `\u0000${keySlot(p.stateKey)}` : ''}`;
      const list = groups.get(g) ?? [];
      if (list.length === 0) groups.set(g, list);
      list.push(p);
    }

    const results: RecordResult[][] = new Array(requests.length);
    const calls: Promise<unknown>[] = [];
    for (const list of groups.values()) {
      if (list.length === 1) {
        const p = list[0] as Prepared;
        const keys = strict ? this.#strictKeys(p.stateKey, p.req) : [p.stateKey];
        calls.push(
          runScript(this.#redis, script(strict ? 'applyRecordsStrict' : 'applyRecords'), keys, p.args).then(
            (reply) => {
              results[p.i] = decodeApply(p.req, reply);
            },
          ),
        );
        continue;
      }
      for (let from = 0; from < list.length; from += MAX_KEYS_PER_CALL) {
        const chunk = list.slice(from, from + MAX_KEYS_PER_CALL);
        const head = chunk[0] as Prepared;
        const { topic, partition } = head.req;
        // head args: protocol, partition, epoch, watermark, ttl, index flag; then per key its record text and binary arguments
        const args: RedisArg[] = head.args.slice(0, KEY_ARGS);
        for (const p of chunk)
          for (let k = KEY_ARGS; k < p.args.length; k++) args.push(p.args[k] as RedisArg);
        const stateKeys = chunk.map((p) => p.stateKey);
        const keys = strict
          ? [this.keys.epoch(topic, partition), this.keys.pendingIndex(topic, partition), ...stateKeys]
          : stateKeys;
        calls.push(
          runScript(this.#redis, script(strict ? 'applyManyStrict' : 'applyMany'), keys, args).then(
            (reply) => {
              if (!Array.isArray(reply))
                throw new RedfenceError(
                  'RF_BAD_REPLY',
                  `applyMany replied with ${typeof reply} for ${chunk.length} keys`,
                );
              // the keys' parts one after another
              let at = 0;
              for (const p of chunk) {
                const d = decodeApplyAt(p.req, reply, at);
                results[p.i] = d.results;
                at = d.next;
              }
              if (at !== reply.length)
                throw new RedfenceError(
                  'RF_BAD_REPLY',
                  `applyMany replied with ${reply.length - at} entries beyond its ${chunk.length} keys`,
                );
            },
          ),
        );
      }
    }

    if (this.#index && !selfIndex) {
      const byPartition = new Map<string, RedisArg[]>();
      for (const p of prepared) {
        let top = -1;
        for (const r of p.req.records) if (r.output !== undefined && r.offset > top) top = r.offset;
        if (top < 0) continue;
        const idx = this.keys.pendingIndex(p.req.topic, p.req.partition);
        const list = byPartition.get(idx) ?? [];
        if (list.length === 0) byPartition.set(idx, list);
        list.push(top, p.stateKey);
      }
      for (const [idx, members] of byPartition) {
        calls.push(
          this.#redis.zadd(idx, 'GT', ...members).catch((err: unknown) => {
            throw wrapRedisError('ZADD pending index', err);
          }),
        );
      }
    }
    await Promise.all(calls);
    return results;
  }

  /** KEYS of applyRecordsStrict: the state hash, the partition's epoch and pending index. */
  #strictKeys(stateKey: string, req: ApplyRequest): string[] {
    return [
      stateKey,
      this.keys.epoch(req.topic, req.partition),
      this.keys.pendingIndex(req.topic, req.partition),
    ];
  }

  /** The stored value and fence of a key, or null when it has none. */
  async read(key: string | Uint8Array): Promise<StoredState | null> {
    let flat: Record<string, Buffer>;
    try {
      flat = await this.#redis.hgetallBuffer(this.keys.state(key));
    } catch (err) {
      throw wrapRedisError('HGETALL', err);
    }
    return decodeState(flat);
  }

  /**
   * Prunes pending entries of a partition's keys that were not written again after the partition's
   * committed offset passed them. Call after a commit, off the hot path. Returns the keys visited and
   * the entries removed; call again while `more` is true.
   */
  async sweep(
    topic: string,
    partition: number,
    committedOffset: number,
    limit = 500,
  ): Promise<{ keys: number; pruned: number; more: boolean }> {
    if (!Number.isSafeInteger(committedOffset) || committedOffset < 0) {
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        `committedOffset must be a non-negative integer, got ${String(committedOffset)}`,
      );
    }
    const idx = this.keys.pendingIndex(topic, partition);
    let members: Buffer[];
    try {
      members = await this.#redis.zrangeBuffer(
        idx,
        '-inf',
        `(${committedOffset}`,
        'BYSCORE',
        'LIMIT',
        0,
        limit,
      );
    } catch (err) {
      throw wrapRedisError('ZRANGE pending index', err);
    }
    if (members.length === 0) return { keys: 0, pruned: 0, more: false };
    // Up to MAX_KEYS_PER_CALL keys per script call (per hash slot on a cluster): one call per key made
    // the sweep cost Redis about as much as the writes when keys are seldom written again.
    const groups = new Map<number, string[]>();
    for (const m of members) {
      const key = m.toString('utf8');
      const slot = this.#cluster ? keySlot(key) : 0;
      const list = groups.get(slot) ?? [];
      if (list.length === 0) groups.set(slot, list);
      list.push(key);
    }
    const calls: Promise<unknown>[] = [];
    for (const list of groups.values())
      for (let from = 0; from < list.length; from += MAX_KEYS_PER_CALL)
        calls.push(
          runScript(this.#redis, script('prunePendingMany'), list.slice(from, from + MAX_KEYS_PER_CALL), [
            String(partition),
            String(committedOffset),
          ]),
        );
    const counts = await Promise.all(calls);
    await runScript(this.#redis, script('sweepIndex'), [idx], [String(committedOffset), ...members]);
    const pruned = counts.reduce<number>((a, c) => a + Number(c), 0);
    return { keys: members.length, pruned, more: members.length === limit };
  }
}
