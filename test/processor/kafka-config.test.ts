/**
 * librdkafka properties given as `kafka.consumerConfig` / `kafka.producerConfig` reach the clients of
 * the default adapter.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { defineProcessor, Processor, type ProcessorOptions, RedfenceError } from '../../src/index.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { createTopics, kafka, pollUntil } from '../helpers/kafka.js';

describe('librdkafka pass-through properties', { timeout: 120_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  const make = (ns: string, k: Partial<Extract<ProcessorOptions['kafka'], { brokers: string[] }>>) =>
    new Processor({
      definition: defineProcessor({
        input: `${ns}-in`,
        output: `${ns}-out`,
        store: ns,
        operation: () => ({ op: 'add', by: 1 }),
      }),
      redis,
      mode: 'at-least-once',
      groupId: `${ns}-g`,
      kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, ...k },
    });

  it('consumerConfig reaches the consumer (its client.id is what the group coordinator sees)', async () => {
    const ns = uniqueName('cconf');
    const drop = await createTopics(
      [`${ns}-in`, `${ns}-out`, `${ns}-in.DLT`].map((topic) => ({ topic, partitions: 1 })),
    );
    const p = make(ns, { consumerConfig: { 'client.id': `cc-${ns}` } });
    const admin = kafka.admin();
    await admin.connect();
    try {
      await p.start();
      await pollUntil('partition assigned', () => p.assignment.length === 1, 60_000);
      const { groups } = await admin.describeGroups([`${ns}-g`]);
      assert.deepEqual(
        groups[0]?.members.map((m) => m.clientId),
        [`cc-${ns}`],
      );
    } finally {
      await p.close();
      await admin.disconnect();
      await drop();
    }
  });

  it('producerConfig reaches the producer (a value librdkafka refuses fails construction, naming the key)', () => {
    assert.throws(
      () => make(uniqueName('pconf'), { producerConfig: { 'linger.ms': 'soon' } }),
      (e: unknown) =>
        RedfenceError.is(e, 'RF_INVALID_OPTIONS') &&
        /Kafka producer configuration: "queue.buffering.max.ms": librdkafka refuses its value/.test(
          (e as Error).message,
        ) &&
        !(e as Error).message.includes('soon'),
    );
  });
});
