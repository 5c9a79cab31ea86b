/**
 * Runs one component's Lua scripts (the `lua/` folder beside it) through the fence's loader and runner
 * (`<name>-<numKeys>.lua`, includes, versioned banners, EVALSHA with EVAL on NOSCRIPT), with the kit's
 * Redis-down policy: a deadline per call (a Redis that does not answer counts as down) and bounded
 * retries of retriable failures. What a component does once the retries are spent (fail open or closed)
 * is its own choice.
 */
import { fileURLToPath } from 'node:url';
import { RedfenceError } from '../../errors/index.js';
import type { RedisArg } from '../../fence/redis-port.js';
import { type LoadedScript, loadScripts } from '../../fence/script-loader.js';
import { runScript, type ScriptRedis } from '../../fence/script-runner.js';
import type { Checker } from '../../options/checks.js';

/** How a kit component treats a Redis that fails or does not answer. */
export interface RedisPolicyOptions {
  /** Deadline of one Redis call, in ms; past it the call counts as failed. Default 1000. */
  timeoutMs?: number;
  /** Further attempts after a retriable failure. Default 2. */
  retries?: number;
  /** Delay before the first retry, doubled for each next one. Default 25. */
  retryDelayMs?: number;
}

export const POLICY_OPTIONS = ['timeoutMs', 'retries', 'retryDelayMs'] as const;

export interface RedisPolicy {
  readonly timeoutMs: number;
  readonly retries: number;
  readonly retryDelayMs: number;
}

export function checkPolicy(c: Checker, path: string, v: unknown): RedisPolicy {
  const o = c.object(path, v, POLICY_OPTIONS);
  return {
    timeoutMs: c.integer(`${path}.timeoutMs`, o.timeoutMs, 1, 600_000, 1000),
    retries: c.integer(`${path}.retries`, o.retries, 0, 100, 2),
    retryDelayMs: c.integer(`${path}.retryDelayMs`, o.retryDelayMs, 0, 60_000, 25),
  };
}

const cache = new Map<string, Map<string, LoadedScript>>();

/** The scripts of the `lua/` folder next to the module at `moduleUrl` (loaded once per folder). */
export function scriptsBeside(moduleUrl: string): Map<string, LoadedScript> {
  const dir = fileURLToPath(new URL('./lua/', moduleUrl));
  let s = cache.get(dir);
  if (s === undefined) {
    s = loadScripts(dir);
    cache.set(dir, s);
  }
  return s;
}

function deadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new RedfenceError('RF_REDIS_UNAVAILABLE', `Redis call ${what} did not answer within ${ms} ms`),
        ),
      ms,
    );
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

export class KitScripts {
  readonly #scripts: Map<string, LoadedScript>;
  readonly #redis: ScriptRedis;
  readonly policy: RedisPolicy;

  constructor(moduleUrl: string, redis: ScriptRedis, policy: RedisPolicy) {
    this.#scripts = scriptsBeside(moduleUrl);
    this.#redis = redis;
    this.policy = policy;
  }

  /**
   * Runs script `name`; retriable failures are retried (a script the kit retries is safe to run twice,
   * or says in its header what a second run does). Throws RF_REDIS_UNAVAILABLE when the retries are spent.
   */
  async run(name: string, keys: readonly string[], args: readonly RedisArg[]): Promise<unknown> {
    const script = this.#scripts.get(name);
    if (script === undefined) {
      throw new RedfenceError('RF_SCRIPT_NOT_FOUND', `kit script ${name} is missing from the package`);
    }
    let delay = this.policy.retryDelayMs;
    for (let attempt = 0; ; attempt++) {
      try {
        // A rejection that lands after the deadline is dropped here.
        const call = runScript(this.#redis, script, keys, args);
        call.catch(() => {});
        return await deadline(call, this.policy.timeoutMs, script.id);
      } catch (err) {
        if (!RedfenceError.isRetriable(err) || attempt >= this.policy.retries) throw err;
      }
      await new Promise((r) => setTimeout(r, delay));
      delay *= 2;
    }
  }
}

/** Reads an integer from a script reply element (Redis integers come back as numbers). */
export function int(reply: unknown, i: number): number {
  const v = Array.isArray(reply) ? reply[i] : undefined;
  const n = typeof v === 'number' ? v : Buffer.isBuffer(v) ? Number(v.toString()) : Number.NaN;
  if (!Number.isFinite(n)) {
    throw new RedfenceError('RF_BAD_REPLY', `kit script reply element ${i} is not a number`);
  }
  return n;
}

/** Reads a bulk string element of a script reply (nil: undefined). */
export function bytes(reply: unknown, i: number): Buffer | undefined {
  const v = Array.isArray(reply) ? reply[i] : undefined;
  if (v === null || v === undefined) return undefined;
  if (Buffer.isBuffer(v)) return v;
  throw new RedfenceError('RF_BAD_REPLY', `kit script reply element ${i} is not a string`);
}
