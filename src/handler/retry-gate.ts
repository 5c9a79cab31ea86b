/**
 * Holds a retry-topic partition's records until they are due (`retry_topic-backoff-timestamp`).
 * Records come in offset order; the head is the first not yet due: it and every record behind it
 * wait. One timer, set for the head's due time, releases what is due: no sleeping in the poll loop,
 * no polling. Held records were never accepted by the scheduler, so no commit passes them.
 *
 * The partition is paused once `limit` records wait (memory stays bounded) and resumed when fewer
 * than half of it do. Pausing at every waiting head instead costs the adapter a seek and a refetch
 * per pause (fetched records are dropped and read again on resume): with 1% of the records retried
 * it took a third off the main topic's throughput (bench/retry/run.ts); holding what was fetched
 * costs nothing.
 */
import type { InRecord } from '../kafka/types.js';
import { readDueMs } from '../retry/retry-topics.js';

export interface GateHooks {
  /** Pause the partition (records wait). */
  hold(): void;
  /** Resume it (nothing waits). */
  release(): void;
  /** Hand due records, in offset order, to the scheduler. */
  accept(records: InRecord[]): void;
  /** After each change: records waiting, and the head's due time (epoch ms, 0 when none). */
  waiting(records: number, headDueMs: number): void;
}

export class RetryGate {
  readonly #hooks: GateHooks;
  #held: InRecord[] = [];
  #holding = false;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  readonly #now: () => number;

  readonly #limit: number;

  constructor(hooks: GateHooks, limit: number, now: () => number = Date.now) {
    this.#hooks = hooks;
    this.#limit = Math.max(1, limit);
    this.#now = now;
  }

  get waiting(): number {
    return this.#held.length;
  }

  offer(records: readonly InRecord[]): void {
    if (this.#stopped) return;
    for (const r of records) this.#held.push(r);
    this.#drain();
  }

  /** Forgets what waits (never accepted, so never committed: the next owner reads it again). */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#held = [];
    this.#hooks.waiting(0, 0);
  }

  #drain(): void {
    if (this.#stopped) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const now = this.#now();
    let n = 0;
    while (n < this.#held.length && readDueMs((this.#held[n] as InRecord).headers) <= now) n++;
    if (n > 0) this.#hooks.accept(this.#held.splice(0, n));
    const waiting = this.#held.length;
    if (this.#holding && waiting < Math.ceil(this.#limit / 2)) {
      this.#holding = false;
      this.#hooks.release();
    } else if (!this.#holding && waiting >= this.#limit) {
      this.#holding = true;
      this.#hooks.hold();
    }
    const head = this.#held[0];
    if (head === undefined) {
      this.#hooks.waiting(0, 0);
      return;
    }
    const due = readDueMs(head.headers);
    this.#hooks.waiting(waiting, due);
    this.#timer = setTimeout(() => this.#drain(), Math.max(1, due - now));
  }
}
