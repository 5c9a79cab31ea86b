/**
 * Invalidations in pipelines: every `invalidate(entries)` made in one tick joins one flush; a flush
 * runs the cache's own `cacheInvalidate` script (DEL the entry, INCR its generation: a load begun
 * before cannot write afterwards) for each entry, in one pipeline per Redis node (Cluster: entries are
 * grouped by the node set serving their slot; each script touches one slot), at most `maxKeys` entries
 * per pipeline. On a standalone Redis the same three commands run for up to 100 entries per script
 * call (lua/cacheInvalidateMany-N.lua), which saves the client most of its per-command work. A caller's promise resolves once every one of its entries answered, and rejects
 * (RF_REDIS_UNAVAILABLE, retriable) if any did not: nothing of it may be committed past.
 *
 * NOSCRIPT answers are sent again as EVAL in a second pipeline; a pipeline the Cluster client refuses
 * (the slot map moved between grouping and sending) falls back to one script call per entry, which
 * the client routes. Every pipeline has a deadline (`timeoutMs`): a Redis that does not answer counts
 * as down. Entries may be invalidated twice (a retried record): that is harmless.
 */
import type { Cluster, Redis } from 'ioredis';
import { RedfenceError } from '../../errors/index.js';
import type { LoadedScript } from '../../fence/script-loader.js';
import { runScript, type ScriptRedis, wrapRedisError } from '../../fence/script-runner.js';
import { keySlot } from '../../keys/slot.js';
import { GENERATION_TTL_MS } from '../cache/cache.js';
import { scriptsBeside } from '../common/scripts.js';

/** One cache entry: its value hash and its generation counter (one hash slot). */
export interface EntryKeys {
  readonly value: string;
  readonly generation: string;
}

interface Request {
  readonly entries: readonly EntryKeys[];
  readonly resolve: () => void;
  readonly reject: (err: unknown) => void;
}

interface Item {
  readonly entry: EntryKeys;
  readonly request: Request;
}

interface Call {
  readonly script: LoadedScript;
  readonly items: Item[];
}

/** Entries per cacheInvalidateMany call: about 0.3 ms of server time, so a call never holds Redis long. */
const ENTRIES_PER_CALL = 100;

type Client = Redis | Cluster;

function isCluster(redis: Client): redis is Cluster {
  return (redis as { isCluster?: boolean }).isCluster === true;
}

function withDeadline<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new RedfenceError(
            'RF_REDIS_UNAVAILABLE',
            `an invalidation pipeline did not answer within ${ms} ms`,
          ),
        ),
      ms,
    );
  });
  p.catch(() => {}); // a rejection that lands after the deadline
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

export interface PipelineStats {
  /** After each pipeline sent: how many entries it held. */
  pipeline(entries: number): void;
}

export class InvalidationPipeline {
  readonly #redis: Client;
  readonly #script: LoadedScript;
  readonly #many: LoadedScript;
  readonly #timeoutMs: number;
  readonly #maxKeys: number;
  readonly #stats: PipelineStats | undefined;
  #queue: Request[] = [];
  #scheduled = false;

  constructor(redis: Client, options: { timeoutMs: number; maxKeys: number; stats?: PipelineStats }) {
    this.#redis = redis;
    const script = scriptsBeside(new URL('../cache/cache.js', import.meta.url).href).get('cacheInvalidate');
    if (script === undefined) {
      throw new RedfenceError(
        'RF_SCRIPT_NOT_FOUND',
        'kit script cacheInvalidate is missing from the package',
      );
    }
    this.#script = script;
    const many = scriptsBeside(import.meta.url).get('cacheInvalidateMany');
    if (many === undefined) {
      throw new RedfenceError(
        'RF_SCRIPT_NOT_FOUND',
        'kit script cacheInvalidateMany is missing from the package',
      );
    }
    this.#many = many;
    this.#timeoutMs = options.timeoutMs;
    this.#maxKeys = options.maxKeys;
    this.#stats = options.stats;
  }

