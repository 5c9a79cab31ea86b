/**
 * One record of a handler, from decode to its outcome: decode (once), then attempts of `handle` with
 * a fresh context each; a failure is classified (src/retry/classify.ts): retriable -> backoff
 * (src/processor/backoff.ts) and try again, up to `retry.attempts`; fatal or out of attempts -> a
 * dead letter (Spring Kafka's format, src/processor/emit.ts) produced and awaited, retried until
 * Kafka takes it. Redis being unreachable (RF_REDIS_UNAVAILABLE from ctx.once) does not use up
 * attempts: Redis down stalls the record, never dead-letters it.
 *
 * When the partition stops (revocation, close, fence) a record waiting for a retry or failing
 * afterwards is abandoned (not committed): the next owner handles it. Logs carry topic, partition,
 * offset and the error's class and code, never the key, the value or the error's message.
 */
import type {
  HandlerContext,
  HandlerDefinition,
  HandlerRecord,
  OnceResult,
  SqlClient,
} from '../definition/handler.js';
import { RedfenceError } from '../errors/index.js';
import type { InRecord, KafkaPort } from '../kafka/types.js';
import type { RedfenceMetrics } from '../metrics/index.js';
import { backoffMs, delay } from '../processor/backoff.js';
import type { DeadLetterReason } from '../processor/dead-letter.js';
import { deadLetterRecord } from '../processor/emit.js';
import type { Logger } from '../processor/logger.js';
import { type ClassifyRules, classify } from '../retry/classify.js';
import { NO_TRACING, type RecordTrace, type Tracer } from '../telemetry/tracing.js';
import { rateLimitedFor } from './hold.js';
import { fencedError, type OnceStore } from './once.js';
import type { RetryOptions } from './options.js';
import type { SqlOnce } from './postgres.js';
import type { Outcome, PartitionWork } from './scheduler.js';

export interface RunnerContext {
  readonly definition: HandlerDefinition<unknown>;
  readonly rules: ClassifyRules;
  readonly retry: Required<RetryOptions>;
  readonly groupId: string;
  readonly deadLetterTopic: string;
  readonly kafka: Pick<KafkaPort, 'produce'>;
  readonly once: OnceStore | undefined;
  readonly sql: SqlOnce | undefined;
  readonly log: Logger;
  readonly metrics: RedfenceMetrics | undefined;
  /** ctx.once found a newer owner: stop the partition (never commit it). */
  fenced(part: PartitionWork): void;
  /** One span per handle call (tracing off: none). */
  readonly tracing?: Pick<Tracer, 'record'>;
  /** Holds a rate-limited record's partition paused for `ms` (src/handler/hold.ts). */
  hold(part: PartitionWork, ms: number): Promise<void>;
}

/** The error's class and code, for logs (its message may quote the value). */
export function errorShape(err: unknown): { error: string; code?: string } {
  const name = err instanceof Error ? err.name : typeof err;
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' || typeof code === 'number'
    ? { error: name, code: String(code) }
    : { error: name };
}

function jsonDecode(value: Buffer | null): unknown {
  return value === null ? null : JSON.parse(value.toString('utf8'));
}

function boundLog(log: Logger, fields: object): Logger {
  return {
    debug: (o, m) => log.debug({ ...fields, ...o }, m),
    info: (o, m) => log.info({ ...fields, ...o }, m),
    warn: (o, m) => log.warn({ ...fields, ...o }, m),
    error: (o, m) => log.error({ ...fields, ...o }, m),
  };
}

function context(
  ctx: RunnerContext,
  part: PartitionWork,
  id: string,
  attempt: number,
  log: Logger,
): HandlerContext {
  const { topic, partition } = part.tp;
  const once = async <R>(a: string | (() => Promise<R>), b?: () => Promise<R>): Promise<OnceResult<R>> => {
    const [key, fn] = typeof a === 'string' ? [a, b] : [id, a];
    if (ctx.once === undefined)
      throw new RedfenceError('RF_INVALID_STATE', 'ctx.once needs the handler option "redis"');
    if (typeof fn !== 'function' || key === '')
      throw new RedfenceError('RF_INVALID_ARGUMENT', 'ctx.once takes (fn) or (id, fn) with a non-empty id');
    const state = await ctx.once.check(topic, partition, part.epoch, key);
    if (state === 'fenced') throw fencedError(topic, partition, part.epoch);
    if (state === 'done') return { ran: false };
    const value = await fn();
    if (!(await ctx.once.mark(topic, partition, part.epoch, key)))
      throw fencedError(topic, partition, part.epoch);
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
    return ctx.sql.run(key, fn, part.abandon.signal);
  };
  return { id, attempt, signal: part.abandon.signal, log, once, transaction } as HandlerContext;
}

