import { RedfenceError } from '../errors/index.js';
import type { FenceRedis, RedisArg } from './redis-port.js';
import type { LoadedScript } from './script-loader.js';

function isNoScript(err: unknown): boolean {
  return err instanceof Error && err.message.startsWith('NOSCRIPT');
}

const TRANSIENT = /^(LOADING|BUSY|TRYAGAIN|CLUSTERDOWN|MASTERDOWN|READONLY)\b/;

/**
 * Wraps a Redis error: script errors (bad input, bugs), a key of another type (RF_REDIS_KEY_TYPE) and
 * ACL refusals (RF_REDIS_AUTH) are final; connection trouble is retriable.
 */
export function wrapRedisError(script: string, err: unknown): RedfenceError {
  if (RedfenceError.is(err)) return err;
  const message = err instanceof Error ? err.message : String(err);
  // an ACL without a command or key redfence needs: final, never an outage to wait out
  if (/\bNOPERM\b/.test(message)) {
    return new RedfenceError(
      'RF_REDIS_AUTH',
      `Redis refused ${script}: ${message} (grant the rule set of docs/operations.md, "Least-privilege ACL")`,
      { cause: err },
    );
  }
  // a key of ours holds another type: final (waiting does not change it), not an outage
  if (/\bWRONGTYPE\b/.test(message)) {
    return new RedfenceError(
      'RF_REDIS_KEY_TYPE',
      `Redis ${script} failed: a key it reads or writes holds another Redis type (WRONGTYPE): something other than redfence wrote it; calls on it fail until it is removed or restored`,
      { cause: err },
    );
  }
  if (/RF_(ARGS|PROTOCOL)|ERR .*script|user_script/.test(message) && !TRANSIENT.test(message)) {
    return new RedfenceError('RF_SCRIPT_ERROR', `Redis script ${script} failed: ${message}`, { cause: err });
  }
  return new RedfenceError('RF_REDIS_UNAVAILABLE', `Redis call ${script} failed: ${message}`, { cause: err });
}

/** What running a script needs of a client: the fence's port narrowed to its two eval methods. */
export type ScriptRedis = Pick<FenceRedis, 'evalshaBuffer' | 'evalBuffer'>;

/**
 * Runs a loaded script with EVALSHA, falling back to EVAL when the server answers NOSCRIPT. Used by the
 * fence and by the kit (src/kit/), which loads its own folders with `loadScripts(dir)`.
 */
export async function runScript(
  redis: ScriptRedis,
  script: LoadedScript,
  keys: readonly string[],
  args: readonly RedisArg[],
): Promise<unknown> {
  if (script.numberOfKeys >= 0 ? keys.length !== script.numberOfKeys : keys.length === 0) {
    throw new RedfenceError(
      'RF_INVALID_ARGUMENT',
      `script ${script.id} takes ${script.numberOfKeys >= 0 ? script.numberOfKeys : 'at least 1'} keys, got ${keys.length}`,
    );
  }
  try {
    return await redis.evalshaBuffer(script.sha, keys.length, ...keys, ...args);
  } catch (err) {
    if (!isNoScript(err)) throw wrapRedisError(script.id, err);
  }
  try {
    return await redis.evalBuffer(script.source, keys.length, ...keys, ...args);
  } catch (err) {
    throw wrapRedisError(script.id, err);
  }
}