  /** Invalidates the entries (with everything else asked for in this tick); resolves once all answered. */
  invalidate(entries: readonly EntryKeys[]): Promise<void> {
    if (entries.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.#queue.push({ entries, resolve, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => this.#flush());
      }
    });
  }

  #flush(): void {
    this.#scheduled = false;
    const queue = this.#queue;
    this.#queue = [];
    const items: Item[] = [];
    for (const request of queue) for (const entry of request.entries) items.push({ entry, request });
    const failed = new Map<Request, unknown>();
    const left = new Map<Request, number>();
    for (const r of queue) left.set(r, r.entries.length);
    const settle = (item: Item, err: unknown): void => {
      const r = item.request;
      if (err !== undefined && !failed.has(r)) failed.set(r, err);
      const n = (left.get(r) ?? 1) - 1;
      left.set(r, n);
      if (n > 0) return;
      const e = failed.get(r);
      if (e === undefined) r.resolve();
      else r.reject(e);
    };
    for (const group of this.#groups(items)) {
      for (let i = 0; i < group.length; i += this.#maxKeys) {
        void this.#send(group.slice(i, i + this.#maxKeys), settle);
      }
    }
  }

  /** Items by the Redis node set that serves them (one group on a standalone Redis). */
  #groups(items: Item[]): Item[][] {
    const redis = this.#redis;
    if (!isCluster(redis)) return [items];
    const groups = new Map<string, Item[]>();
    for (const item of items) {
      const slot = keySlot(item.entry.value);
      const nodes = redis.slots[slot];
      const g = nodes && nodes.length > 0 ? nodes.join(',') : `slot:${slot}`;
      let list = groups.get(g);
      if (list === undefined) {
        list = [];
        groups.set(g, list);
      }
      list.push(item);
    }
    return [...groups.values()];
  }

  /** The script calls of one pipeline: one entry each on a Cluster, up to ENTRIES_PER_CALL on a standalone Redis. */
  #calls(items: Item[]): Call[] {
    if (isCluster(this.#redis)) return items.map((item) => ({ script: this.#script, items: [item] }));
    const calls: Call[] = [];
    for (let i = 0; i < items.length; i += ENTRIES_PER_CALL)
      calls.push({ script: this.#many, items: items.slice(i, i + ENTRIES_PER_CALL) });
    return calls;
  }

  async #exec(calls: Call[], body: 'sha' | 'source'): Promise<Array<[Error | null, unknown]> | null> {
    const pipe = this.#redis.pipeline();
    for (const { script, items } of calls) {
      const keys: string[] = [];
      for (const { entry } of items) keys.push(entry.value, entry.generation);
      if (body === 'sha') pipe.evalsha(script.sha, keys.length, ...keys, GENERATION_TTL_MS);
      else pipe.eval(script.source, keys.length, ...keys, GENERATION_TTL_MS);
    }
    return withDeadline(pipe.exec(), this.#timeoutMs);
  }

  async #send(items: Item[], settle: (item: Item, err: unknown) => void): Promise<void> {
    const calls = this.#calls(items);
    let replies: Array<[Error | null, unknown]> | null;
    try {
      this.#stats?.pipeline(items.length);
      replies = await this.#exec(calls, 'sha');
    } catch (err) {
      if (/slots allocation group|same slot/.test((err as Error)?.message ?? '')) {
        await Promise.all(items.map((item) => this.#one(item, settle)));
        return;
      }
      const e = wrapRedisError(this.#script.id, err);
      for (const item of items) settle(item, e);
      return;
    }
    const again: Call[] = [];
    const single: Item[] = [];
    const sort = (call: Call, err: Error | null | undefined, retry: Call[] | undefined): void => {
      if (!err) for (const item of call.items) settle(item, undefined);
      else if (retry && err.message.startsWith('NOSCRIPT')) retry.push(call);
      else single.push(...call.items);
    };
    calls.forEach((call, i) => {
      sort(call, replies ? replies[i]?.[0] : new Error('no reply'), again);
    });
    if (again.length > 0) {
      try {
        const r = await this.#exec(again, 'source');
        again.forEach((call, i) => {
          sort(call, r ? r[i]?.[0] : new Error('no reply'), undefined);
        });
      } catch (err) {
        const e = wrapRedisError(this.#script.id, err);
        for (const call of again) for (const item of call.items) settle(item, e);
      }
    }
    // MOVED, ASK, TRYAGAIN, a busy server: one call each, routed and answered by the client
    await Promise.all(single.map((item) => this.#one(item, settle)));
  }

  async #one(item: Item, settle: (item: Item, err: unknown) => void): Promise<void> {
    try {
      await withDeadline(
        runScript(
          this.#redis as unknown as ScriptRedis,
          this.#script,
          [item.entry.value, item.entry.generation],
          [GENERATION_TTL_MS],
        ),
        this.#timeoutMs,
      );
      settle(item, undefined);
    } catch (err) {
      settle(item, wrapRedisError(this.#script.id, err));
    }
  }
}
