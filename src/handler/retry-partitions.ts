/**
 * A handler's retry-topic partitions (retry.topics): each owned one gets a gate (src/retry/
 * retry-gate.ts) that holds its records until due, pausing the partition when many wait, and, with
 * Redis, its own epoch in the input partition's slot (src/handler/key-order.ts), raised on assignment
 * and retried while Redis is down: ctx.once and the key order of a retried record are fenced by it.
 */

import type { InRecord, KafkaPort } from '../kafka/types.js';
import { backoffMs, delay } from '../runtime/backoff.js';
import type { Logger } from '../runtime/logger.js';
import type { KeyOrderStore } from './key-order.js';
import { RetryGate } from './retry-gate.js';
import type { RetryMetrics } from './retry-metrics.js';
import type { PartitionWork } from './scheduler.js';

export interface RetryPartitionsContext {
  /** The retry topics consumed beside the input. */
  readonly topics: readonly string[];
  readonly kafka: Pick<KafkaPort, 'pause' | 'resume'>;
  /** With Redis: raises each retry-topic partition's epoch (ctx.once, keyOrder). */
  readonly epochs: KeyOrderStore | undefined;
  readonly metrics: RetryMetrics | undefined;
  readonly log: Logger;
  /** Records held per partition before it is paused. */
  readonly holdLimit: number;
  /** Aborted when the handler closes. */
  readonly signal: AbortSignal;
  /** Hands due records to the scheduler. */
  accept(part: PartitionWork, records: InRecord[]): void;
}

export class RetryPartitions {
  readonly #ctx: RetryPartitionsContext;
  readonly #gates = new Map<string, RetryGate>();

  constructor(ctx: RetryPartitionsContext) {
    this.#ctx = ctx;
  }

  isRetryTopic(topic: string): boolean {
    return this.#ctx.topics.includes(topic);
  }

  /** A newly owned retry-topic partition. */
  async add(part: PartitionWork): Promise<void> {
    const c = this.#ctx;
    const { tp } = part;
    const k = `${tp.topic}/${tp.partition}`;
    this.#gates.get(k)?.stop();
    const gate = new RetryGate(
      {
        hold: () => {
          part.held = true;
          c.kafka.pause([tp]);
        },
        release: () => {
          part.held = false;
          if (!part.paused && !part.stopped) c.kafka.resume([tp]);
        },
        accept: (records) => {
          if (!part.stopped) c.accept(part, records);
        },
        waiting: (n, due) => c.metrics?.waiting(tp.topic, tp.partition, n, due),
      },
      c.holdLimit,
    );
    this.#gates.set(k, gate);
    const keys = c.epochs;
    if (keys === undefined) return;
    for (let i = 0; ; i++) {
      try {
        part.orderEpoch = await keys.raiseRetryEpoch(tp.topic, tp.partition);
        return;
      } catch (err) {
        if (c.signal.aborted) return;
        c.log.warn(
          { error: err instanceof Error ? err.name : typeof err, topic: tp.topic, partition: tp.partition },
          'retry-chain epoch not raised: retrying',
        );
        await delay(backoffMs(i, 100, 5000), c.signal);
      }
    }
  }

  /** Offers a delivered batch to its gate; false when the partition is not a retry-topic one. */
  offer(part: PartitionWork, records: InRecord[]): boolean {
    const gate = this.#gates.get(`${part.tp.topic}/${part.tp.partition}`);
    if (gate === undefined) return false;
    gate.offer(records);
    return true;
  }

  /** The partition stops (revocation, close, fence): what its gate holds is forgotten, never committed. */
  drop(part: PartitionWork): void {
    const k = `${part.tp.topic}/${part.tp.partition}`;
    const gate = this.#gates.get(k);
    if (gate === undefined) return;
    gate.stop();
    this.#gates.delete(k);
    this.#ctx.metrics?.clear(part.tp.topic, part.tp.partition);
  }
}
