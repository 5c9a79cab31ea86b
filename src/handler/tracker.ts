/**
 * Contiguous offset commits for one partition: records are accepted in offset order and finish in
 * any order; the offset to commit is the lowest unfinished one (never past a record still running,
 * queued behind its key or waiting for a retry), or one past the last accepted when all are done.
 *
 *   accepted [100, 101, 102, 103, 104], finished {100, 101, 103, 104} -> commit 102
 */
export class OffsetTracker {
  /** Accepted offsets in order, from `#head`; done ones are dropped from the front. */
  #offsets: number[] = [];
  #head = 0;
  readonly #done = new Set<number>();
  #last = -1;

  /** Accepted, not finished. */
  get inFlight(): number {
    return this.#offsets.length - this.#head - this.#done.size;
  }

  /** The last accepted offset, -1 before any. */
  get last(): number {
    return this.#last;
  }

  accept(offset: number): void {
    this.#offsets.push(offset);
    this.#last = offset;
  }

  finish(offset: number): void {
    if (this.#offsets[this.#head] !== offset) {
      this.#done.add(offset);
      return;
    }
    this.#head++;
    while (this.#head < this.#offsets.length && this.#done.delete(this.#offsets[this.#head] as number))
      this.#head++;
    if (this.#head > 1024 && this.#head * 2 > this.#offsets.length) {
      this.#offsets = this.#offsets.slice(this.#head);
      this.#head = 0;
    }
  }

  /** The offset to commit (the next to consume): -1 before any record was accepted. */
  commitPoint(): number {
    if (this.#head < this.#offsets.length) return this.#offsets[this.#head] as number;
    return this.#last < 0 ? -1 : this.#last + 1;
  }
}
