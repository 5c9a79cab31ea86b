/**
 * Lines of one process (a child's output, or an in-process logger), awaitable by predicate. Indexes are
 * absolute: `count` is every line pushed so far, and `find`/`waitFor` take a `from` of that count, so a
 * book that keeps only its last lines still answers "logged since the mark".
 */

interface Waiter<T> {
  pred: (line: T) => boolean;
  from: number;
  resolve: (line: T) => void;
  reject: (err: Error) => void;
}

export class LogBook<T> {
  readonly name: string;
  readonly #keep: number;
  readonly #describe: (line: T) => string;
  readonly #lines: T[] = [];
  /** Index (absolute) of #lines[0]. */
  #first = 0;
  #closed: string | undefined;
  #waiters = new Set<Waiter<T>>();

  /** `keep`: how many of the last lines to hold (default all); `describe` renders one for `tail`. */
  constructor(name: string, options: { keep?: number; describe?: (line: T) => string } = {}) {
    this.name = name;
    this.#keep = options.keep ?? Number.POSITIVE_INFINITY;
    this.#describe = options.describe ?? ((l) => (typeof l === 'string' ? l : JSON.stringify(l)));
  }

  /** The lines still held (all of them unless `keep` was given). */
  get lines(): readonly T[] {
    return this.#lines;
  }

  /** Lines pushed so far, held or not: a mark for `find` and `waitFor`. */
  get count(): number {
    return this.#first + this.#lines.length;
  }

  push(line: T): void {
    const index = this.count;
    this.#lines.push(line);
    if (this.#lines.length > this.#keep) {
      this.#lines.shift();
      this.#first++;
    }
    for (const w of [...this.#waiters]) {
      if (index >= w.from && w.pred(line)) {
        this.#waiters.delete(w);
        w.resolve(line);
      }
    }
  }

  /** No more lines will come (the process exited): pending and later waits reject with `reason`. */
  close(reason: string): void {
    this.#closed = reason;
    for (const w of this.#waiters) w.reject(new Error(reason));
    this.#waiters.clear();
  }

  get closed(): boolean {
    return this.#closed !== undefined;
  }

  /** Held lines with index >= `from` matching `pred`. */
  find(pred: (line: T) => boolean, from = 0): T[] {
    return this.#lines.slice(Math.max(0, from - this.#first)).filter(pred);
  }

  /** True once a line matching `pred` has been logged at index >= `from` (and is still held). */
  seen(pred: (line: T) => boolean, from = 0): boolean {
    return this.#lines.slice(Math.max(0, from - this.#first)).some(pred);
  }

  /**
   * The first line (index >= `from`, already logged or still to come) matching `pred`; rejects naming
   * `label` after `timeoutMs`, or when the book is closed first.
   */
  waitFor(label: string, pred: (line: T) => boolean, timeoutMs = 60_000, from = 0): Promise<T> {
    const seen = this.#lines.slice(Math.max(0, from - this.#first)).find(pred);
    if (seen !== undefined) return Promise.resolve(seen);
    if (this.#closed !== undefined)
      return Promise.reject(new Error(`${this.name}: ${this.#closed} before logging ${label}${this.tail()}`));
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#waiters.delete(w);
        reject(new Error(`${this.name}: timed out after ${timeoutMs} ms waiting for ${label}${this.tail()}`));
      }, timeoutMs);
      const w: Waiter<T> = {
        pred,
        from,
        resolve: (line) => {
          clearTimeout(timer);
          resolve(line);
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(new Error(`${this.name}: ${err.message} before logging ${label}${this.tail()}`));
        },
      };
      this.#waiters.add(w);
    });
  }

  /** The last `n` lines, for failure messages. */
  tail(n = 15): string {
    const lines = this.#lines.slice(-n).map(this.#describe);
    return lines.length === 0
      ? ` (${this.name}: nothing logged)`
      : `\n--- ${this.name} ---\n${lines.join('\n')}`;
  }
}
