/**
 * The commit pipeline: the Kafka half of the cycle. A batch applied in Redis is queued here; one Kafka
 * step (produce + commit, or one transaction) runs at a time and takes the whole queue (group commit:
 * the outputs in delivery order, the highest next offset per partition). Steps run one after another,
 * so commits stay in order and exactly-once keeps one open transaction at a time.
 *
 * - Back-pressure: past `groupCommitRecords` waiting records, enqueue() waits for the step in flight.
 * - Commit interval: with `commitIntervalMs` > 0 a step starts no sooner than that long after the
 *   previous one started, unless `groupCommitRecords` are waiting or a drain asks for it (as Kafka
 *   Streams' commit.interval.ms): fewer, larger transactions for some latency.
 * - Seek-back: when a step fails, every partition in it and in the queue behind it is sought back to
 *   its first unproduced offset (`rewound` in the partition table) and the queue is dropped.
 * - Fatal latch: a fatal Kafka error (a fenced producer) drops the queue and starts no further step.
 * - Drain: resolves once the queue is empty and no step is in flight (revocation, close).
 * - Records alone (a topology's ticks): a Kafka step of their own, between two batch steps, ahead of
 *   the queued batches, with no offsets (exactly-once: a transaction holding them alone).
 */
import { RedfenceError } from '../errors/index.js';
import type { KafkaPort, OutRecord } from '../kafka/types.js';
import type { RedfenceMetrics } from '../metrics/index.js';
import type { Logger } from '../runtime/logger.js';
import { type BatchTrace, NO_TRACING, type Tracer } from '../telemetry/tracing.js';
import type { CrashHook } from './crash-points.js';
import type { ProcessingMode } from './options.js';
import type { OwnedPartition } from './partition-table.js';

/** A batch applied in Redis, waiting for its Kafka step. */
export interface QueuedBatch {
  readonly entry: OwnedPartition;
  readonly out: readonly OutRecord[];
  /** Input records in the batch. */
  readonly count: number;
  /** Its first offset and the next offset after it. */
  readonly first: number;
  readonly next: number;
  readonly highWatermark: string;
  /** Timestamp of the batch's last record (ms since the epoch, decimal), for the time lag. */
  readonly lastTimestamp?: string;
  /** The batch's span, linked from the Kafka step's. */
  readonly trace?: BatchTrace;
  /**
   * Committed with the offset (a topology's stream time after the batch): the partition's commit carries
   * the metadata of its last batch in the step. Omitted: none.
   */
  readonly metadata?: string;
}

export interface CommitContext {
  readonly mode: ProcessingMode;
  readonly kafka: Pick<KafkaPort, 'produce' | 'commit' | 'produceTransactionally' | 'seek'>;
  readonly log: Logger;
  readonly metrics: RedfenceMetrics | undefined;
  readonly groupCommitRecords: number;
  /** Least time between the starts of two Kafka steps (0: a step starts as soon as there is work). */
  readonly commitIntervalMs?: number;
  /** A fatal Kafka error: the latch is set; the owner closes the processor. */
  fatal(error: Error): void;
  /** Runs inside the step, in order, for each batch it committed (counts, sweep cadence). */
  committed(batch: QueuedBatch): Promise<void>;
  /** One span per Kafka step (tracing off: none). */
  readonly tracing?: Pick<Tracer, 'step'>;
  /** Fault tests' crash points (src/processor/crash-points.ts); none by default. */
  readonly crash?: CrashHook;
}

interface PartitionStep {
  readonly entry: OwnedPartition;
  offset: number;
  first: number;
  metadata: string | undefined;
}

export class CommitPipeline {
  readonly #ctx: CommitContext;
  /** The step in flight; the next one starts only after it has finished. */
  #tail: Promise<void> | undefined;
  #queued: QueuedBatch[] = [];
  #queuedRecords = 0;
  #broken = false;
  /** When the last step started (performance.now()), and the timer of a step held by the interval. */
  #lastStart = Number.NEGATIVE_INFINITY;
  #held: NodeJS.Timeout | undefined;
  #draining = 0;
  /** Records waiting for a step of their own (alone()), with their callers. */
  #alone: { records: readonly OutRecord[]; done: (err?: unknown) => void }[] = [];

  constructor(ctx: CommitContext) {
    this.#ctx = ctx;
  }

  /** Set by a fatal Kafka error: applied batches are no longer produced (the processor is closing). */
  get broken(): boolean {
    return this.#broken;
  }

