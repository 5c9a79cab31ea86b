/**
 * One record of a handler, from decode to its outcome: decode (once), then attempts of `handle` with
 * a fresh context each; a failure is classified (src/retry/classify.ts): retriable -> backoff
 * (src/runtime/backoff.ts) and try again, up to `retry.attempts`; fatal or out of attempts -> a
 * dead letter (Spring Kafka's format, src/processor/emit.ts) produced and awaited, retried until
 * Kafka takes it. Redis being unreachable (RF_REDIS_UNAVAILABLE from ctx.once) does not use up
 * attempts: Redis down stalls the record, never dead-letters it.
 *
 * When the partition stops (revocation, close, fence) a record waiting for a retry or failing
 * afterwards is abandoned (not committed): the next owner handles it. Logs carry topic, partition,
 * offset and the error's class and code, never the key, the value or the error's message.
 */

import type { DeadLetterReason } from '../dead-letter/build.js';
import { deadLetterRecord } from '../dead-letter/record.js';
import type { HandlerDefinition, HandlerRecord } from '../definition/handler.js';
import { RedfenceError } from '../errors/index.js';
import type { InRecord, KafkaPort, OutRecord } from '../kafka/types.js';
import type { RedfenceMetrics } from '../metrics/index.js';
import { type ClassifyRules, classify } from '../retry/classify.js';
import {
  keepFirstOriginals,
  lastHeader,
  type ResolvedRetryTopics,
  readAttempts,
  retryRecord,
  retryTopicName,
} from '../retry/retry-topics.js';
import { backoffMs, delay } from '../runtime/backoff.js';
import { errorShape, type Logger } from '../runtime/logger.js';
import { NO_TRACING, type RecordTrace, type Tracer } from '../telemetry/tracing.js';
import { attemptDeadline, handlerContext } from './context.js';
import { rateLimitedFor } from './hold.js';
import type { KeyOrderStore, KeyWriter } from './key-order.js';
import type { OnceStore } from './once.js';
import type { ResolvedRetry } from './options.js';
import type { SqlOnce } from './postgres.js';
import type { RetryMetrics } from './retry-metrics.js';
import type { Outcome, PartitionWork } from './scheduler.js';

