/**
 * The input topic's partition count, as the processor knows it: fetched once (start() and the first
 * assignment share the read) and again when a partition numbered `atLeast - 1` or higher is assigned
 * (partitions were added). Each count read is recorded in the store, and every count recorded there is
 * kept for the plan's partition check (a key placed by murmur2 under an earlier count is on the right
 * partition too).
 */
import type { Fence } from '../fence/index.js';
import type { KafkaPort } from '../kafka/types.js';
import type { Logger } from '../runtime/logger.js';

export interface InputPartitionsContext {
  readonly input: string;
  readonly kafka: Pick<KafkaPort, 'partitionCount'>;
  readonly fence: Pick<Fence, 'partitionCounts'>;
  /** Runs a Redis call through the outage guard. */
  redisStep<T>(what: string, fn: () => Promise<T>): Promise<T>;
  readonly log: Logger;
}

export class InputPartitions {
  readonly #ctx: InputPartitionsContext;
  #count = 0;
  #counts: readonly number[] = [];
  #reading: Promise<number> | undefined;

  constructor(ctx: InputPartitionsContext) {
    this.#ctx = ctx;
  }

  /** The current count: 0 until the first read answered. */
  get count(): number {
    return this.#count;
  }

  /** Every count recorded in the store, the current one among them. */
  get counts(): readonly number[] {
    return this.#counts;
  }

  /** The count, read when not known yet or below `atLeast`; a failed read is not kept. */
  read(atLeast = 0): Promise<number> {
    if (this.#reading !== undefined && this.#count > 0 && this.#count < atLeast) this.#reading = undefined;
    if (this.#reading !== undefined) return this.#reading;
    const { input, kafka, fence, log } = this.#ctx;
    const fetched = (async () => {
      const n = await kafka.partitionCount(input);
      const counts = await this.#ctx.redisStep('partitionCounts', () => fence.partitionCounts(input, n));
      if (this.#count > 0 && n !== this.#count)
        log.warn(
          { topic: input, partitions: n, before: this.#count },
          'the input partition count changed: keys that move partitions are answered REBASE',
        );
      this.#count = n;
      this.#counts = counts.includes(n) ? counts : [...counts, n];
      return n;
    })();
    this.#reading = fetched;
    // a failed read is not kept: the next assignment or start() tries again
    fetched.catch(() => {
      if (this.#reading === fetched) this.#reading = undefined;
    });
    return fetched;
  }
}
