/**
 * The processor's `commitIntervalMs` on the real broker (test/testing/commit-interval.test.ts has its
 * rules on the in-memory Kafka): with a long interval, applied batches wait in the commit pipeline;
 * a second instance joins while they wait, so the first one's partitions are revoked with batches
 * applied in Redis and not yet produced or committed. More input follows, both instances close, and
 * the results must be exact per key: state, outputs (each order once with exactly-once; at least once,
 * nothing else, with at-least-once) and the group's commits at the end offsets.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { type ProcessingMode, Processor } from '../../src/index.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import {
  committedOffsets,
  createTopics,
  endOffsets,
  pollUntil,
  produce,
  readToEnd,
} from '../helpers/kafka.js';
import { assertPerKey, countOf, countsUpTo, customerOrders } from '../helpers/outputs.js';
import { type Order, totalsAre, totalsDefinition } from '../helpers/totals.js';

const PARTITIONS = 4;
const INTERVAL_MS = 20_000;

describe('commit interval on the real broker', { timeout: 240_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  for (const mode of ['exactly-once', 'at-least-once'] as const) {
    it(`${mode}: partitions revoked while applied batches wait for the interval; exact per key`, async () => {
      const ns = uniqueName(`ci-${mode === 'exactly-once' ? 'eos' : 'alo'}`);
      const cleanup = await createTopics([
        { topic: `${ns}-orders`, partitions: PARTITIONS },
        { topic: `${ns}-totals`, partitions: PARTITIONS },
        { topic: `${ns}-orders.DLT`, partitions: 1 },
      ]);
      const definition = totalsDefinition(ns);
      const instance = (m: ProcessingMode) =>
        new Processor<Order>({
          definition: definition as never,
          redis,
          mode: m,
          groupId: `${ns}-group`,
          commitIntervalMs: INTERVAL_MS,
          groupCommitRecords: 1_000_000,
          kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 50 },
        });
      const probe = instance('at-least-once');
      const a = instance(mode);
      const b = instance(mode);
      try {
        const { messages, amounts } = customerOrders(1600, 40);
        const first = messages.slice(0, 800);
        const firstAmounts = customerOrders(800, 40).amounts;
        await produce(`${ns}-orders`, first);
        await a.start();
        // every one of the first 800 orders applied in Redis...
        await pollUntil('the first instance applied the first orders', () => totalsAre(probe, firstAmounts));
        // ...while most of them wait for the interval: the first Kafka step ran at once, the rest wait
        const committed = await committedOffsets(`${ns}-group`, `${ns}-orders`);
        const done = [...committed.values()].reduce((s, o) => s + Math.max(0, o), 0);
        assert.ok(done < first.length, `batches wait for the interval: ${done} of ${first.length} committed`);
        assert.ok(a.counts().records < first.length, 'the first instance has not committed them all');

        // a second instance joins: the first one's revoked partitions hold waiting batches
        await b.start();
        await pollUntil('the second instance owns partitions', () => b.assignment.length > 0);
        await produce(`${ns}-orders`, messages.slice(800));
        await pollUntil('every order applied', () => totalsAre(probe, amounts), 90_000);
        // close() drains what waits without waiting for the interval
        await Promise.all([a.close(), b.close()]);

        const ends = await endOffsets(`${ns}-orders`);
        assert.deepEqual(await committedOffsets(`${ns}-group`, `${ns}-orders`), ends, 'committed to the end');
        const outputs = await readToEnd(`${ns}-totals`);
        const counts = countsUpTo(new Map([...amounts].map(([c, l]) => [c, l.length])));
        assertPerKey('outputs per customer', outputs, countOf, counts, {
          duplicates: mode === 'exactly-once' ? 'none' : 'allowed',
        });
        assert.ok(await totalsAre(probe, amounts), 'exact state per customer');
      } finally {
        await Promise.allSettled([a.close(), b.close()]);
        await cleanup();
      }
    });
  }
});
