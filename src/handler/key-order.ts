/**
 * Per-key order across a handler's retry topics (`retry.topics.keyOrder`). While a record of a Kafka
 * key is in the retry chain, the key is blocked: later records of the key (from the main topic or a
 * retry topic) are parked behind it instead of running. The blocked keys live in Redis, one list per
 * key of an input partition (`rf:{<name>:<input>:<partition>}:rkey:<key>`, src/keys), holding the
 * main-topic offsets of the key's records in the chain, oldest first; only the head runs. Every
 * write is fenced by the writer's partition epoch in the same script (the src/handler/once.ts
 * pattern): the main-topic partition's epoch, or for a retry-topic partition an epoch kept in the
 * input partition's slot (`:repoch:<retry topic>`), so the scripts stay single-slot on a cluster.
 */
import type { Cluster, Redis } from 'ioredis';
import type { FenceRedis } from '../fence/redis-port.js';
import { runScript } from '../fence/script-runner.js';
import type { KeySpace } from '../keys/index.js';
import { script } from './once.js';

export type KeyState = 'free' | 'head' | 'behind' | 'fenced';

/** Which epoch fences a writer: its own partition's. */
export interface KeyWriter {
  readonly topic: string;
  readonly partition: number;
  readonly epoch: number;
}

export class KeyOrderStore {
  readonly #redis: Redis | Cluster;
  readonly #keys: KeySpace;
  readonly #input: string;
  readonly #ttlMs: number;

  constructor(redis: Redis | Cluster, keys: KeySpace, input: string, ttlMs: number) {
    this.#redis = redis;
    this.#keys = keys;
    this.#input = input;
    this.#ttlMs = ttlMs;
  }

  #epochKey(w: KeyWriter): string {
    return w.topic === this.#input
      ? this.#keys.epoch(w.topic, w.partition)
      : this.#keys.retryEpoch(this.#input, w.partition, w.topic);
  }

  /** Raises a retry-topic partition's epoch (on assignment); the input's is raised by the Fence. */
  async raiseRetryEpoch(topic: string, partition: number): Promise<number> {
    return Number(await this.#redis.incr(this.#keys.retryEpoch(this.#input, partition, topic)));
  }

  #run(name: string, w: KeyWriter, key: Buffer, args: string[]): Promise<unknown> {
    const keys = [this.#epochKey(w), this.#keys.retryKeyOrder(this.#input, w.partition, key)];
    return runScript(this.#redis as unknown as FenceRedis, script(name), keys, [String(w.epoch), ...args]);
  }

  /** Whether the record (main-topic `offset`) may run; a main-topic record joins a blocked key's list. */
  async check(w: KeyWriter, key: Buffer, offset: string, join: boolean): Promise<KeyState> {
    const r = Number(
      await this.#run('retryKeyCheck', w, key, [offset, join ? '1' : '0', String(this.#ttlMs)]),
    );
    return r === -1 ? 'fenced' : r === 1 ? 'head' : r === 2 ? 'behind' : 'free';
  }

  /** Blocks the key behind the record (it goes to a retry topic). False when fenced. */
  async block(w: KeyWriter, key: Buffer, offset: string): Promise<boolean> {
    return Number(await this.#run('retryKeyBlock', w, key, [offset, String(this.#ttlMs)])) === 1;
  }

  /** The record left the chain (handled, dead-lettered, dropped). False when fenced. */
  async done(w: KeyWriter, key: Buffer, offset: string): Promise<boolean> {
    return Number(await this.#run('retryKeyDone', w, key, [offset])) === 1;
  }
}