/** Runs one record to its outcome; never rejects. */
export async function runRecord(ctx: RunnerContext, part: PartitionWork, record: InRecord): Promise<Outcome> {
  const { topic, partition } = part.tp;
  const offset = Number(record.offset);
  const log = boundLog(ctx.log, { topic, partition, offset: record.offset });
  const def = ctx.definition;
  const raw: HandlerRecord<Buffer | null> = {
    topic,
    partition,
    offset,
    key: record.key,
    value: record.value,
    headers: record.headers,
    timestamp: record.timestamp,
  };
  let value: unknown;
  try {
    value = def.decode ? def.decode(record.value, raw) : jsonDecode(record.value);
  } catch (err) {
    const e = new RedfenceError('RF_HANDLER_DECODE', `${topic}/${partition}@${offset}: decode failed`, {
      cause: err,
    });
    return deadLetter(ctx, part, record, failedTrace(ctx, record, e), 'undecodable', e, log);
  }
  const rec: HandlerRecord<unknown> = { ...raw, value };
  let id = `${topic}/${partition}/${offset}`;
  if (def.id) {
    try {
      const given = def.id(rec);
      if (typeof given !== 'string' || given === '')
        throw new RedfenceError(
          'RF_INVALID_ARGUMENT',
          "the handler definition's id() must return a non-empty string",
        );
      id = given;
    } catch (err) {
      return deadLetter(ctx, part, record, failedTrace(ctx, record, err), 'processing-error', err, log);
    }
  }
  const { attempts, baseMs, maxMs } = ctx.retry;
  for (let attempt = 1, failures = 0; ; attempt++) {
    if (part.stopped) return 'abandoned';
    const trace = (ctx.tracing ?? NO_TRACING).record(record, attempt);
    try {
      await trace.run(() => def.handle(rec, context(ctx, part, id, attempt, log)));
      return 'done';
    } catch (err) {
      trace.failed(err);
      if (RedfenceError.is(err, 'RF_HANDLER_FENCED')) {
        log.warn(errorShape(err), 'a newer owner has the partition: stopping it here');
        ctx.fenced(part);
        return 'abandoned';
      }
      if (part.stopped) return 'abandoned';
      const holdMs = rateLimitedFor(err);
      if (holdMs !== undefined) {
        attempt--; // a rate-limited try is not an attempt: hold, then the same record again
        await ctx.hold(part, holdMs);
        continue;
      }
      const infra = RedfenceError.is(err, 'RF_REDIS_UNAVAILABLE');
      if (!infra) failures++;
      const verdict = classify(err, ctx.rules);
      if (verdict === 'fatal' || failures >= attempts)
        return deadLetter(ctx, part, record, trace, 'processing-error', err, log, verdict, attempt);
      trace.end(); // the backoff is not part of the call
      ctx.metrics?.handlerRetry(topic, partition);
      log.debug({ ...errorShape(err), attempt }, 'handler failed: retrying');
      await delay(backoffMs(attempt - 1, baseMs, maxMs), part.stop.signal);
    } finally {
      trace.end();
    }
  }
}

/** The (ended) span of a record that failed before any handle call (decode, id): it is dead-lettered. */
function failedTrace(ctx: RunnerContext, record: InRecord, err: unknown): RecordTrace {
  const trace = (ctx.tracing ?? NO_TRACING).record(record, undefined);
  trace.failed(err);
  trace.end();
  return trace;
}

async function deadLetter(
  ctx: RunnerContext,
  part: PartitionWork,
  record: InRecord,
  trace: RecordTrace,
  reason: DeadLetterReason,
  error: unknown,
  log: Logger,
  verdict = 'fatal',
  attempts = 1,
): Promise<Outcome> {
  const dl = trace.stamp(deadLetterRecord(ctx.deadLetterTopic, ctx.groupId, record, reason, error));
  log.warn({ ...errorShape(error), reason, verdict, attempts }, 'dead-lettering the record');
  for (let i = 0; ; i++) {
    if (part.stopped) return 'abandoned';
    try {
      await ctx.kafka.produce([dl]);
      ctx.metrics?.deadLetter(reason);
      return 'dead-lettered';
    } catch (err) {
      if (RedfenceError.is(err, 'RF_KAFKA_FATAL')) return 'abandoned';
      log.warn(errorShape(err), 'the dead letter was not produced: retrying');
      await delay(backoffMs(i, 200, 10_000), part.stop.signal);
    }
  }
}
