/**
 * The producer half of the Kafka adapter, over the low-level (librdkafka) API of
 * @confluentinc/kafka-javascript: records are handed to librdkafka without a promise per record, in
 * slices with a turn of the event loop between them (slices.ts). Only failed records are reported
 * (`delivery.report.only.error`): where the outcome is confirmed anyway, a success report per record
 * would cost the main thread for nothing. At-least-once: a call resolves once librdkafka has nothing
 * outstanding (flush) and no error report came, and fails on the first failed record. Exactly-once: one
 * transaction per call, with the consumer's offsets (each with its commit metadata) and group metadata
 * (KIP-447), or records only (the
 * outbox relay); the commit fails if any record of the transaction failed.
 * `close()` flushes, then disconnects; `abandon()` (a runtime's destroy) flushes nothing.
 */
import { RdKafka } from '@confluentinc/kafka-javascript';
import { RedfenceError } from '../errors/index.js';
import { configError } from './client-config.js';
import { checkCommitMetadata } from './commit-metadata.js';
import { nativeOffsets } from './committed-offsets.js';
import { connectWatched } from './connect.js';
import { authRefusal } from './permissions.js';
import { nextTurn, SLICE_RECORDS } from './slices.js';
import type { CommitOffset, OutRecord } from './types.js';

export type NativeProducer = InstanceType<typeof RdKafka.Producer>;
export type NativeConsumer = InstanceType<typeof RdKafka.KafkaConsumer>;
type Config = Record<string, unknown>;
type Header = { [key: string]: Buffer | string };

/** librdkafka's local queue is full: wait for room, then hand the record over again. */
const ERR_QUEUE_FULL = -184;
/** A flush's timeout passed with records still outstanding. */
const ERR_TIMED_OUT = -185;
/** A full queue: the longest one wait for room lasts (a flush, which returns as soon as the queue is empty). */
const ROOM_WAIT_MS = 20;
/** One flush's bound: the wait for deliveries looks at failures and abandon() between two. */
const FLUSH_WAIT_MS = 200;

/** librdkafka's PURGE_QUEUE (-152) and PURGE_INFLIGHT (-151): a record dropped by an abort or a close, not refused. */
function isPurge(err: Error): boolean {
  const code = (err.cause as { code?: unknown } | undefined)?.code;
  return code === -152 || code === -151;
}

export function fatal(what: string, cause: unknown): RedfenceError {
  const message = cause instanceof Error ? cause.message : String(cause);
  return new RedfenceError('RF_KAFKA_FATAL', `Kafka: ${what}: ${message}`, { cause });
}

export function callback(fn: (done: (err: unknown) => void) => void): Promise<void> {
  return new Promise((resolve, reject) => fn((err) => (err ? reject(err) : resolve())));
}

function headers(h: OutRecord['headers']): Header[] | undefined {
  if (h === undefined) return undefined;
  const out: Header[] = [];
  for (const [k, v] of Object.entries(h)) {
    if (Array.isArray(v)) for (const x of v) out.push({ [k]: x });
    else out.push({ [k]: v });
  }
  return out;
}

function value(v: Buffer | string | null): Buffer | null {
  return typeof v === 'string' ? Buffer.from(v) : v;
}

function abandonedError(): RedfenceError {
  return new RedfenceError('RF_INVALID_STATE', 'the producer was abandoned (destroy): nothing more is sent');
}

export class DeliveryProducer {
  readonly #p: NativeProducer;
  readonly #transactional: boolean;
  /** The transactional id, for RF_KAFKA_AUTH naming it. */
  readonly #transactionalId: string | undefined;
  readonly #groupId: string | undefined;
  readonly #txnTimeoutMs: number;
  /** Hear the failed records' reports (the calls in flight: a report carries no per-call opaque). */
  readonly #sinks = new Set<(err: Error) => void>();
  /** Error reports that reached JS so far: settle() waits for a turn of the event loop bringing none. */
  #reports = 0;
  /** produce() calls waiting for their deliveries: abandon() rejects them. */
  readonly #waiting = new Set<(err: Error) => void>();
  /**
   * Transactional calls running in librdkafka: the binding frees the client under them if it is
   * disconnected (they take no lock), so abandon() disconnects only once they returned.
   */
  readonly #calls = new Set<Promise<void>>();
  #gone = false;
  #abandoning: Promise<void> | undefined;

