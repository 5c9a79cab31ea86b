/**
 * What one processor has done since it started, for tests, benchmarks and a status line. Read through
 * {@link Counts.snapshot}: a frozen copy, never the live counters. For monitoring use the metrics.
 */
import type { Verdict } from '../fence/index.js';
import type { OutRecord } from '../kafka/types.js';

export interface ProcessorCounts {
  /** Input records whose outputs and offsets were committed. */
  readonly records: number;
  /** Output records committed (to the output topic). */
  readonly outputs: number;
  /** Dead letters committed (to the dead-letter topic). */
  readonly deadLetters: number;
  /** Fence verdicts of the records applied (counted when their outputs are assembled). */
  readonly verdicts: Readonly<Partial<Record<Verdict, number>>>;
  /** Times a partition was fenced off by a newer owner. */
  readonly fencedPartitions: number;
}

export class Counts {
  #records = 0;
  #outputs = 0;
  #deadLetters = 0;
  #fenced = 0;
  readonly #verdicts: Partial<Record<Verdict, number>> = {};

  /** `n` records answered `verdict`. */
  verdict(verdict: Verdict, n = 1): void {
    this.#verdicts[verdict] = (this.#verdicts[verdict] ?? 0) + n;
  }

  fenced(): void {
    this.#fenced++;
  }

  /** A batch of `records` inputs committed with these outputs and dead letters. */
  committed(records: number, out: readonly OutRecord[], deadLetterTopic: string): void {
    this.#records += records;
    for (const o of out) {
      if (o.topic === deadLetterTopic) this.#deadLetters++;
      else this.#outputs++;
    }
  }

  snapshot(): ProcessorCounts {
    return Object.freeze({
      records: this.#records,
      outputs: this.#outputs,
      deadLetters: this.#deadLetters,
      verdicts: Object.freeze({ ...this.#verdicts }),
      fencedPartitions: this.#fenced,
    });
  }
}
