/**
 * What a user writes for side effects (a REST call, a database write): a handler definition. Beside
 * `defineProcessor` (state in Redis, outputs to Kafka), a handler's work is outside Kafka; the runtime
 * (src/handler/) runs `handle` concurrently across keys and in order within a key, commits offsets
 * only up to the lowest unfinished record, and retries, classifies and dead-letters failures.
 */
import { RedfenceError } from '../errors/index.js';
import type { Headers } from '../kafka/types.js';
import { type ClassifyRules, checkClassifyRules } from '../retry/classify.js';
import { type RetryTopicsOptions, resolveRetryTopics } from '../retry/retry-topics.js';
import type { Logger } from '../runtime/logger.js';

/** One consumed record, decoded. Never log `value` or `key`: they may carry personal data. */
export interface HandlerRecord<T> {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly key: Buffer | null;
  readonly value: T;
  readonly headers: Headers;
  /** Milliseconds since the epoch as a decimal string, `-1` when none. */
  readonly timestamp: string;
}

/** The outcome of `ctx.once`: `ran` false when the id was marked done already (the function did not run). */
export type OnceResult<R> = { readonly ran: true; readonly value: R } | { readonly ran: false };

/** A database client inside `ctx.transaction`: pg's PoolClient fits. */
export interface SqlClient {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[]; rowCount: number | null }>;
}

/** Given to `handle` with each record. */
export interface HandlerContext {
  /** The record's idempotency id: the definition's `id(record)`, else `<topic>/<partition>/<offset>`. */
  readonly id: string;
  /** 1 on the first try, 2 on the first retry, ... (in place, within this delivery). */
  readonly attempt: number;
  /**
   * The delivery: 1 from the main topic, n from its (n-1)th retry topic (Spring's
   * `retry_topic-attempts`). Always 1 without `retry.topics`.
   */
  readonly deliveryAttempt: number;
  /**
   * Aborts when the record is abandoned on revocation or close (reason: RF_HANDLER_ABANDONED), or when
   * this call runs past `retry.attemptTimeoutMs` (reason: RF_HANDLER_TIMEOUT).
   */
  readonly signal: AbortSignal;
  /** The runtime's logger, with topic/partition/offset bound (never the value). */
  readonly log: Logger;
  /**
   * Runs `fn` unless `id` (default: ctx.id) is marked done in Redis, then marks it done, fenced by
   * the partition's epoch: a zombie (an instance that lost the partition) cannot mark it and fails
   * with RF_HANDLER_FENCED. Needs the `redis` option.
   */
  once<R>(fn: () => Promise<R>): Promise<OnceResult<R>>;
  once<R>(id: string, fn: () => Promise<R>): Promise<OnceResult<R>>;
  /**
   * One PostgreSQL transaction: inserts `id` (default: ctx.id) into the processed-ids table, runs
   * `fn(db)` and commits both together; an id that is there already rolls back and skips `fn`
   * (`ran: false`). Needs the `postgres` option.
   */
  transaction<R>(fn: (db: SqlClient) => Promise<R>): Promise<OnceResult<R>>;
  transaction<R>(id: string, fn: (db: SqlClient) => Promise<R>): Promise<OnceResult<R>>;
}

export interface HandlerDefinition<T = unknown> {
  /** Input topic. */
  readonly input: string;
  /** Names the handler: part of its Redis keys and of its default group `redfence-handler-<name>`. `[A-Za-z0-9_.-]{1,64}`. */
  readonly name: string;
  /** Dead-letter topic. Default `<input>.DLT`. */
  readonly deadLetter?: string;
  /** Turns a record value into `record.value`. Throwing is fatal (RF_HANDLER_DECODE, dead-lettered). Default: JSON.parse (null stays null). */
  readonly decode?: (value: Buffer | null, record: HandlerRecord<Buffer | null>) => T;
  /** The idempotency id of a record (e.g. an event id from the value). Default `<topic>/<partition>/<offset>`. */
  readonly id?: (record: HandlerRecord<T>) => string;
  /** Which failures are retried and which go straight to the dead-letter topic (src/retry/classify.ts). */
  readonly classify?: ClassifyRules;
  /**
   * Non-blocking retries through retry topics (docs/handlers.md "Retry topics"); createHandler's
   * option `retry.topics`, when given, replaces it.
   */
  readonly retry?: { readonly topics?: RetryTopicsOptions };
  /** The side effect. Resolving marks the record done; throwing is classified. */
  readonly handle: (record: HandlerRecord<T>, ctx: HandlerContext) => Promise<void>;
}

const NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const FIELDS = new Set(['input', 'name', 'deadLetter', 'decode', 'id', 'classify', 'retry', 'handle']);

/** Marks what defineHandler returned, for code that tells processor and handler definitions apart. */
export const HANDLER_KIND = Symbol.for('redfence.handler');

/** True for what defineHandler returned. */
export function isHandlerDefinition(v: unknown): v is HandlerDefinition<unknown> {
  return typeof v === 'object' && v !== null && (v as Record<symbol, unknown>)[HANDLER_KIND] === true;
}

/**
 * Declares a handler; checks its shape at once.
 *
 * @example
 * export default defineHandler({
 *   input: 'orders', name: 'notify',
 *   id: (r: HandlerRecord<{ eventId: string }>) => r.value.eventId,
 *   handle: async (record, ctx) => {
 *     await ctx.once(() => fetch('http://mailer/send', { method: 'POST', signal: ctx.signal }));
 *   },
 * });
 */
export function defineHandler<T>(definition: HandlerDefinition<T>): HandlerDefinition<T> {
  const d = definition as unknown as Record<string, unknown>;
  const bad = (path: string, why: string) =>
    new RedfenceError('RF_INVALID_OPTIONS', `handler definition: ${path} ${why}`);
  if (typeof d !== 'object' || d === null || Array.isArray(d)) throw bad('', 'must be an object');
  for (const k of Object.keys(d))
    if (!FIELDS.has(k)) throw bad(k, `is not a known field (known: ${[...FIELDS].join(', ')})`);
  if (typeof d.input !== 'string' || d.input === '') throw bad('input', 'must be a non-empty string');
  if (typeof d.name !== 'string' || !NAME.test(d.name)) throw bad('name', `must match ${NAME.source}`);
  if (d.deadLetter !== undefined && (typeof d.deadLetter !== 'string' || d.deadLetter === ''))
    throw bad('deadLetter', 'must be a non-empty string');
  if (d.deadLetter === d.input) throw bad('deadLetter', 'must differ from input');
  for (const k of ['decode', 'id'] as const)
    if (d[k] !== undefined && typeof d[k] !== 'function') throw bad(k, 'must be a function');
  if (typeof d.handle !== 'function') throw bad('handle', 'must be an async function (record, ctx)');
  checkClassifyRules('handler definition: classify', d.classify);
  if (d.retry !== undefined) {
    const r = d.retry as Record<string, unknown> | null;
    if (typeof r !== 'object' || r === null || Array.isArray(r)) throw bad('retry', 'must be { topics }');
    for (const k of Object.keys(r))
      if (k !== 'topics') throw bad(`retry.${k}`, 'is not a known field (known: topics)');
    resolveRetryTopics(r.topics, 'handler definition');
  }
  if (!isHandlerDefinition(d) && Object.isExtensible(d))
    Object.defineProperty(d, HANDLER_KIND, { value: true });
  return definition;
}
