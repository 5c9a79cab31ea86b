/**
 * The sweeper prunes pending outputs of keys that are not written again once their partition's committed
 * offset has passed them (a key written again is pruned by its own apply). It sweeps a partition
 *
 * - after the Kafka step, every `sweepEvery` committed batches of the partition (started by the step,
 *   not awaited by it);
 * - from a timer, when the partition committed since its last sweep and `sweepIntervalMs` have passed
 *   (a slow or idle partition);
 * - on revocation and on close, for what this instance committed, so a clean stop leaves no pending
 *   output below the committed offsets.
 *
 * Pruning below an offset this instance committed is always safe (commits follow produce), also while
 * batches of the partition are being applied. Sweeps of one partition run one after another. A failed
 * sweep is logged and done again later; none runs during a Redis outage.
 */
import type { Fence } from '../fence/index.js';
import type { Logger } from '../runtime/logger.js';
import type { OwnedPartition } from './partition-table.js';

export interface SweepContext {
  readonly fence: Pick<Fence, 'sweep'>;
  readonly log: Logger;
  readonly every: number;
  readonly intervalMs: number;
  /** The partitions the timer looks at (owned, not fenced). */
  partitions(): readonly OwnedPartition[];
  outage(): boolean;
}

interface SweepState {
  /** Committed batches since the partition was assigned. */
  batches: number;
  /** The committed offset the last sweep pruned below (-1: none yet). */
  swept: number;
  sweptAt: number;
  running: Promise<void> | undefined;
  /** A sweep was due while one ran: one more after it. */
  again: boolean;
}

export class Sweeper {
  readonly #ctx: SweepContext;
  readonly #state = new WeakMap<OwnedPartition, SweepState>();
  #timer: NodeJS.Timeout | undefined;

  constructor(ctx: SweepContext) {
    this.#ctx = ctx;
  }

  /**
   * Called inside the Kafka step after each committed batch of `entry`: every `every` batches a sweep
   * starts beside the step, never awaited by it (the next produce and commit need not wait for Redis
   * deletes); while one of the partition's sweeps runs, one more is due after it (it covers every
   * commit made meanwhile).
   */
  committed(entry: OwnedPartition): void {
    const st = this.#of(entry);
    if (++st.batches % this.#ctx.every === 0) this.#kick(entry, st);
  }

  /** One sweep of the partition now, or one more after the running one (never more than one waiting). */
  #kick(entry: OwnedPartition, st: SweepState): void {
    if (st.running !== undefined) {
      st.again = true;
      return;
    }
    void this.sweep(entry).then(() => {
      if (!st.again) return;
      st.again = false;
      this.#kick(entry, st);
    });
  }

  start(): void {
    this.#timer ??= setInterval(() => void this.#tick(), this.#ctx.intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /**
   * Sweeps each partition that committed since its last sweep; gives up waiting after `timeoutMs` (the
   * sweeps go on, their errors logged). For revocation and close.
   */
  async sweepAll(entries: readonly OwnedPartition[], timeoutMs: number): Promise<void> {
    if (this.#ctx.outage()) return;
    const all = Promise.all(entries.map((e) => this.sweep(e)));
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), timeoutMs);
      timer.unref();
    });
    try {
      if ((await Promise.race([all, late])) === 'late')
        this.#ctx.log.warn(
          { partitions: entries.map((e) => e.partition), timeoutMs },
          'sweep did not finish in time',
        );
    } finally {
      clearTimeout(timer);
    }
  }

  /** Prunes the partition below its committed offset, after any sweep of it still running. */
  sweep(entry: OwnedPartition): Promise<void> {
    const st = this.#of(entry);
    const run = (st.running ?? Promise.resolve()).then(() => this.#sweepOnce(entry, st));
    st.running = run;
    void run.finally(() => {
      if (st.running === run) st.running = undefined;
    });
    return run;
  }

  async #tick(): Promise<void> {
    if (this.#ctx.outage()) return;
    const now = Date.now();
    for (const entry of this.#ctx.partitions()) {
      const st = this.#of(entry);
      if (st.running === undefined && entry.committed > st.swept && now - st.sweptAt >= this.#ctx.intervalMs)
        await this.sweep(entry);
    }
  }

  async #sweepOnce(entry: OwnedPartition, st: SweepState): Promise<void> {
    const committed = entry.committed;
    if (committed <= 0 || committed <= st.swept) return;
    const { topic, partition } = entry;
    try {
      for (let more = true; more; ) more = (await this.#ctx.fence.sweep(topic, partition, committed)).more;
      st.swept = committed;
      st.sweptAt = Date.now();
    } catch (err) {
      this.#ctx.log.warn({ topic, partition, err: (err as Error).message }, 'sweep failed; retried later');
    }
  }

  #of(entry: OwnedPartition): SweepState {
    let st = this.#state.get(entry);
    if (st === undefined) {
      st = { batches: 0, swept: -1, sweptAt: Date.now(), running: undefined, again: false };
      this.#state.set(entry, st);
    }
    return st;
  }
}