  /**
   * Queues an applied batch for the next Kafka step and starts one unless one is in flight. Resolves at
   * once, or, past the group-commit limit, once the step in flight has finished. A batch at or after
   * its partition's seek-back offset is dropped: it is delivered again, and producing it now would
   * commit past the failed records.
   */
  async enqueue(batch: QueuedBatch): Promise<void> {
    const rewound = batch.entry.rewound;
    if (rewound !== undefined && rewound <= batch.first) return;
    this.#queued.push(batch);
    this.#queuedRecords += batch.count;
    this.#kick();
    while (this.#queuedRecords > this.#ctx.groupCommitRecords && this.#tail !== undefined) {
      await this.#tail.catch(() => undefined);
    }
  }

  /**
   * Produces records that belong to no batch (a topology's ticks) in a Kafka step of their own, once the
   * step in flight has finished and before the queued batches' next one: exactly-once, a transaction
   * holding them alone, no offsets; at-least-once, produced and awaited. Being alone, its outcome is
   * nobody else's: a failed step seeks nothing back and fails no batch (a fatal error still closes the
   * processor). Resolves once they are produced (committed); rejects when the step failed or the
   * pipeline is broken.
   */
  alone(records: readonly OutRecord[]): Promise<void> {
    if (this.#broken) return Promise.reject(brokenError());
    return new Promise<void>((resolve, reject) => {
      this.#alone.push({ records, done: (err) => (err === undefined ? resolve() : reject(err)) });
      this.#kick();
    });
  }

  /** Waits until every queued batch has had its Kafka step. */
  async drain(): Promise<void> {
    this.#draining++;
    try {
      this.#kick();
      for (let tail = this.#tail; tail !== undefined; tail = this.#tail) await tail.catch(() => undefined);
    } finally {
      this.#draining--;
    }
  }

  /**
   * destroy(): the queue is dropped and no further step starts (the batches in it were applied in Redis
   * and are never produced or committed here: the next owner processes them again).
   */
  abandon(): void {
    this.#broken = true;
    clearTimeout(this.#held);
    this.#held = undefined;
    this.#dropQueue();
    for (const a of this.#alone.splice(0)) a.done(brokenError());
  }

  #kick(): void {
    if (this.#broken) {
      this.#dropQueue();
      for (const a of this.#alone.splice(0)) a.done(brokenError());
    }
    if (this.#tail !== undefined) return;
    if (this.#alone.length > 0) {
      this.#startAlone();
      return;
    }
    if (this.#queued.length === 0) return;
    const interval = this.#ctx.commitIntervalMs ?? 0;
    const wait = this.#lastStart + interval - performance.now();
    if (wait > 0 && this.#draining === 0 && this.#queuedRecords < this.#ctx.groupCommitRecords) {
      this.#held ??= setTimeout(() => {
        this.#held = undefined;
        this.#kick();
      }, Math.ceil(wait));
      this.#held.unref();
      return;
    }
    if (this.#held !== undefined) {
      clearTimeout(this.#held);
      this.#held = undefined;
    }
    this.#lastStart = performance.now();
    const batches = this.#queued;
    this.#dropQueue();
    const step = this.#step(batches).finally(() => {
      if (this.#tail === step) this.#tail = undefined;
      this.#kick();
    });
    step.catch(() => undefined); // observed by back-pressure, drain() and the processor
    this.#tail = step;
  }

  /** Starts the step of the records waiting in alone(), all of them in one step. */
  #startAlone(): void {
    const waiting = this.#alone.splice(0);
    const records = waiting.flatMap((a) => a.records);
    const ctx = this.#ctx;
    const run = async () => {
      if (ctx.mode === 'exactly-once') await ctx.kafka.produceTransactionally(records, []);
      else await ctx.kafka.produce(records);
    };
    const step = run()
      .then(
        () => {
          for (const a of waiting) a.done();
        },
        (err: unknown) => {
          const e = err as { fatal?: unknown; message?: unknown; code?: unknown };
          ctx.log.warn(
            { records: records.length, err: String(e?.message), code: e?.code },
            'produce of records alone failed',
          );
          if (e?.fatal === true || stopsTheRuntime(err)) {
            this.#broken = true;
            ctx.fatal(err as Error);
          }
          for (const a of waiting) a.done(err);
        },
      )
      .finally(() => {
        if (this.#tail === step) this.#tail = undefined;
        this.#kick();
      });
    this.#tail = step;
  }

  #dropQueue(): void {
    this.#queued = [];
    this.#queuedRecords = 0;
  }

  async #step(batches: readonly QueuedBatch[]): Promise<void> {
    const ctx = this.#ctx;
    const out: OutRecord[] = [];
    const next = new Map<OwnedPartition, PartitionStep>();
    for (const b of batches) {
      for (const o of b.out) out.push(o);
      const n = next.get(b.entry);
      if (n === undefined)
        next.set(b.entry, { entry: b.entry, offset: b.next, first: b.first, metadata: b.metadata });
      else if (b.next >= n.offset) {
        // a partition's batches come in offset order: its last one's metadata goes with the offset
        n.offset = b.next;
        n.metadata = b.metadata;
      }
    }
    const offsets = [...next.values()].map((n) => ({
      topic: n.entry.topic,
      partition: n.entry.partition,
      offset: n.offset,
      ...(n.metadata === undefined ? {} : { metadata: n.metadata }),
    }));
    const started = performance.now();
    const trace = (ctx.tracing ?? NO_TRACING).step(batches, out, ctx.mode);
    try {
      if (ctx.mode === 'exactly-once') {
        await ctx.kafka.produceTransactionally(out, offsets, () => ctx.crash?.('in-transaction'));
      } else {
        await ctx.kafka.produce(out, () => ctx.crash?.('after-produce'));
        ctx.crash?.('after-delivery');
        await ctx.kafka.commit(offsets);
      }
    } catch (err) {
      trace.failed(err);
      this.#failed(err, next);
      throw err;
    } finally {
      trace.end();
    }
    ctx.crash?.('after-commit');
    ctx.metrics?.commit(ctx.mode, (performance.now() - started) / 1000);
    for (const b of batches) {
      const end = Number(b.highWatermark);
      const progress = { committed: b.next, end, lastRecordTime: Number(b.lastTimestamp) };
      ctx.metrics?.lag(b.entry.topic, b.entry.partition, Math.max(0, end - b.next), progress);
      b.entry.committed = Math.max(b.entry.committed, b.next);
      await ctx.committed(b);
    }
  }

  #failed(err: unknown, next: Map<OwnedPartition, PartitionStep>): void {
    const e = err as { fatal?: unknown; code?: unknown; message?: unknown };
    this.#ctx.log.warn(
      { partitions: [...next.keys()].map((n) => n.partition), err: String(e?.message), code: e?.code },
      'produce/commit failed; the batches are redelivered',
    );
    // Delivered again from their first records (the fence answers REEMIT for what it applied), and so
    // is every batch queued behind them: none of them was produced.
    for (const b of this.#queued) {
      const n = next.get(b.entry);
      if (n === undefined)
        next.set(b.entry, { entry: b.entry, offset: b.next, first: b.first, metadata: undefined });
      else n.first = Math.min(n.first, b.first);
    }
    this.#dropQueue();
    if (e?.fatal === true || stopsTheRuntime(err)) {
      // no further Kafka step: the processor closes; the partitions' next owner starts from the commits
      this.#broken = true;
      this.#ctx.fatal(err as Error);
      return;
    }
    for (const n of next.values()) {
      const rw = n.entry.rewound;
      if (rw === undefined || rw > n.first) this.#seekBack(n.entry, n.first);
    }
  }

  #seekBack(entry: OwnedPartition, offset: number): void {
    entry.rewound = offset;
    try {
      this.#ctx.kafka.seek({ topic: entry.topic, partition: entry.partition }, offset);
    } catch (err) {
      // not assigned anymore: its next owner starts from the committed offset
      this.#ctx.log.debug(
        { topic: entry.topic, partition: entry.partition, err: (err as Error).message },
        'seek back skipped',
      );
    }
  }
}

/**
 * A Kafka error no redelivery can get past: the client failed fatally, or the authorizer refused the
 * step (RF_KAFKA_AUTH, src/kafka/permissions.ts: redelivering would only spin until it is granted).
 */
function stopsTheRuntime(err: unknown): boolean {
  return RedfenceError.is(err, 'RF_KAFKA_FATAL') || RedfenceError.is(err, 'RF_KAFKA_AUTH');
}

function brokenError(): RedfenceError {
  return new RedfenceError('RF_INVALID_STATE', 'the commit pipeline is stopped: nothing more is produced');
}