  private constructor(
    p: NativeProducer,
    transactionalId: string | undefined,
    txnTimeoutMs: number,
    groupId: string | undefined,
  ) {
    this.#p = p;
    this.#groupId = groupId;
    this.#transactional = transactionalId !== undefined;
    this.#transactionalId = transactionalId;
    this.#txnTimeoutMs = txnTimeoutMs;
    // only failed records are reported (delivery.report.only.error)
    p.on('delivery-report', (err, report) => {
      if (!err) return;
      this.#reports++;
      // refused by the authorizer: RF_KAFKA_AUTH naming the topic (the runtimes close on it)
      const e =
        authRefusal(err, { topic: report?.topic, topicOperation: 'Write', when: 'refuse a produce' }) ??
        new Error(`Kafka: delivery failed: ${err.message}`, { cause: err });
      for (const sink of this.#sinks) sink(e);
    });
    // without a listener an error event would throw; failures surface through reports and calls
    p.on('event.error', () => undefined);
  }

  /**
   * Builds and connects the producer; RF_KAFKA_AUTH at once when the brokers refuse it (connect.ts) or
   * refuse its transactional id. `groupId`: the group whose offsets its transactions carry (named when
   * the authorizer refuses them).
   */
  static async connect(
    config: Config,
    transactionTimeoutMs?: number,
    groupId?: string,
  ): Promise<DeliveryProducer> {
    const transactional = config['transactional.id'] !== undefined;
    let p: NativeProducer;
    try {
      p = new RdKafka.Producer({
        ...config,
        dr_cb: true,
        'delivery.report.only.error': true,
      } as RdKafka.ProducerGlobalConfig);
    } catch (err) {
      throw configError(err, 'producer') ?? err;
    }
    await connectWatched(p, 'producer', {
      poll: (on) => p.setPollInBackground(on),
      brokers: String(config['bootstrap.servers'] ?? 'the bootstrap servers'),
    });
    p.setPollInBackground(true);
    const timeout = Math.max(30_000, transactionTimeoutMs ?? 0);
    if (transactional) {
      try {
        await callback((done) => p.initTransactions(timeout, done));
      } catch (err) {
        await callback((done) => p.disconnect(done)).catch(() => undefined);
        const id = String(config['transactional.id']);
        throw (
          authRefusal(err, { transactionalId: id, when: 'refuse initialising transactions' }) ??
          fatal('cannot initialise transactions', err)
        );
      }
    }
    const id = transactional ? String(config['transactional.id']) : undefined;
    return new DeliveryProducer(p, id, timeout, groupId);
  }

  /** RF_KAFKA_AUTH for a transactional call the authorizer refused (the transactional id, a topic). */
  #refused(err: unknown, records: readonly OutRecord[] = []) {
    const topics = [...new Set(records.map((r) => r.topic))].sort().join(', ');
    return authRefusal(err, {
      transactionalId: this.#transactionalId,
      ...(this.#groupId === undefined ? {} : { group: this.#groupId }),
      ...(topics === '' ? {} : { topic: topics, topicOperation: 'Write' as const }),
      when: 'refuse a transaction',
    });
  }

  /** A transactional call into librdkafka, refused once abandoned and awaited by abandon(). */
  #call(fn: (done: (err: unknown) => void) => void): Promise<void> {
    if (this.#gone) return Promise.reject(abandonedError());
    const c = callback(fn);
    const settled = c.then(
      () => undefined,
      () => undefined,
    );
    this.#calls.add(settled);
    void settled.then(() => this.#calls.delete(settled));
    return c;
  }

  /**
   * True while a transactional call (begin, offsets, commit, abort) runs in librdkafka: it cannot be
   * called back, and abandon() waits for it before it disconnects.
   */
  get busy(): boolean {
    return this.#calls.size > 0;
  }

  /**
   * Hands every record to librdkafka, in order, in slices with a turn of the event loop between them;
   * a full local queue waits for room (successes are not reported, so there is no report to wait for).
   */
  async #send(records: readonly OutRecord[]): Promise<void> {
    const p = this.#p;
    for (let i = 0, slice = 0; i < records.length; ) {
      if (this.#gone) throw abandonedError();
      if (slice === SLICE_RECORDS) {
        slice = 0;
        await nextTurn();
        continue;
      }
      const r = records[i] as OutRecord;
      try {
        // no opaque: the binding keeps one per record until its report, and successes have none
        p.produce(
          r.topic,
          r.partition ?? null,
          value(r.value),
          r.key,
          r.timestamp === undefined ? null : Number(r.timestamp),
          undefined,
          headers(r.headers),
        );
        i++;
        slice++;
      } catch (err) {
        if ((err as { code?: unknown })?.code !== ERR_QUEUE_FULL) throw err;
        // a flush that fails at once (not connected) must not make this a busy loop
        await this.#flush(ROOM_WAIT_MS).catch(() => new Promise((r) => setTimeout(r, ROOM_WAIT_MS)));
        slice = 0;
      }
    }
  }

  /** One flush: resolves true once nothing is outstanding, false when `ms` passed first. */
  #flush(ms: number): Promise<boolean> {
    return new Promise((resolve, reject) =>
      this.#p.flush(ms, (err) => {
        if (!err) resolve(true);
        else if ((err as { code?: unknown }).code === ERR_TIMED_OUT) resolve(false);
        else reject(err);
      }),
    );
  }

  /**
   * Waits until the error reports librdkafka has issued have reached JS. The binding hands them over on
   * a turn of the event loop of their own (up to 100 per turn), possibly after a flush's or a commit's
   * callback: the wait ends with a turn that brought none.
   */
  async #settle(): Promise<void> {
    for (let seen = -1; seen !== this.#reports; ) {
      seen = this.#reports;
      await nextTurn();
    }
  }

  /**
   * At-least-once: resolves once every record was delivered (acks=all): librdkafka has nothing
   * outstanding and none of them was reported failed; fails with the first failed record's report. It
   * returns only once every record of the call is out of librdkafka (delivered or failed), so the
   * reports of one call do not reach the next one; calls that overlap hear each other's failures (safe:
   * the failed step is done again).
   */
  async produce(records: readonly OutRecord[], handedOver?: () => void): Promise<void> {
    if (records.length === 0) {
      handedOver?.();
      return;
    }
    if (this.#gone) throw abandonedError();
    let failed: Error | undefined;
    const sink = (err: Error) => {
      failed ??= err;
    };
    let abandon!: (err: Error) => void;
    const abandoned = new Promise<never>((_, reject) => (abandon = reject));
    abandoned.catch(() => undefined);
    this.#sinks.add(sink);
    this.#waiting.add(abandon);
    try {
      await this.#send(records);
      handedOver?.();
      await Promise.race([abandoned, this.#delivered()]);
      // a failed record's report may reach JS a turn after the flush's callback
      await this.#settle();
      if (failed !== undefined) throw failed;
    } finally {
      this.#sinks.delete(sink);
      this.#waiting.delete(abandon);
    }
  }

  /** Flushes until nothing is outstanding, or abandon(). */
  async #delivered(): Promise<void> {
    while (!this.#gone && !(await this.#flush(FLUSH_WAIT_MS)));
  }

  /**
   * Exactly-once: one transaction with the records and the consumer offsets (with their metadata);
   * aborted on failure. Metadata the broker could not store is refused before the transaction begins.
   * `onRefused` hears the first record the broker refused (its delivery report's error, with the
   * librdkafka code in `cause`): the commit's own error does not say which record or why.
   */
  async transaction(
    records: readonly OutRecord[],
    offsets: readonly CommitOffset[],
    consumer: NativeConsumer | undefined,
    beforeCommit?: () => void,
    onRefused?: (err: Error) => void,
  ): Promise<void> {
    if (!this.#transactional)
      throw new RedfenceError('RF_INVALID_STATE', 'the producer is not transactional');
    checkCommitMetadata(offsets, 'transaction');
    const p = this.#p;
    try {
      await this.#call((done) => p.beginTransaction(done));
    } catch (err) {
      if (this.#gone) throw abandonedError();
      throw this.#refused(err) ?? fatal('cannot begin a transaction', err);
    }
    // The record's own refusal, not an aborted transaction's purge of the records queued beside it: the
    // purge reports (PURGE_QUEUE, PURGE_INFLIGHT) can reach JS before the refused record's own report.
    let refusal: Error | undefined;
    const sink = (err: Error) => {
      if (refusal === undefined || (isPurge(refusal) && !isPurge(err))) refusal = err;
    };
    this.#sinks.add(sink);
    try {
      await this.#send(records);
      // Without offsets (the outbox relay) the transaction holds records only.
      if (offsets.length > 0) {
        if (consumer === undefined)
          throw new RedfenceError('RF_INVALID_ARGUMENT', 'offsets in a transaction need the consumer');
        // each partition's metadata with its offset: committed with the transaction, or not at all
        const tpo = nativeOffsets(offsets);
        await this.#call((done) => p.sendOffsetsToTransaction(tpo, consumer, this.#txnTimeoutMs, done));
      }
      beforeCommit?.();
      // fails (abortable) if any record of the transaction failed
      await this.#call((done) => p.commitTransaction(this.#txnTimeoutMs, done));
    } catch (err) {
      // abandoned: the open transaction is left to the broker (the next producer of the transactional
      // id aborts it when it fences this one, or the transaction timeout does)
      if (this.#gone) throw abandonedError();
      if ((err as { isFatal?: unknown })?.isFatal === true)
        throw this.#refused(err, records) ?? fatal('the transactional producer failed fatally', err);
      try {
        await this.#call((done) => p.abortTransaction(this.#txnTimeoutMs, done));
      } catch {
        // A transaction that can be neither committed nor aborted leaves the producer unusable
        // (every later transaction fails): typically it was fenced by a newer producer.
        throw this.#refused(err, records) ?? fatal('a failed transaction could not be aborted', err);
      }
      await this.#settle();
      // onRefused hears a refused record's report before the call fails
      if (onRefused !== undefined && refusal !== undefined) onRefused(refusal);
      // a record the authorizer refused: RF_KAFKA_AUTH naming its topic, not the commit's own error
      if (refusal !== undefined && RedfenceError.is(refusal, 'RF_KAFKA_AUTH')) throw refusal;
      throw this.#refused(err, records) ?? err;
    } finally {
      this.#sinks.delete(sink);
    }
  }

  async close(): Promise<void> {
    if (this.#abandoning !== undefined) return this.#abandoning;
    const p = this.#p;
    await callback((done) => p.flush(10_000, done)).catch(() => undefined);
    await callback((done) => p.disconnect(done)).catch(() => undefined);
  }

  /**
   * Stops at once (a runtime's destroy()): nothing more is handed over or begun, produce() calls waiting
   * for delivery reports reject (RF_INVALID_STATE), and the producer disconnects without flushing, so
   * records still in librdkafka's queue are dropped (some may have reached the broker). A transactional
   * call already running in librdkafka (a commit) cannot be called back: the disconnect waits for it,
   * and its outcome is the transactional id's next producer's to settle. Idempotent.
   */
  abandon(): Promise<void> {
    this.#abandoning ??= this.#abandon();
    return this.#abandoning;
  }

  async #abandon(): Promise<void> {
    this.#gone = true;
    const err = abandonedError();
    for (const reject of this.#waiting) reject(err);
    this.#waiting.clear();
    await Promise.all([...this.#calls]);
    const p = this.#p;
    // flush(0): hand nothing more over, wait for nothing; librdkafka drops what is still queued
    await callback((done) => p.disconnect(0, done)).catch(() => undefined);
  }
}
