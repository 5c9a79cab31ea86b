/** Calls into user code (decode, operation, reduce): a retriable throw is retried with backoff, others are returned. */
import { backoffMs, delay } from '../runtime/backoff.js';

export type UserResult<R> = { ok: true; value: R } | { ok: false; error: unknown };

/**
 * Runs a user function; see {@link userCaller}. Synchronous unless the function throws a retriable
 * error (then a promise of the retried outcome): the common path costs no microtask per record.
 */
export type UserCall = <R>(fn: () => R) => UserResult<R> | Promise<UserResult<R>>;

/**
 * A user function that throws an error with `retriable === true` is called again up to `retries` times
 * (backoff 50 ms .. 2 s, cut short when `signal` aborts); any other throw, or the last one, is returned
 * for the caller to dead-letter the record.
 */
export function userCaller(retries: number, signal: AbortSignal): UserCall {
  const retry = async <R>(fn: () => R, error: unknown): Promise<UserResult<R>> => {
    for (let attempt = 0; ; attempt++) {
      const retriable = (error as { retriable?: unknown })?.retriable === true;
      if (!retriable || attempt >= retries) return { ok: false, error };
      await delay(backoffMs(attempt, 50, 2000), signal);
      try {
        return { ok: true, value: fn() };
      } catch (e) {
        error = e;
      }
    }
  };
  return <R>(fn: () => R): UserResult<R> | Promise<UserResult<R>> => {
    try {
      return { ok: true, value: fn() };
    } catch (error) {
      if ((error as { retriable?: unknown })?.retriable !== true || retries <= 0) return { ok: false, error };
      return retry(fn, error);
    }
  };
}

/**
 * The hot path calls a user function directly (no closure, no result object per record) and only
 * when it throws hands it to the {@link UserCall}: `firstThrow(error, fn)` is a function that throws
 * `error` the first time (the direct call, counted as the first attempt) and calls `fn` after, so the
 * retries and the returned error are exactly those of `callUser(fn)`.
 */
export function firstThrow<R>(error: unknown, fn: () => R): () => R {
  let thrown = false;
  return () => {
    if (!thrown) {
      thrown = true;
      throw error;
    }
    return fn();
  };
}
