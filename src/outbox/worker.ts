/**
 * One role's publishing loop: read the role's oldest pending rows (pos order, skipping aggregates that
 * have a parked row), route them, refuse what preflight refuses (an attempt; parked after the last),
 * publish the rest, mark them published. At-least-once: produce and await every delivery report, then
 * mark. Exactly-once: one Kafka transaction per batch holding the records and a progress record, then
 * mark (progress.ts says why a crash in between neither loses nor doubles rows). An aggregate whose row
 * was refused publishes nothing after it in that batch: it waits behind that row until it is published
 * or parked. One batch at a time per role: a slow Kafka slows the loop, and rows wait in PostgreSQL.
 * `stop()` (close) finishes the batch in flight; `abandon()` (destroy) does not: nothing more is marked.
 */

import { RedfenceError } from '../errors/index.js';
import type { DeliveryProducer } from '../kafka/producer.js';
import type { OutRecord } from '../kafka/types.js';
import type { Logger } from '../runtime/logger.js';
import { nameClash, type OutboxIdentity, sameOutbox } from './identity.js';
import type { OutboxMetrics } from './metrics.js';
import type { Queryable } from './pg.js';
import { codeName, errorText, RecordRefusal, refusalOf } from './produce-errors.js';
import { checkProgressOwner, lastProgress, progressRecord } from './progress.js';
import { markPublished, pendingRows, refuseRows } from './role-rows.js';
import { PARK_FIX, type ParkReason, parkReason, preflight, recordOf } from './routing.js';
import type { OutboxNames } from './schema.js';

export type RelayMode = 'exactly-once' | 'at-least-once';

/** What a worker reads and calls: never the relay itself. */
export interface WorkerContext {
  readonly db: Queryable;
  readonly names: OutboxNames;
  readonly roles: number;
  readonly mode: RelayMode;
  readonly topicTemplate: string;
  readonly batchSize: number;
  readonly maxAttempts: number;
  readonly maxMessageBytes: number;
  /** Least time from one transaction's start to the next when the first was not full (0 in at-least-once). */
  readonly transactionIntervalMs: number;
  readonly progressTopic: string;
  /** The outbox's identity, written in every progress record and checked against the topic's. */
  readonly identity: OutboxIdentity;
  /** Whether the relay has checked the progress topic's owner already (roles taken at start-up). */
  readonly ownerChecked: boolean;
  /** librdkafka properties of every Kafka client (brokers, security). */
  readonly clientProperties: Record<string, unknown>;
  readonly logger: Logger;
  readonly metrics: OutboxMetrics;
  /** A new producer for a role: idempotent, or (exactly-once) transactional with the role's id. */
  producer(role: number): Promise<DeliveryProducer>;
  /** Which of these topics exist. */
  existing(topics: readonly string[]): Promise<ReadonlySet<string>>;
  /** Resolves on a NOTIFY, after the poll interval, or when `stop` resolves. */
  idle(stop: Promise<void>): Promise<void>;
  /** Whether this relay's lease of the role is still valid by its own clock. */
  leaseValid(role: number): boolean;
}

const sleep = (ms: number, stop: Promise<void>) =>
  Promise.race([new Promise<void>((r) => setTimeout(r, ms).unref()), stop]);

export class RoleWorker {
  readonly role: number;
  readonly epoch: number;
  readonly #ctx: WorkerContext;
  #stopping = false;
  #stop!: () => void;
  readonly #stopped: Promise<void>;
  #done: Promise<void> | undefined;
  #producer: DeliveryProducer | undefined;
  /** True while the loop waits for its producer to connect (librdkafka's call cannot be called back). */
  #connecting = false;
  /** Set by abandon(): nothing more is marked or refused, the producer is abandoned, not flushed. */
  #abandoned = false;
  /** Aborts the progress reads of an abandoned worker. */
  readonly #abort = new AbortController();
  #abandoning: Promise<void> | undefined;
  /** Resolved once abandon() returned: a stop() waiting for the loop returns then too. */
  readonly #cutShort: Promise<void>;
  #cut!: () => void;
  #recovered = false;
  /** Set when the worker ended on a fatal Kafka error (fenced): the relay drops the role. */
  fatal: Error | undefined;
  /**
   * Settles once the role can publish: its producer is connected and (exactly-once) the old holder is
   * fenced and its last transaction marked. Resolves too when the worker stops first; rejects when the
   * brokers refuse the relay's credentials or options (RF_KAFKA_AUTH, RF_INVALID_OPTIONS): the loop
   * still tries again, with backoff.
   */
  readonly ready: Promise<void>;
  #settle!: (err?: Error) => void;

