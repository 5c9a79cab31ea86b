/**
 * close() with a backlog: the processor finishes what it has applied (produce + commit), takes no new
 * batch, and returns; it does not go on consuming the backlog. Everything it counted as processed is
 * committed, nothing past it, and a second instance finishes the input exactly.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { defineProcessor, Processor } from '../../src/index.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import {
  committedOffsets,
  createTopics,
  endOffsets,
  pollUntil,
  produce,
  readToEnd,
} from '../helpers/kafka.js';
import { assertPerKey, countOf, countsUpTo } from '../helpers/outputs.js';

const ORDERS = 20_000;
const BATCH = 100;
const GROUP_COMMIT = 200;

describe('close() with a backlog', { timeout: 180_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  it('stops taking batches, commits what it applied, and a second instance finishes exactly', async () => {
    const ns = uniqueName('close');
    const drop = await createTopics([
      { topic: `${ns}-in`, partitions: 3 },
      { topic: `${ns}-out`, partitions: 3 },
      { topic: `${ns}-in.DLT`, partitions: 1 },
    ]);
    try {
      await produce(
        `${ns}-in`,
        Array.from({ length: ORDERS }, (_, i) => ({ key: `k${i % 50}`, value: '{"n":1}' })),
      );
      const make = () =>
        new Processor<{ n: number }>({
          definition: defineProcessor<{ n: number }>({
            input: `${ns}-in`,
            output: `${ns}-out`,
            store: ns,
            operation: (r) => ({ op: 'add', by: r.n }),
          }),
          redis,
          mode: 'at-least-once',
          groupId: `${ns}-g`,
          groupCommitRecords: GROUP_COMMIT,
          kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: BATCH },
        });
      const a = make();
      await a.start();
      await pollUntil('a processed a few batches', () => a.counts().records >= 300, 60_000);
      const before = a.counts().records;
      await a.close();
      // after close() was called, only what it had accepted: the Kafka step in flight and the queue
      // behind it (each at most the group-commit limit plus one batch) and the batch in its Redis step
      assert.ok(
        a.counts().records <= before + 2 * (GROUP_COMMIT + BATCH) + BATCH,
        `close() took no new batch (${before} processed when called, ${a.counts().records} after)`,
      );
      const committed = await committedOffsets(`${ns}-g`, `${ns}-in`);
      const sum = [...committed.values()].reduce((x, y) => x + Math.max(0, y), 0);
      assert.equal(sum, a.counts().records, 'what a counted as processed is exactly what it committed');
      assert.ok(sum < ORDERS, `close() did not consume the backlog (${sum} of ${ORDERS})`);

      const b = make();
      await b.start();
      try {
        const ends = await endOffsets(`${ns}-in`);
        await pollUntil(
          'b committed the rest',
          async () => {
            const now = await committedOffsets(`${ns}-g`, `${ns}-in`);
            for (const [p, end] of ends) if ((now.get(p) ?? -1) !== end) return false;
            return true;
          },
          120_000,
        );
      } finally {
        await b.close();
      }
      // each key's count: its share of the orders (k0..k49, ORDERS / 50 each), each applied once
      for (let i = 0; i < 50; i++)
        assert.equal(
          (await b.fence.read(`k${i}`))?.value?.toString(),
          String(ORDERS / 50),
          `state of k${i}: each of its orders applied once`,
        );
      // at-least-once outputs: every key's counts 1..400, each at least once, no other key
      const perKey = new Map(Array.from({ length: 50 }, (_, i) => [`k${i}`, ORDERS / 50]));
      assertPerKey(
        'at least one output per order',
        await readToEnd(`${ns}-out`),
        countOf,
        countsUpTo(perKey),
        {
          duplicates: 'allowed',
        },
      );
    } finally {
      await drop();
    }
  });
});