export interface RunnerContext {
  readonly definition: HandlerDefinition<unknown>;
  readonly rules: ClassifyRules;
  readonly retry: ResolvedRetry;
  /** The main topic (records of other topics are from its retry topics). */
  readonly input: string;
  readonly topics: ResolvedRetryTopics | undefined;
  readonly keyOrder: KeyOrderStore | undefined;
  readonly retryMetrics: RetryMetrics | undefined;
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
  /** A Kafka error no retry gets past (RF_KAFKA_AUTH): the handler closes. */
  fatal?(err: Error): void;
  /** Holds a rate-limited record's partition paused for `ms` (src/handler/hold.ts). */
  hold(part: PartitionWork, ms: number): Promise<void>;
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

/** A decoded record with its id and where it stands in the retry chain. */
interface ReadRecord {
  readonly rec: HandlerRecord<unknown>;
  readonly id: string;
  /** From a retry topic (not the main topic). */
  readonly fromRetry: boolean;
  /** Which delivery of the record this is (1 on the main topic; `kafka_dlt-*` attempts on a retry topic). */
  readonly delivery: number;
  /** The main-topic offset it stands for. */
  readonly origin: string;
}

/** One record on its way through the attempts. */
interface Job extends ReadRecord {
  readonly part: PartitionWork;
  readonly record: InRecord;
  readonly log: Logger;
  readonly writer: KeyWriter;
  /** Gives up the key's retry-chain head when this record holds it, then `outcome`. */
  finish(outcome: Outcome): Promise<Outcome>;
}

/** Runs one record to its outcome; never rejects. */
export async function runRecord(ctx: RunnerContext, part: PartitionWork, record: InRecord): Promise<Outcome> {
  const { topic, partition } = part.tp;
  const log = boundLog(ctx.log, { topic, partition, offset: record.offset });
  const read = readRecord(ctx, part, record, log);
  if ('then' in read) return read;
  const writer: KeyWriter = { topic, partition, epoch: read.fromRetry ? part.orderEpoch : part.epoch };
  let chained = false;
  if (ctx.keyOrder !== undefined && record.key !== null) {
    const keys = ctx.keyOrder;
    const key = record.key;
    const state = await untilRedis(part, log, () => keys.check(writer, key, read.origin, !read.fromRetry));
    if (state === undefined) return 'abandoned';
    if (state === 'fenced') return fencedHere(ctx, part, log);
    if (state === 'behind') return park(ctx, part, record, read.delivery, log);
    chained = state === 'head';
  }
  const finish = async (outcome: Outcome): Promise<Outcome> => {
    if (!chained || outcome === 'abandoned') return outcome;
    const keys = ctx.keyOrder as KeyOrderStore;
    const ok = await untilRedis(part, log, () => keys.done(writer, record.key as Buffer, read.origin));
    if (ok === undefined) return 'abandoned';
    return ok ? outcome : fencedHere(ctx, part, log);
  };
  return attemptAll(ctx, { ...read, part, record, log, writer, finish });
}

/**
 * Decodes the record (once) and takes its id; a record that fails either is dead-lettered (the
 * returned promise).
 */
function readRecord(
  ctx: RunnerContext,
  part: PartitionWork,
  record: InRecord,
  log: Logger,
): ReadRecord | Promise<Outcome> {
  const { topic, partition } = part.tp;
  const offset = Number(record.offset);
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
  const fromRetry = ctx.topics !== undefined && topic !== ctx.input;
  const delivery = fromRetry ? readAttempts(record.headers) : 1;
  const origin = fromRetry ? originOffset(record) : record.offset;
  // a retried record keeps the main topic record's default id on every topic of the chain
  let id = fromRetry ? `${ctx.input}/${partition}/${origin}` : `${topic}/${partition}/${offset}`;
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
  return { rec, id, fromRetry, delivery, origin };
}

/**
 * The attempts of `handle`, each with a fresh context (and deadline): done; a rate-limited try held
 * and repeated; a retriable failure backed off and tried again; fatal or out of attempts, a dead
 * letter, the next retry topic or (per `dlt`) dropped.
 */
async function attemptAll(ctx: RunnerContext, job: Job): Promise<Outcome> {
  const { part, record, rec, id, delivery, origin, writer, fromRetry, log, finish } = job;
  const { topic, partition } = part.tp;
  const offset = Number(record.offset);
  const def = ctx.definition;
  const t = ctx.topics;
  const { attempts, baseMs, maxMs, attemptTimeoutMs } = ctx.retry;
  for (let attempt = 1, failures = 0; ; attempt++) {
    if (part.stopped) return 'abandoned';
    const trace = (ctx.tracing ?? NO_TRACING).record(record, attempt);
    const timer =
      attemptTimeoutMs > 0 ? attemptDeadline(part, attemptTimeoutMs, topic, partition, offset) : undefined;
    try {
      const signal = timer?.signal ?? part.abandon.signal;
      await trace.run(() => def.handle(rec, handlerContext(ctx, part, id, attempt, delivery, log, signal)));
      trace.end();
      return finish('done');
    } catch (thrown) {
      // a call that ran out of time fails with the timeout, whatever it threw when its signal aborted
      const err = timer?.expired && !part.stopped ? timer.error(thrown) : thrown;
      trace.failed(err);
      if (RedfenceError.is(err, 'RF_HANDLER_FENCED')) return fencedHere(ctx, part, log);
      if (part.stopped) return 'abandoned';
      const holdMs = rateLimitedFor(err);
      if (holdMs !== undefined) {
        trace.end();
        attempt--; // a rate-limited try is not an attempt: hold, then the same record again
        await ctx.hold(part, holdMs);
        continue;
      }
      const infra = RedfenceError.is(err, 'RF_REDIS_UNAVAILABLE');
      if (!infra) failures++;
      const verdict = classify(err, ctx.rules);
      if (verdict === 'fatal' || failures >= attempts) {
        if (t === undefined)
          return deadLetter(ctx, part, record, trace, 'processing-error', err, log, verdict, attempt);
        if (verdict !== 'fatal' && delivery < t.maxAttempts)
          return forward(ctx, part, record, err, delivery, origin, writer, log);
        const why = verdict === 'fatal' ? 'fatal' : 'exhausted';
        if (t.dlt === 'always' || (t.dlt === 'on-fatal' && why === 'fatal'))
          return finish(
            await deadLetter(
              ctx,
              part,
              record,
              trace,
              'processing-error',
              err,
              log,
              verdict,
              delivery,
              fromRetry,
            ),
          );
        log.warn({ ...errorShape(err), verdict, attempts: delivery, dlt: t.dlt }, 'dropping the record');
        ctx.retryMetrics?.dropped(why);
        return finish('dropped');
      }
      trace.end(); // the backoff is not part of the call
      ctx.metrics?.handlerRetry(topic, partition);
      log.debug({ ...errorShape(err), attempt }, 'handler failed: retrying');
      await delay(backoffMs(attempt - 1, baseMs, maxMs), part.stop.signal);
    } finally {
      timer?.clear();
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

function fencedHere(ctx: RunnerContext, part: PartitionWork, log: Logger): Outcome {
  log.warn(
    { error: 'RedfenceError', code: 'RF_HANDLER_FENCED' },
    'a newer owner has the partition: stopping it here',
  );
  ctx.fenced(part);
  return 'abandoned';
}

/** The main-topic offset a retry-topic record stands for (its `kafka_dlt-original-offset`). */
function originOffset(record: InRecord): string {
  const b = lastHeader(record.headers, 'kafka_dlt-original-offset');
  return b !== undefined && b.length === 8 ? b.readBigInt64BE(0).toString() : record.offset;
}

/** Runs a Redis call until it answers; undefined when the partition stopped meanwhile. */
async function untilRedis<R>(part: PartitionWork, log: Logger, fn: () => Promise<R>): Promise<R | undefined> {
  for (let i = 0; ; i++) {
    if (part.stopped) return undefined;
    try {
      return await fn();
    } catch (err) {
      if (part.stopped) return undefined;
      log.warn(errorShape(err), 'retry-chain key order: Redis call failed, retrying');
      await delay(backoffMs(i, 100, 5000), part.stop.signal);
    }
  }
}

/**
 * The authorizer refused the produce (RF_KAFKA_AUTH: a retry or dead-letter topic's Write): retrying
 * would block the partition until someone grants it, so the handler closes (the record is not
 * committed: the next owner handles it again once the permission is there).
 */
function refused(ctx: RunnerContext, err: unknown): boolean {
  if (!RedfenceError.is(err, 'RF_KAFKA_AUTH')) return false;
  ctx.fatal?.(err);
  return true;
}

/** Produces until Kafka takes the record; false when the partition stopped (or Kafka is fatal). */
async function produceUntil(
  ctx: RunnerContext,
  part: PartitionWork,
  out: OutRecord,
  log: Logger,
): Promise<boolean> {
  for (let i = 0; ; i++) {
    if (part.stopped) return false;
    try {
      await ctx.kafka.produce([out]);
      return true;
    } catch (err) {
      if (RedfenceError.is(err, 'RF_KAFKA_FATAL')) return false;
      if (refused(ctx, err)) return false;
      log.warn({ ...errorShape(err), to: out.topic }, 'the record was not produced: retrying');
      await delay(backoffMs(i, 200, 10_000), part.stop.signal);
    }
  }
}

/** Sends a failed record to the retry topic of step `delivery` (Redis first with keyOrder, then produce). */
async function forward(
  ctx: RunnerContext,
  part: PartitionWork,
  record: InRecord,
  error: unknown,
  delivery: number,
  origin: string,
  writer: KeyWriter,
  log: Logger,
): Promise<Outcome> {
  const t = ctx.topics as ResolvedRetryTopics;
  const delayMs = t.delays[delivery - 1] as number;
  const topic = retryTopicName(ctx.input, delayMs);
  if (ctx.keyOrder !== undefined && record.key !== null) {
    const keys = ctx.keyOrder;
    const ok = await untilRedis(part, log, () => keys.block(writer, record.key as Buffer, origin));
    if (ok === undefined) return 'abandoned';
    if (!ok) return fencedHere(ctx, part, log);
  }
  const out = retryRecord({
    record,
    topic,
    groupId: ctx.groupId,
    error,
    attempts: delivery + 1,
    dueMs: Date.now() + delayMs,
  });
  log.info({ ...errorShape(error), attempt: delivery, to: topic }, 'forwarding the record to a retry topic');
  if (!(await produceUntil(ctx, part, out, log))) return 'abandoned';
  ctx.retryMetrics?.forwarded(topic);
  return 'forwarded';
}

/** Parks a record behind its blocked key: to the first retry topic, its attempt count unchanged. */
async function park(
  ctx: RunnerContext,
  part: PartitionWork,
  record: InRecord,
  delivery: number,
  log: Logger,
): Promise<Outcome> {
  const t = ctx.topics as ResolvedRetryTopics;
  const delayMs = t.delays[0] as number;
  const topic = retryTopicName(ctx.input, delayMs);
  const out = retryRecord({
    record,
    topic,
    groupId: ctx.groupId,
    error: undefined,
    attempts: delivery,
    dueMs: Date.now() + delayMs,
  });
  log.debug({ to: topic }, 'key blocked by a record in the retry chain: parked behind it');
  return (await produceUntil(ctx, part, out, log)) ? 'forwarded' : 'abandoned';
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
  fromRetry = false,
): Promise<Outcome> {
  const dl = trace.stamp(deadLetterRecord(ctx.deadLetterTopic, ctx.groupId, record, reason, error));
  if (fromRetry && dl.headers)
    keepFirstOriginals(dl.headers as Record<string, Buffer | Buffer[] | string>, record.headers);
  log.warn({ ...errorShape(error), reason, verdict, attempts }, 'dead-lettering the record');
  for (let i = 0; ; i++) {
    if (part.stopped) return 'abandoned';
    try {
      await ctx.kafka.produce([dl]);
      ctx.metrics?.deadLetter(reason);
      return 'dead-lettered';
    } catch (err) {
      if (RedfenceError.is(err, 'RF_KAFKA_FATAL') || refused(ctx, err)) return 'abandoned';
      log.warn(errorShape(err), 'the dead letter was not produced: retrying');
      await delay(backoffMs(i, 200, 10_000), part.stop.signal);
    }
  }
}
