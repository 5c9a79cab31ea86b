/** Real-broker helpers for tests: topics, producing, reading back (read_committed), offsets. */
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { KAFKA_BROKERS, uniqueName } from './env.js';

const quiet = { logLevel: KafkaJS.logLevel.NOTHING };
export const kafka = new KafkaJS.Kafka({ kafkaJS: { brokers: KAFKA_BROKERS.split(','), ...quiet } });

export async function createTopics(
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

export interface Msg {
  key: string | null;
  value: string | Buffer | null;
  partition?: number;
  /** CreateTime, ms since the epoch as a decimal string (default: the producer's clock). */
  timestamp?: string;
}

export async function produce(topic: string, messages: Msg[]): Promise<void> {
  const producer = kafka.producer({
    partitioner: 'murmur2_random',
    'enable.idempotence': true,
    'linger.ms': 5,
    kafkaJS: quiet,
  });
  await producer.connect();
  try {
    for (let i = 0; i < messages.length; i += 1000) {
      await producer.send({
        topic,
        messages: messages.slice(i, i + 1000).map((m) => ({
          key: m.key,
          value: m.value,
          ...(m.partition === undefined ? {} : { partition: m.partition }),
          ...(m.timestamp === undefined ? {} : { timestamp: m.timestamp }),
        })),
      });
    }
  } finally {
    await producer.disconnect();
  }
}

export interface ReadRecord {
  key: string | null;
  value: string | null;
  partition: number;
  offset: string;
  timestamp: string;
  headers: Record<string, Buffer | string | (Buffer | string)[] | undefined>;
}

/** Reads a topic from the beginning (read_committed) until `until(records)` holds or the time runs out. */
export async function readAll(
  topic: string,
  until: (records: ReadRecord[]) => boolean,
  timeoutMs = 60_000,
): Promise<ReadRecord[]> {
  const consumer = kafka.consumer({
    'isolation.level': 'read_committed',
    kafkaJS: { groupId: uniqueName('reader'), fromBeginning: true, autoCommit: false, ...quiet },
  });
  await consumer.connect();
  const records: ReadRecord[] = [];
  try {
    await consumer.subscribe({ topics: [topic] });
    let finish: () => void = () => undefined;
    const done = new Promise<void>((resolve) => {
      finish = resolve;
    });
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        records.push({
          key: message.key?.toString() ?? null,
          value: message.value?.toString() ?? null,
          partition,
          offset: message.offset,
          timestamp: message.timestamp,
          headers: (message.headers ?? {}) as ReadRecord['headers'],
        });
        if (until(records)) finish();
      },
    });
    if (until(records)) finish();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      done,
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs);
      }),
    ]).finally(() => clearTimeout(timer));
    return records;
  } finally {
    await consumer.disconnect();
  }
}

/** Sum of a topic's end offsets (records + transaction markers). */
export async function endOffsets(topic: string): Promise<Map<number, number>> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const rows = await admin.fetchTopicOffsets(topic);
    return new Map(rows.map((r) => [r.partition, Number(r.high)]));
  } finally {
    await admin.disconnect();
  }
}

/** The committed offsets of a group on a topic. */
export async function committedOffsets(groupId: string, topic: string): Promise<Map<number, number>> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const rows = await admin.fetchOffsets({ groupId, topics: [topic] });
    return new Map((rows[0]?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
  } finally {
    await admin.disconnect();
  }
}

/** Polls a condition until it holds, with a bound (src/harness/poll.ts). */
export { pollUntil } from '../../src/harness/poll.js';
