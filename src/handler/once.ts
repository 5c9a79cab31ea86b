/**
 * Redis idempotency for side effects (`ctx.once`): check the id's done marker, run the work, mark it
 * done, the check and the mark each fenced by the partition's epoch in one script (Lua beside this
 * file). Keys from src/keys (`rf:{<name>:<topic>:<partition>}:once:<id>`): the marker is in the
 * partition's slot, so a custom id (an event id) is deduplicated among the records of one partition,
 * which holds every record of one Kafka key.
 *
 * What the fence gives: a zombie (an instance whose partition was assigned to another, which raised
 * the epoch) fails with RF_HANDLER_FENCED before running the work or instead of marking it, so it
 * never makes the new owner skip a record. What it cannot give: work that ran and whose mark failed
 * runs again on the new owner; make the call itself idempotent where the far side allows it (an
 * idempotency key header).
 */
import { fileURLToPath } from 'node:url';
import type { Cluster, Redis } from 'ioredis';
import { RedfenceError } from '../errors/index.js';
import type { FenceRedis } from '../fence/redis-port.js';
import { type LoadedScript, loadScripts } from '../fence/script-loader.js';
import { runScript } from '../fence/script-runner.js';
import type { KeySpace } from '../keys/index.js';

const LUA_DIR = fileURLToPath(new URL('./lua/', import.meta.url));
let scripts: Map<string, LoadedScript> | undefined;
/** One of the handler's Lua scripts (beside this file), loaded once. */
export function script(name: string): LoadedScript {
  scripts ??= loadScripts(LUA_DIR);
  const s = scripts.get(name);
  if (!s)
    throw new RedfenceError('RF_SCRIPT_NOT_FOUND', `handler script ${name} is missing from the package`);
  return s;
}

export type OnceCheck = 'fenced' | 'done' | 'new';

export class OnceStore {
  readonly #redis: FenceRedis;
  readonly #keys: KeySpace;
  readonly #ttlMs: number;

  constructor(redis: Redis | Cluster, keys: KeySpace, ttlMs: number) {
    this.#redis = redis as unknown as FenceRedis;
    this.#keys = keys;
    this.#ttlMs = ttlMs;
  }

  /**
   * `via`: the record was consumed from this retry topic of input `topic` (retry.topics): the marker
   * is the input partition's, fenced by the retry-topic partition's epoch kept in the same slot, so
   * an id is one marker along the chain.
   */
  #at(topic: string, partition: number, id: string, via?: string): string[] {
    const epoch =
      via === undefined ? this.#keys.epoch(topic, partition) : this.#keys.retryEpoch(topic, partition, via);
    return [epoch, this.#keys.once(topic, partition, id)];
  }

  async check(topic: string, partition: number, epoch: number, id: string, via?: string): Promise<OnceCheck> {
    const keys = this.#at(topic, partition, id, via);
    const r = Number(await runScript(this.#redis, script('onceCheck'), keys, [String(epoch)]));
    return r === -1 ? 'fenced' : r === 1 ? 'done' : 'new';
  }

  /** True when marked; false when fenced (nothing written). */
  async mark(topic: string, partition: number, epoch: number, id: string, via?: string): Promise<boolean> {
    const keys = this.#at(topic, partition, id, via);
    const r = await runScript(this.#redis, script('onceMark'), keys, [String(epoch), String(this.#ttlMs)]);
    return Number(r) === 1;
  }
}

export function fencedError(topic: string, partition: number, epoch: number): RedfenceError {
  return new RedfenceError(
    'RF_HANDLER_FENCED',
    `ctx.once: ${topic}/${partition} has a newer owner than epoch ${epoch}: this instance no longer owns it`,
    { details: { topic, partition, epoch } },
  );
}
