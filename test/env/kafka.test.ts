/**
 * The environment works: a keyed record goes through the real broker with the Confluent client, and
 * with `partitioner: 'murmur2_random'` librdkafka puts every key where Java's default partitioner
 * (and redfence's partitionFor) does. librdkafka's own default (consistent_random, CRC32) does not.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { partitionFor } from '../../src/index.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';

const PARTITIONS = 6;
const KEYS = Array.from({ length: 24 }, (_, i) => `customer-${i}`);

describe('Kafka environment', { timeout: 120_000 }, () => {
  const kafka = new KafkaJS.Kafka({
    kafkaJS: { brokers: KAFKA_BROKERS.split(','), logLevel: KafkaJS.logLevel.NOTHING },
  });
  const admin = kafka.admin();
  const topic = uniqueName('env-keyed');

  before(async () => {
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: PARTITIONS, replicationFactor: 1 }] });
  });
  after(async () => {
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
  });

  async function produce(partitioner: 'murmur2_random' | 'consistent_random', tag: string) {
    const producer = kafka.producer({
      partitioner,
      'enable.idempotence': true,
      kafkaJS: { logLevel: KafkaJS.logLevel.NOTHING },
    });
    await producer.connect();
    try {
      // one send per key: send() reports per partition, not per message
      return await Promise.all(
        KEYS.map(async (key) => {
          const [m] = await producer.send({ topic, messages: [{ key, value: `${tag}:${key}` }] });
          return m?.partition ?? -1;
        }),
      );
    } finally {
      await producer.disconnect();
    }
  }

  it('murmur2_random places every key on partitionFor(key)', async () => {
    const partitions = await produce('murmur2_random', 'm');
    partitions.forEach((p, i) => {
      assert.equal(p, partitionFor(KEYS[i] as string, PARTITIONS), `key ${KEYS[i]}`);
    });
  });

  it("librdkafka's default CRC32 partitioner would put keys elsewhere (why redfence sets murmur2_random)", async () => {
    const partitions = await produce('consistent_random', 'c');
    const moved = partitions.filter((p, i) => p !== partitionFor(KEYS[i] as string, PARTITIONS));
    assert.ok(moved.length > 0, 'expected CRC32 to disagree with murmur2 for some of 24 keys');
  });

  it('consumes the keyed records back with key, value and partition intact', async () => {
    const consumer = kafka.consumer({
      kafkaJS: {
        groupId: uniqueName('env-group'),
        fromBeginning: true,
        autoCommit: false,
        logLevel: KafkaJS.logLevel.NOTHING,
      },
    });
    await consumer.connect();
    try {
      await consumer.subscribe({ topics: [topic] });
      const seen = new Map<string, number>();
      const done = new Promise<void>((resolve) => {
        void consumer.run({
          eachMessage: async ({ partition, message }) => {
            const value = message.value?.toString() ?? '';
            if (value.startsWith('m:')) seen.set(message.key?.toString() ?? '', partition);
            if (seen.size === KEYS.length) resolve();
          },
        });
      });
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`only ${seen.size}/${KEYS.length} records consumed in 60 s`)),
          60_000,
        );
      });
      await Promise.race([done, timeout]).finally(() => clearTimeout(timer));
      for (const key of KEYS) assert.equal(seen.get(key), partitionFor(key, PARTITIONS), key);
    } finally {
      await consumer.disconnect();
    }
  });
});
