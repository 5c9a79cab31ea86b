/**
 * The topic partition counts of a topology's partition check (docs/streams.md, "The partition check"),
 * as the processor keeps its input's (input-partitions.ts): per topic the check applies to (one a
 * stateful sub-topology reads, or a repartition topic), the count read at its first batch and again
 * when a partition the known count lacks is assigned, each count recorded in Redis beside the
 * application's epochs, so a key placed by murmur2 before partitions were added still passes.
 */
import type { Fence } from '../../fence/index.js';
import type { KafkaPort } from '../../kafka/types.js';
import type { Logger } from '../../runtime/logger.js';
import type { RunPlan } from '../../topology/run/plan.js';
import { InputPartitions } from '../input-partitions.js';
import type { RedisStep } from '../wiring.js';

export interface PlacementContext {
  readonly kafka: Pick<KafkaPort, 'partitionCount'>;
  readonly fence: Pick<Fence, 'partitionCounts'>;
  readonly redisStep: RedisStep;
  readonly log: Logger;
  /** The executor's plan (known from start()). */
  plan(): RunPlan;
}

export class Placements {
  readonly #ctx: PlacementContext;
  readonly #topics = new Map<string, InputPartitions>();

  constructor(ctx: PlacementContext) {
    this.#ctx = ctx;
  }

  /** The topic's count now and every count recorded, read when unknown or below `atLeast`; null: not checked. */
  async counts(topic: string, atLeast: number): Promise<{ count: number; counts: readonly number[] } | null> {
    const sub = this.#ctx.plan().subs.get(topic);
    if (sub === undefined || !(sub.stateful || sub.internal)) return null;
    let p = this.#topics.get(topic);
    if (p === undefined) {
      const { kafka, fence, redisStep, log } = this.#ctx;
      p = new InputPartitions({ input: topic, kafka, fence, redisStep, log });
      this.#topics.set(topic, p);
    }
    const count = p.count >= atLeast ? p.count : await p.read(atLeast);
    return { count, counts: p.counts };
  }
}
