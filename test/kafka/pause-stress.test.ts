/**
 * Frequent pause/resume of random partitions, as the handler runtime does at its in-flight bound,
 * over a preloaded topic: every partition's records are handed over exactly once each, in offset
 * order, and the consumption ends within a bound (no stall). Pauses come both from a timer (between
 * and during consume calls) and from inside batch handlers (during a dispatch); the pattern comes from
 * a seeded generator so a failing run can be replayed (RF_PAUSE_SEED). Real broker.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfluentKafka } from '../../src/kafka/confluent.js';
import { KAFKA_BROKERS } from '../helpers/env.js';
import { filledTopic, pollUntil } from '../helpers/kafka.js';

/** mulberry32: a small seeded generator, floats in [0, 1). */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The first way `seen` differs from 0..n-1 once each in order, or undefined. */
function firstAnomaly(seen: readonly number[], n: number): string | undefined {
  for (let i = 0; i < seen.length; i++) {
    if (seen[i] !== i) {
      const dup = seen.indexOf(seen[i] as number) < i;
      return `at hand-over #${i}: offset ${seen[i]} (expected ${i}${dup ? ', a duplicate' : ''}); ${seen.length} handed over`;
    }
  }
  return seen.length === n ? undefined : `${seen.length} of ${n} handed over`;
}

describe('ConfluentKafka under frequent pause/resume', { timeout: 180_000 }, () => {
  it('hands every record over once, in order, and finishes', async (t) => {
    const seed = Number(process.env.RF_PAUSE_SEED ?? Date.now() % 1_000_000);
    const rng = seeded(seed);
    const PARTITIONS = 6;
    const PER = 6_000;
    const topic = await filledTopic(t, 'pause-stress', PARTITIONS, PER);
    const kafka = new ConfluentKafka({
      brokers: KAFKA_BROKERS.split(','),
      groupId: `${topic}-g`,
      // 6 partitions x 200: a fetch is several consume calls, with turns of the event loop between them
      maxBatchSize: 200,
    });
    t.after(() => kafka.stop());
    const seen = Array.from({ length: PARTITIONS }, () => [] as number[]);
    const tp = (partition: number) => [{ topic, partition }];
    const pauseBriefly = (partition: number) => {
      kafka.pause(tp(partition));
      setImmediate(() => kafka.resume(tp(partition)));
    };
    let pauses = 0;
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    // Every 1-10 ms a burst: on 1-16 successive turns of the event loop, one random partition paused
    // and resumed on the next turn (such turns fall between the consume calls of a fetch, too).
    const burst = (turns: number) => {
      if (done || turns === 0) return;
      pauses++;
      pauseBriefly(Math.floor(rng() * PARTITIONS));
      setImmediate(() => burst(turns - 1));
    };
    const tick = () => {
      if (done) return;
      burst(1 + Math.floor(rng() * 16));
      timer = setTimeout(tick, 1 + Math.floor(rng() * 10));
    };
    t.after(() => {
      done = true;
      clearTimeout(timer);
    });
    await kafka.start([topic], {
      onAssign: async () => undefined,
      onRevoke: async () => undefined,
      onBatch: async (_t, partition, records) => {
        for (const r of records) (seen[partition] as number[]).push(Number(r.offset));
        // a third of the batches pause their own or another partition, as a handler at its bound
        if (rng() < 1 / 3) {
          pauses++;
          pauseBriefly(rng() < 0.5 ? partition : Math.floor(rng() * PARTITIONS));
        }
        // and some give the event loop a turn (the timer's pauses land during the dispatch)
        if (rng() < 0.5) await new Promise((r) => setImmediate(r));
      },
    });
    tick();
    const progress = () => seen.map((s, p) => `p${p}: ${s.length}, last ${s.at(-1)}`).join('; ');
    try {
      await pollUntil(
        'every partition handed over up to its last record',
        () => seen.every((s) => s.includes(PER - 1)),
        90_000,
        20,
      );
    } catch (err) {
      throw new Error(`${(err as Error).message} (seed ${seed}, ${pauses} pauses; ${progress()})`);
    }
    done = true;
    clearTimeout(timer);
    for (let p = 0; p < PARTITIONS; p++) {
      const anomaly = firstAnomaly(seen[p] as number[], PER);
      assert.equal(anomaly, undefined, `partition ${p}: ${anomaly} (seed ${seed}, ${pauses} pauses)`);
    }
    t.diagnostic(`seed ${seed}, ${pauses} pauses`);
    assert.ok(pauses > 20, `the pattern paused ${pauses} times`);
  });
});
