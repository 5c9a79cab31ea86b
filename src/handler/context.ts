/**
 * What one `handle` attempt gets: its `ctx` (ids, `ctx.once` fenced by the partition's epoch,
 * `ctx.transaction`, the signal) and, with `retry.attemptTimeoutMs`, the attempt's deadline. Used by
 * src/handler/runner.ts for every attempt.
 */
import type { HandlerContext, OnceResult, SqlClient } from '../definition/handler.js';
import { RedfenceError } from '../errors/index.js';
import type { ResolvedRetryTopics } from '../retry/retry-topics.js';
import type { Logger } from '../runtime/logger.js';
import { fencedError, type OnceStore } from './once.js';
import type { SqlOnce } from './postgres.js';
import type { PartitionWork } from './scheduler.js';

/** What the context reads of the runner's (RunnerContext has these). */
export interface ContextSources {
  /** The main topic (records of other topics are from its retry topics). */
  readonly input: string;
  readonly topics: ResolvedRetryTopics | undefined;
  readonly once: OnceStore | undefined;
  readonly sql: SqlOnce | undefined;
}

/** The `ctx` of one attempt; `signal` is the partition's abandon signal, or the attempt's deadline joined to it. */
export function handlerContext(
  ctx: ContextSources,
  part: PartitionWork,
  id: string,
  attempt: number,
  deliveryAttempt: number,
  log: Logger,
  signal: AbortSignal,
): HandlerContext {
  const { topic, partition } = part.tp;
  const once = async <R>(a: string | (() => Promise<R>), b?: () => Promise<R>): Promise<OnceResult<R>> => {
    const [key, fn] = typeof a === 'string' ? [a, b] : [id, a];
    if (ctx.once === undefined)
      throw new RedfenceError('RF_INVALID_STATE', 'ctx.once needs the handler option "redis"');
    if (typeof fn !== 'function' || key === '')
      throw new RedfenceError('RF_INVALID_ARGUMENT', 'ctx.once takes (fn) or (id, fn) with a non-empty id');
    // a retry-topic record: the input partition's marker, fenced by the retry partition's epoch
    const fromRetry = ctx.topics !== undefined && topic !== ctx.input;
    const [at, epoch, via] = fromRetry ? [ctx.input, part.orderEpoch, topic] : [topic, part.epoch, undefined];
    const state = await ctx.once.check(at, partition, epoch, key, via);
    if (state === 'fenced') throw fencedError(topic, partition, epoch);
    if (state === 'done') return { ran: false };
    const value = await fn();
    if (!(await ctx.once.mark(at, partition, epoch, key, via))) throw fencedError(topic, partition, epoch);
    return { ran: true, value };
  };
  const transaction = async <R>(
    a: string | ((db: SqlClient) => Promise<R>),
    b?: (db: SqlClient) => Promise<R>,
  ): Promise<OnceResult<R>> => {
    const [key, fn] = typeof a === 'string' ? [a, b] : [id, a];
    if (ctx.sql === undefined)
      throw new RedfenceError('RF_INVALID_STATE', 'ctx.transaction needs the handler option "postgres"');
    if (typeof fn !== 'function' || key === '')
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        'ctx.transaction takes (fn) or (id, fn) with a non-empty id',
      );
    return ctx.sql.run(key, fn, signal);
  };
  return {
    id,
    attempt,
    deliveryAttempt,
    signal,
    log,
    once,
    transaction,
  } as HandlerContext;
}

/** An attempt's deadline (see {@link attemptDeadline}). */
export interface AttemptDeadline {
  /** Aborts when the partition's work is abandoned or the deadline passes. */
  readonly signal: AbortSignal;
  /** True once the deadline has passed. */
  readonly expired: boolean;
  /** The RF_HANDLER_TIMEOUT error, with what the call threw as its cause. */
  error(cause?: unknown): RedfenceError;
  /** Stops the timer and unhooks from the partition's signal; call when the attempt settles. */
  clear(): void;
}

/**
 * One attempt's deadline: a signal that aborts when the partition's work is abandoned (its reason then)
 * or after `ms` (an RF_HANDLER_TIMEOUT reason). Joined by hand, not with AbortSignal.any: a composite of
 * the partition's long-lived signal, made for every attempt, would stay referenced from it in the Node
 * versions supported (nodejs/node#55351, #64476); `clear()` removes the one listener this adds.
 */
export function attemptDeadline(
  part: PartitionWork,
  ms: number,
  topic: string,
  partition: number,
  offset: number,
): AttemptDeadline {
  const error = (cause?: unknown) =>
    new RedfenceError(
      'RF_HANDLER_TIMEOUT',
      `${topic}/${partition}@${offset}: handle ran past ${ms} ms`,
      cause === undefined ? undefined : { cause },
    );
  const own = new AbortController();
  const abandon = part.abandon.signal;
  const onAbandon = () => own.abort(abandon.reason);
  if (abandon.aborted) own.abort(abandon.reason);
  else abandon.addEventListener('abort', onAbandon, { once: true });
  let expired = false;
  const t = setTimeout(() => {
    expired = true;
    own.abort(error());
  }, ms);
  return {
    signal: own.signal,
    get expired() {
      return expired;
    },
    error,
    clear: () => {
      clearTimeout(t);
      abandon.removeEventListener('abort', onAbandon);
    },
  };
}
