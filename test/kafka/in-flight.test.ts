/**
 * `partitionsInFlight`: the adapter hands several partitions' batches to onBatch at once, never two of
 * one partition, each partition's batches in offset order, every record once; a failed batch is
 * delivered again from its first record while the other partitions go on. Real broker.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfluentKafka } from '../../src/kafka/confluent.js';
import { inTurns } from '../../src/kafka/slices.js';
import { KAFKA_BROKERS } from '../helpers/env.js';
import { filledTopic, pollUntil } from '../helpers/kafka.js';

describe('inTurns', () => {
  it('runs at most depth tasks at once, in order, and rejects only after all have ended', async () => {
    let active = 0;
    let most = 0;
    const started: number[] = [];
    const ended: number[] = [];
    const task = (i: number) => async () => {
      started.push(i);
      active++;
      most = Math.max(most, active);
      for (let t = 0; t < 3 + (i % 3); t++) await new Promise((r) => setImmediate(r));
      active--;
      ended.push(i);
      if (i === 2) throw new Error('task 2 failed');
    };
    await assert.rejects(
      inTurns(
        Array.from({ length: 7 }, (_, i) => task(i)),
        3,
      ),
      /task 2 failed/,
    );
    assert.equal(most, 3);
    assert.deepEqual(started, [0, 1, 2, 3, 4, 5, 6]);
    assert.equal(ended.length, 7, 'every task ended before the rejection');
  });
});

describe('ConfluentKafka with partitionsInFlight', { timeout: 120_000 }, () => {
  it('overlaps partitions, never one partition with itself; a failed batch comes again', async (t) => {
    const partitions = 4;
    const per = 15;
    const topic = await filledTopic(t, 'in-flight', partitions, per);
    const kafka = new ConfluentKafka({
      brokers: KAFKA_BROKERS.split(','),
      groupId: `${topic}-group`,
      maxBatchSize: 10,
    });
    const active = new Map<number, number>();
    let total = 0;
    let most = 0;
    const overlapSelf: string[] = [];
    const seen = new Map<number, number[]>();
    let failedOnce = false;
    try {
      await kafka.start([topic], {
        onAssign: async () => undefined,
        onRevoke: async () => undefined,
        partitionsInFlight: 3,
        onBatch: async (_t, partition, records) => {
          if ((active.get(partition) ?? 0) > 0) overlapSelf.push(`partition ${partition}`);
          active.set(partition, (active.get(partition) ?? 0) + 1);
          total++;
          most = Math.max(most, total);
          try {
            // a few turns of the event loop, as a Redis round trip gives: another partition may start
            for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
            if (partition === 1 && !failedOnce) {
              failedOnce = true;
              throw new Error('this batch fails once');
            }
            seen.set(partition, [...(seen.get(partition) ?? []), ...records.map((r) => Number(r.offset))]);
          } finally {
            active.set(partition, (active.get(partition) ?? 1) - 1);
            total--;
          }
        },
      });
      await pollUntil(
        'every record of every partition handed over',
        async () => [...seen.values()].reduce((a, s) => a + s.length, 0) >= partitions * per,
        60_000,
      );
    } finally {
      await kafka.stop();
    }
    assert.deepEqual(overlapSelf, [], 'a partition had two batches in onBatch at once');
    for (let p = 0; p < partitions; p++)
      assert.deepEqual(
        seen.get(p),
        Array.from({ length: per }, (_, i) => i),
        `partition ${p}: each offset once, in order (partition 1 after its failed batch came again)`,
      );
    assert.ok(failedOnce, 'the failing batch ran');
    assert.ok(most >= 2, `partitions overlapped in onBatch (most at once: ${most})`);
    assert.ok(most <= 3, `at most partitionsInFlight batches at once (most: ${most})`);
  });
});