  constructor(ctx: WorkerContext, role: number, epoch: number) {
    this.#ctx = ctx;
    this.role = role;
    this.epoch = epoch;
    this.#stopped = new Promise<void>((r) => (this.#stop = r));
    this.#cutShort = new Promise<void>((r) => (this.#cut = r));
    this.ready = new Promise<void>((resolve, reject) => {
      this.#settle = (err) => (err === undefined ? resolve() : reject(err));
    });
    this.ready.catch(() => undefined);
  }

  start(): void {
    this.#done ??= this.#run();
  }

  /** Finishes the batch in flight, closes the role's producer and stops; an abandon() cuts it short. */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.#stop();
    await Promise.race([this.#done, this.#cutShort]);
  }

  /**
   * Stops at once, without finishing the batch in flight (the relay's destroy): its rows stay pending
   * (nothing more is marked or counted as an attempt), produce calls waiting for delivery reports are
   * dropped and the producer disconnects without flushing. Records already sent may reach Kafka: in
   * exactly-once mode the role's next holder settles them (fence, then the progress record), in
   * at-least-once mode they are duplicates of rows it publishes again. Resolves once the loop ended, or
   * at once when it waits in a librdkafka call that cannot be called back (its producer connecting, a
   * transaction committing): the loop then only disconnects when that call returns.
   */
  abandon(): Promise<void> {
    this.#abandoning ??= this.#abandon().finally(() => this.#cut());
    return this.#abandoning;
  }

  async #abandon(): Promise<void> {
    this.#abandoned = true;
    this.#stopping = true;
    this.#stop();
    this.#abort.abort();
    const p = this.#producer;
    const gone = p?.abandon();
    if (this.#connecting || p?.busy) return;
    await Promise.all([this.#done, gone]);
  }

  async #run(): Promise<void> {
    const ctx = this.#ctx;
    let backoff = 50;
    try {
      while (!this.#stopping) {
        try {
          // before the role's transactional producer fences anyone: is the partition this outbox's?
          if (!this.#recovered && !ctx.ownerChecked && ctx.mode === 'exactly-once' && !this.#producer)
            await checkProgressOwner(
              ctx.clientProperties,
              ctx.progressTopic,
              [this.role],
              ctx.identity,
              undefined,
              this.#abort.signal,
            );
          if (this.#producer === undefined) {
            this.#connecting = true;
            try {
              this.#producer = await ctx.producer(this.role);
            } finally {
              this.#connecting = false;
            }
          }
          if (this.#stopping) break;
          if (!this.#recovered) {
            // until it succeeds (a progress partition without a leader yet, a timeout): publishing
            // before the last holder's transaction is marked would publish its rows again
            if (ctx.mode === 'exactly-once') await this.#recover();
            this.#recovered = true;
            this.#settle();
          }
          if (!ctx.leaseValid(this.role)) {
            await sleep(100, this.#stopped);
            continue;
          }
          const started = performance.now();
          const published = await this.#batch(this.#producer);
          backoff = 50;
          if (published === 0) await ctx.idle(this.#stopped);
          else if (published < ctx.batchSize && ctx.transactionIntervalMs > 0) {
            // exactly-once: a part-full batch waits out the interval, so that a trickle of rows makes
            // fewer, larger transactions (each one costs the broker markers on every partition it touched)
            const left = ctx.transactionIntervalMs - (performance.now() - started);
            if (left > 0) await sleep(left, this.#stopped);
          }
        } catch (err) {
          if (this.#abandoned) return; // what failed was cut short on purpose
          if (RedfenceError.is(err, 'RF_OUTBOX_NAME_CLASH')) {
            // not retried: the relay gives the role back, and start() rejects with it
            this.fatal = err as Error;
            this.#settle(err as Error);
            ctx.logger.error({ role: this.role, code: 'RF_OUTBOX_NAME_CLASH' }, (err as Error).message);
            return;
          }
          if (RedfenceError.is(err, 'RF_KAFKA_FATAL')) {
            this.fatal = err as Error;
            ctx.logger.warn(
              { role: this.role, err: (err as Error).message },
              'outbox role stopped: Kafka fatal',
            );
            return;
          }
          if (RedfenceError.is(err, 'RF_KAFKA_AUTH') || RedfenceError.is(err, 'RF_INVALID_OPTIONS'))
            this.#settle(err as Error);
          ctx.logger.warn({ role: this.role, err: (err as Error).message }, 'outbox batch failed; retrying');
          await sleep(backoff, this.#stopped);
          backoff = Math.min(backoff * 2, 5000);
        }
      }
    } finally {
      this.#settle();
      const p = this.#producer;
      this.#producer = undefined;
      await (this.#abandoned ? p?.abandon() : p?.close());
    }
  }

  /** Throws once abandoned: an abandoned worker writes nothing more to the outbox. */
  #alive(): void {
    if (this.#abandoned)
      throw new RedfenceError('RF_INVALID_STATE', `outbox role ${this.role} was abandoned (destroy)`);
  }

  /** Exactly-once, after fencing: mark what the role's last committed transaction published. */
  async #recover(): Promise<void> {
    const ctx = this.#ctx;
    const last = await lastProgress(
      ctx.clientProperties,
      ctx.progressTopic,
      this.role,
      undefined,
      this.#abort.signal,
    );
    // another outbox's relay committed here meanwhile (both started on an empty topic): its ids are
    // not this outbox's rows
    if (last !== undefined && !sameOutbox(ctx.identity, last.outbox))
      throw nameClash(ctx.progressTopic, ctx.identity, last.outbox);
    if (last !== undefined && last.ids.length > 0) await this.#mark(last.ids);
  }

  /** One batch; the rows it published (0: nothing to publish, or only refused rows). */
  async #batch(producer: DeliveryProducer): Promise<number> {
    const ctx = this.#ctx;
    const started = performance.now();
    const rows = await pendingRows(ctx.db, ctx.names, ctx.roles, this.role, ctx.batchSize);
    if (rows.length === 0) return 0;
    const groups = new Map<string, Array<{ id: string; record: OutRecord }>>();
    const refused: Array<{ id: string; why: string }> = [];
    const blocked = new Set<string>();
    const routed = rows.map((row) => ({ row, record: recordOf(ctx.topicTemplate, row) }));
    const existing = await ctx.existing([...new Set(routed.map((r) => r.record.topic))]);
    const pf = { maxMessageBytes: ctx.maxMessageBytes, exists: (t: string) => existing.has(t) };
    for (const { row, record } of routed) {
      const aggregate = `${row.aggregatetype}\u001f${row.aggregateid}`;
      if (blocked.has(aggregate)) continue;
      const why = preflight(record, pf);
      if (why === undefined) {
        const g = groups.get(aggregate) ?? [];
        g.push({ id: row.id, record });
        groups.set(aggregate, g);
      } else {
        refused.push({ id: row.id, why });
        blocked.add(aggregate);
      }
    }
    const all = [...groups.values()].flat();
    let published = 0;
    if (all.length > 0) {
      try {
        await this.#publish(producer, all);
        published = all.length;
      } catch (err) {
        if (RedfenceError.is(err, 'RF_KAFKA_FATAL')) throw err;
        // Kafka away, a timeout, an aborted transaction: no row is at fault, and publishing each
        // aggregate alone would only wait out the same timeout once per aggregate (backoff instead)
        if (!(err instanceof RecordRefusal) || err.kind === 'retriable') throw err;
        published = await this.#isolate(producer, [...groups.values()], err, refused);
      }
    }
    if (refused.length > 0) await this.#refuse(refused);
    ctx.metrics.batch((performance.now() - started) / 1000);
    return published;
  }

  /** Publishes rows (in their order) and marks them. A record's own refusal is a RecordRefusal. */
  async #publish(producer: DeliveryProducer, rows: ReadonlyArray<{ id: string; record: OutRecord }>) {
    const ctx = this.#ctx;
    const ids = rows.map((r) => r.id);
    const records = rows.map((r) => r.record);
    if (ctx.mode === 'exactly-once') {
      const progress = progressRecord(ctx.progressTopic, this.role, {
        epoch: this.epoch,
        ids,
        outbox: ctx.identity,
      });
      let refusal: Error | undefined;
      try {
        await producer.transaction([...records, progress], [], undefined, undefined, (e) => {
          refusal ??= e;
        });
      } catch (err) {
        // the broker's reason for the record it refused, if one was: it decides whether rows are at fault
        if (RedfenceError.is(err, 'RF_KAFKA_FATAL')) throw err;
        throw refusalOf(refusal) ?? err;
      }
    } else {
      try {
        await producer.produce(records);
      } catch (err) {
        // a delivery report's error, or librdkafka refusing a record as it is handed over
        throw refusalOf(err) ?? err;
      }
    }
    await this.#mark(ids);
    ctx.metrics.published(ids.length);
  }

  /**
   * A batch failed. Kafka may be down (nothing is the rows' fault), or the broker refused a record for
   * itself (a topic's own size limit, its authorisation). Each aggregate's rows are then published on
   * their own; an aggregate whose record is refused with a permanent or unknown code (produce-errors.ts)
   * counts an attempt on its first row (parked after the last). Retriable codes and failures that are not
   * a record's (a transaction that cannot begin or commit) count nothing: those rows are tried again by
   * the next batch, and if nothing went through at all the batch failed as a whole (backoff).
   */
  async #isolate(
    producer: DeliveryProducer,
    groups: ReadonlyArray<ReadonlyArray<{ id: string; record: OutRecord }>>,
    first: unknown,
    refused: Array<{ id: string; why: string }>,
  ): Promise<number> {
    let published = 0;
    const failed: Array<{ id: string; why: string }> = [];
    for (const g of groups) {
      try {
        await this.#publish(producer, g);
        published += g.length;
      } catch (err) {
        if (RedfenceError.is(err, 'RF_KAFKA_FATAL')) throw err;
        if (err instanceof RecordRefusal && err.kind !== 'retriable') {
          failed.push({
            id: (g[0] as { id: string }).id,
            why: `Kafka refused the record (${codeName(err.code)}${err.kind === 'unknown' ? ', an error code the relay does not know' : ''}): ${errorText(err)}`,
          });
          if (err.kind === 'unknown')
            this.#ctx.logger.warn(
              { role: this.role, code: err.code },
              'outbox record refused with an unknown error code: counted as an attempt',
            );
        }
      }
    }
    if (published === 0 && failed.length === 0) throw first;
    refused.push(...failed);
    return published;
  }

  /**
   * Marks rows published. Their records are in Kafka already: the mark is retried until it lands (or
   * the worker stops; exactly-once, the role's next holder marks them from the progress record).
   */
  async #mark(ids: readonly string[]): Promise<void> {
    const n = this.#ctx.names;
    for (let delay = 50; ; delay = Math.min(delay * 2, 2000)) {
      this.#alive();
      try {
        await markPublished(this.#ctx.db, n, ids);
        return;
      } catch (err) {
        if (this.#stopping) throw err;
        this.#ctx.logger.warn(
          { role: this.role, err: (err as Error).message },
          'marking rows failed; retrying',
        );
        await sleep(delay, this.#stopped);
      }
    }
  }

  async #refuse(refused: ReadonlyArray<{ id: string; why: string }>): Promise<void> {
    this.#alive();
    const parked = await refuseRows(this.#ctx.db, this.#ctx.names, refused, this.#ctx.maxAttempts);
    this.#ctx.metrics.failed(refused.length, 0);
    // one line per kind of reason, with the first row's reason and the fix, where the operator looks first
    const byClass = new Map<ParkReason, string[]>();
    for (const why of parked) {
      const c = parkReason(why);
      byClass.set(c, [...(byClass.get(c) ?? []), why]);
    }
    for (const [reason, whys] of byClass) {
      this.#ctx.metrics.parked(reason, whys.length);
      this.#ctx.logger.warn(
        { role: this.role, parked: whys.length, reason },
        `outbox rows parked: ${whys[0]}; ${PARK_FIX[reason]}, then redfence outbox retry --all`,
      );
    }
  }
}
