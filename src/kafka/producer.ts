/**
 * The producer half of the Kafka adapter, over the low-level (librdkafka) API of
 * @confluentinc/kafka-javascript: records are handed to librdkafka without a promise per record, and
 * one delivery tracker per call counts the delivery reports (polled on a background thread). A call
 * resolves when every report arrived, and fails on the first failed one. Exactly-once: one transaction
 * per call, with the consumer's offsets and group metadata (KIP-447), or records only (the outbox relay).
 * `close()` flushes, then disconnects; `abandon()` (a runtime's destroy) flushes nothing.
 */
import { RdKafka } from '@confluentinc/kafka-javascript';
import { RedfenceError } from '../errors/index.js';
import { configError } from './client-config.js';
import { connectWatched } from './connect.js';
import type { CommitOffset, OutRecord } from './types.js';

export type NativeProducer = InstanceType<typeof RdKafka.Producer>;
export type NativeConsumer = InstanceType<typeof RdKafka.KafkaConsumer>;
type Config = Record<string, unknown>;
type Header = { [key: string]: Buffer | string };

/** librdkafka's local queue is full: wait for reports, then hand the record over again. */
const ERR_QUEUE_FULL = -184;

interface Tracker {
  remaining: number;
  failed: boolean;
  resolve(): void;
  reject(err: Error): void;
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
  readonly #txnTimeoutMs: number;
  /** Resolved by the next delivery report: a full local queue waits on it. */
  #reported: { promise: Promise<void>; resolve(): void } | undefined;
  /** produce() calls waiting for their delivery reports: abandon() rejects them. */
  readonly #waiting = new Set<(err: Error) => void>();
  /**
   * Transactional calls running in librdkafka: the binding frees the client under them if it is
   * disconnected (they take no lock), so abandon() disconnects only once they returned.
   */
  readonly #calls = new Set<Promise<void>>();
  #gone = false;
  #abandoning: Promise<void> | undefined;

  private constructor(p: NativeProducer, transactional: boolean, txnTimeoutMs: number) {
    this.#p = p;
    this.#transactional = transactional;
    this.#txnTimeoutMs = txnTimeoutMs;
    p.on('delivery-report', (err, report) => {
      const t = (report as { opaque?: Tracker } | undefined)?.opaque;
      const r = this.#reported;
      this.#reported = undefined;
      r?.resolve();
      if (t === undefined || t.failed) return;
      if (err) {
        t.failed = true;
        t.reject(new Error(`Kafka: delivery failed: ${err.message}`, { cause: err }));
      } else if (--t.remaining === 0) t.resolve();
    });
    // without a listener an error event would throw; failures surface through reports and calls
    p.on('event.error', () => undefined);
  }

  /** Builds and connects the producer; RF_KAFKA_AUTH at once when the brokers refuse it (connect.ts). */
  static async connect(config: Config, transactionTimeoutMs?: number): Promise<DeliveryProducer> {
    const transactional = config['transactional.id'] !== undefined;
    let p: NativeProducer;
    try {
      p = new RdKafka.Producer({ ...config, dr_cb: true } as RdKafka.ProducerGlobalConfig);
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
        throw fatal('cannot initialise transactions', err);
      }
    }
    return new DeliveryProducer(p, transactional, timeout);
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

  /** Hands every record to librdkafka, in order; a full local queue waits for delivery reports. */
  async #send(records: readonly OutRecord[], tracker: Tracker | undefined): Promise<void> {
    for (let i = 0; i < records.length; ) {
      if (this.#gone) throw abandonedError();
      const r = records[i] as OutRecord;
      try {
        this.#p.produce(
          r.topic,
          r.partition ?? null,
          value(r.value),
          r.key,
          r.timestamp === undefined ? null : Number(r.timestamp),
          tracker,
          headers(r.headers),
        );
        i++;
      } catch (err) {
        if ((err as { code?: unknown })?.code !== ERR_QUEUE_FULL) throw err;
        if (this.#reported === undefined) {
          let resolve!: () => void;
          const promise = new Promise<void>((r) => (resolve = r));
          this.#reported = { promise, resolve };
        }
        await this.#reported.promise;
      }
    }
  }

  /** At-least-once: resolves once every record's delivery report arrived (acks=all). */
  async produce(records: readonly OutRecord[], handedOver?: () => void): Promise<void> {
    if (records.length === 0) {
      handedOver?.();
      return;
    }
    if (this.#gone) throw abandonedError();
    let tracker!: Tracker;
    const delivered = new Promise<void>((resolve, reject) => {
      tracker = { remaining: records.length, failed: false, resolve, reject };
    });
    const abandon = (err: Error) => {
      tracker.failed = true;
      tracker.reject(err);
    };
    this.#waiting.add(abandon);
    try {
      try {
        await this.#send(records, tracker);
      } catch (err) {
        tracker.failed = true;
        throw err;
      }
      handedOver?.();
      await delivered;
    } finally {
      this.#waiting.delete(abandon);
    }
  }

  /**
   * Exactly-once: one transaction with the records and the consumer offsets; aborted on failure.
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
    const p = this.#p;
    try {
      await this.#call((done) => p.beginTransaction(done));
    } catch (err) {
      if (this.#gone) throw abandonedError();
      throw fatal('cannot begin a transaction', err);
    }
    try {
      const tracker: Tracker | undefined = onRefused && {
        remaining: records.length,
        failed: false,
        resolve: () => undefined,
        reject: onRefused,
      };
      await this.#send(records, tracker);
      // Without offsets (the outbox relay) the transaction holds records only.
      if (offsets.length > 0) {
        if (consumer === undefined)
          throw new RedfenceError('RF_INVALID_ARGUMENT', 'offsets in a transaction need the consumer');
        const tpo = offsets.map((o) => ({ topic: o.topic, partition: o.partition, offset: o.offset }));
        await this.#call((done) => p.sendOffsetsToTransaction(tpo, consumer, this.#txnTimeoutMs, done));
      }
      beforeCommit?.();
      await this.#call((done) => p.commitTransaction(this.#txnTimeoutMs, done));
    } catch (err) {
      // abandoned: the open transaction is left to the broker (the next producer of the transactional
      // id aborts it when it fences this one, or the transaction timeout does)
      if (this.#gone) throw abandonedError();
      if ((err as { isFatal?: unknown })?.isFatal === true)
        throw fatal('the transactional producer failed fatally', err);
      try {
        await this.#call((done) => p.abortTransaction(this.#txnTimeoutMs, done));
      } catch {
        // A transaction that can be neither committed nor aborted leaves the producer unusable
        // (every later transaction fails): typically it was fenced by a newer producer.
        throw fatal('a failed transaction could not be aborted', err);
      }
      throw err;
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
    this.#reported?.resolve();
    await Promise.all([...this.#calls]);
    const p = this.#p;
    // flush(0): hand nothing more over, wait for nothing; librdkafka drops what is still queued
    await callback((done) => p.disconnect(0, done)).catch(() => undefined);
  }
}
