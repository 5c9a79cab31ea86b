/**
 * The secured broker of `dev/kafka.sh up s`: its listeners, the user's passwords and the certificates
 * it made under $RF_DEV_DIR/kafka-secure, and topic helpers over its INTERNAL (plaintext) listener for
 * setting up and reading back (the code under test always goes through the secured listeners).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { uniqueName } from './env.js';

const ROOT = new URL('../..', import.meta.url).pathname;
export const SECURE_DIR = join(process.env.RF_DEV_DIR || join(ROOT, '.dev'), 'kafka-secure');
export const TLS_DIR = join(SECURE_DIR, 'tls');
export const LISTENERS = {
  saslSsl: '127.0.0.1:19492',
  ssl: '127.0.0.1:19493',
  saslPlaintext: '127.0.0.1:19494',
  internal: '127.0.0.1:19496',
};
export const secret = (name: 'plain' | 'scram' | 'key') =>
  readFileSync(join(SECURE_DIR, 'secrets', `${name}.password`), 'utf8').trim();
export const tlsFile = (name: string) => join(TLS_DIR, name);
export const pem = (name: string) => readFileSync(tlsFile(name), 'utf8');

const quiet = { logLevel: KafkaJS.logLevel.NOTHING };
const kafka = new KafkaJS.Kafka({ kafkaJS: { brokers: [LISTENERS.internal], ...quiet } });

export async function createSecureTopics(
  topics: Array<{ topic: string; partitions: number }>,
): Promise<() => Promise<void>> {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({
    topics: topics.map((t) => ({ topic: t.topic, numPartitions: t.partitions, replicationFactor: 1 })),
  });
  return async () => {
    await admin.deleteTopics({ topics: topics.map((t) => t.topic) }).catch(() => undefined);
    await admin.disconnect();
  };
}

export async function produceSecure(topic: string, messages: Array<{ key: string; value: string }>) {
  const producer = kafka.producer({ partitioner: 'murmur2_random', 'linger.ms': 5, kafkaJS: quiet });
  await producer.connect();
  try {
    await producer.send({ topic, messages });
  } finally {
    await producer.disconnect();
  }
}

/** Reads `topic` (read_committed) from the beginning until `n` records are there, or the time is up. */
export async function readSecure(topic: string, n: number, timeoutMs = 60_000) {
  const consumer = kafka.consumer({
    'isolation.level': 'read_committed',
    kafkaJS: { groupId: uniqueName('reader'), fromBeginning: true, autoCommit: false, ...quiet },
  });
  await consumer.connect();
  const records: Array<{ key: string; value: string }> = [];
  try {
    await consumer.subscribe({ topics: [topic] });
    let finish: () => void = () => undefined;
    const done = new Promise<void>((resolve) => {
      finish = resolve;
    });
    await consumer.run({
      eachMessage: async ({ message }) => {
        records.push({ key: message.key?.toString() ?? '', value: message.value?.toString() ?? '' });
        if (records.length >= n) finish();
      },
    });
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([done, new Promise<void>((r) => (timer = setTimeout(r, timeoutMs)))]).finally(() =>
      clearTimeout(timer),
    );
    return records;
  } finally {
    await consumer.disconnect();
  }
}
