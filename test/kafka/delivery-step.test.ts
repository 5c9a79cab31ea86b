/**
 * A processor's Kafka step with an output the broker refuses (larger than the output topic's
 * max.message.bytes: handed over, refused in the produce response), with the producer hearing failed
 * records only: the step fails (at-least-once: the produce; exactly-once: the commit), it is tried
 * again, and the input is never committed past the record whose output was refused.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { defineProcessor, Processor } from '../../src/index.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, kafka, pollUntil, produce } from '../helpers/kafka.js';

const LIMIT = 2000;

interface Order {
  customer: string;
  amount: number;
  pad?: string;
}

describe('a refused output fails the Kafka step', { timeout: 180_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  for (const mode of ['at-least-once', 'exactly-once'] as const) {
    it(`${mode}: the step fails and is tried again, nothing committed past the refused record`, async () => {
      const ns = uniqueName(`refused-${mode === 'exactly-once' ? 'eos' : 'alo'}`);
      const drop = await createTopics([
        { topic: `${ns}-orders`, partitions: 1 },
        { topic: `${ns}-orders.DLT`, partitions: 1 },
      ]);
      const admin = kafka.admin();
      await admin.connect();
      await admin.createTopics({
        topics: [
          {
            topic: `${ns}-totals`,
            numPartitions: 1,
            replicationFactor: 1,
            configEntries: [{ name: 'max.message.bytes', value: String(LIMIT) }],
          },
        ],
      });
      const warnings: { msg: string; err: string }[] = [];
      let p: Processor<Order> | undefined;
      try {
        // order 250's output (its customer's state) carries the pad: larger than the output topic allows
        const BAD = 250;
        const messages = Array.from({ length: 300 }, (_, i) => {
          const o: Order = { customer: `c-${i % 10}`, amount: i };
          if (i === BAD) o.pad = 'x'.repeat(LIMIT * 2);
          return { key: o.customer, value: JSON.stringify(o) };
        });
        await produce(`${ns}-orders`, messages);
        p = new Processor<Order>({
          definition: defineProcessor<Order, { total: number; pad?: string }>({
            input: `${ns}-orders`,
            output: `${ns}-totals`,
            store: ns,
            reduce: (s, o) => ({
              state: { total: (s?.total ?? 0) + o.amount, ...(o.pad ? { pad: o.pad } : {}) },
            }),
          }) as never,
          redis,
          mode,
          groupId: `${ns}-group`,
          kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 500 },
          logger: {
            debug: () => undefined,
            info: () => undefined,
            warn: (o, msg) => warnings.push({ msg: String(msg), err: String((o as { err?: unknown }).err) }),
            error: (o, msg) => warnings.push({ msg: String(msg), err: String((o as { err?: unknown }).err) }),
          },
        });
        await p.start();
        const failed = () => warnings.filter((w) => w.msg.startsWith('produce/commit failed'));
        await pollUntil(
          'the step with the refused output failed twice',
          async () => failed().length >= 2,
          60_000,
        );
        const committed = (await committedOffsets(`${ns}-group`, `${ns}-orders`)).get(0) ?? -1;
        assert.ok(committed <= BAD, `committed ${committed}: never past the refused record ${BAD}`);
        if (mode === 'at-least-once')
          assert.match(failed()[0]?.err ?? '', /Message size too large/, JSON.stringify(failed()[0]));
      } finally {
        await p?.close();
        await admin.deleteTopics({ topics: [`${ns}-totals`] }).catch(() => undefined);
        await admin.disconnect();
        await drop();
      }
    });
  }
});
