/** Real-broker helpers for tests: topics, producing, reading back (read_committed), offsets. */
import { KafkaJS, type Message, RdKafka } from '@confluentinc/kafka-javascript';
import { pollUntil } from '../../src/harness/poll.js';
import { KAFKA_BROKERS, uniqueName } from './env.js';

const quiet = { logLevel: KafkaJS.logLevel.NOTHING };
export const kafka = new KafkaJS.Kafka({ kafkaJS: { brokers: KAFKA_BROKERS.split(','), ...quiet } });

export async function createTopics(
  topics: Array<{ topic: string; partitions: number; config?: Record<string, string> }>,
): Promise<() => Promise<void>> {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({
    topics: topics.map((t) => ({
      topic: t.topic,
      numPartitions: t.partitions,
      replicationFactor: 1,
      ...(t.config === undefined
        ? {}
        : { configEntries: Object.entries(t.config).map(([name, value]) => ({ name, value })) }),
    })),
  });
  // The create call returns once the controller has the topics; another client's metadata may not show
  // them yet (a busy broker). Tests start only when every partition has a leader.
  await pollUntil(
    `topics ${topics.map((t) => t.topic).join(', ')} to have leaders`,
    async () => {
      const seen = await admin
        .fetchTopicMetadata({ topics: topics.map((t) => t.topic) })
        .catch(() => undefined);
      return (
        seen !== undefined &&
        topics.every((t) => {
          const m = seen.find((x) => x.name === t.topic);
          return m?.partitions.length === t.partitions && m.partitions.every((p) => p.leader >= 0);
        })
      );
    },
    30_000,
  );
  return async () => {
    await admin.deleteTopics({ topics: topics.map((t) => t.topic) }).catch(() => undefined);
    await admin.disconnect();
  };
}

/**
 * A new topic of `partitions` partitions with `per` records in each (null keys, values '0', '1', ...
 * round-robin over the partitions), deleted after the test. Returns its name.
 */
export async function filledTopic(
  t: { after(fn: () => Promise<void>): void },
  prefix: string,
  partitions: number,
  per: number,
): Promise<string> {
  const topic = uniqueName(prefix);
  t.after(await createTopics([{ topic, partitions }]));
  await produce(
    topic,
    Array.from({ length: partitions * per }, (_, i) => ({
      key: null,
      value: String(i),
      partition: i % partitions,
    })),
  );
  return topic;
}

/** Grows a topic to `count` partitions and waits until every one of them has a leader. */
export async function addPartitions(topic: string, count: number): Promise<void> {
  const raw = RdKafka.AdminClient.create({ 'bootstrap.servers': KAFKA_BROKERS, log_level: 0 });
  try {
    await new Promise<void>((resolve, reject) =>
      raw.createPartitions(topic, count, 30_000, (err) => (err ? reject(err) : resolve())),
    );
  } finally {
    raw.disconnect();
  }
  const admin = kafka.admin();
  await admin.connect();
  try {
    await pollUntil(`${topic} to have ${count} partitions with leaders`, async () => {
      const seen = await admin.fetchTopicMetadata({ topics: [topic] }).catch(() => undefined);
      const m = seen?.find((x) => x.name === topic);
      return m?.partitions.length === count && m.partitions.every((p) => p.leader >= 0);
    });
  } finally {
    await admin.disconnect();
  }
}

export interface Msg {
  key: string | null;
  value: string | Buffer | null;
  partition?: number;
  /** CreateTime, ms since the epoch as a decimal string (default: the producer's clock). */
  timestamp?: string;
  /** Headers (a name with several values: each, in order). */
  headers?: Record<string, string | string[]>;
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
          ...(m.headers === undefined ? {} : { headers: m.headers }),
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

/**
 * Reads a topic from the beginning (read_committed) until `until(records)` holds, and throws when it
 * does not hold within `timeoutMs` (never returns part of what was awaited). For waiting on something to appear; never for checking what a
 * topic holds (it stops early and never sees what comes after): use readToEnd for that.
 */
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
    const met = await Promise.race([
      done.then(() => true),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
      }),
    ]).finally(() => clearTimeout(timer));
    if (!met)
      throw new Error(
        `reading ${topic}: the condition did not hold after ${timeoutMs} ms (${records.length} records read)`,
      );
    return records;
  } finally {
    await consumer.disconnect();
  }
}

/**
 * Every record of a topic (read_committed), from the beginning up to the end offsets the topic has when
 * called: done once each partition's position has reached its end offset (transaction markers and
 * aborted records count, so an exactly-once topic ends too). Call it when the writers are done; records
 * written later may or may not be included. Throws after `timeoutMs` (e.g. a transaction still open)
 * instead of returning part of the topic.
 */
export async function readToEnd(
  topic: string,
  timeoutMs = 60_000,
  brokers = KAFKA_BROKERS,
): Promise<ReadRecord[]> {
  const ends = [...(await endOffsets(topic, brokers))].filter(([, end]) => end > 0);
  const records: ReadRecord[] = [];
  if (ends.length === 0) return records;
  const consumer = new RdKafka.KafkaConsumer(
    {
      'metadata.broker.list': brokers,
      'group.id': uniqueName('reader'),
      'enable.auto.commit': false,
      'isolation.level': 'read_committed',
    },
    { 'auto.offset.reset': 'earliest' },
  );
  await new Promise<void>((resolve, reject) => {
    consumer.connect({ timeout: 30_000 }, (err) => (err ? reject(err) : resolve()));
  });
  try {
    const tps = ends.map(([partition]) => ({ topic, partition }));
    consumer.assign(tps.map((tp) => ({ ...tp, offset: 0 })));
    consumer.setDefaultConsumeTimeout(200);
    const behind = () => {
      const at = new Map(consumer.position(tps).map((p) => [p.partition, p.offset]));
      return ends
        .filter(([p, end]) => !((at.get(p) ?? -1) >= end))
        .map(([p, end]) => `${p}: ${at.get(p)} of ${end}`);
    };
    const deadline = Date.now() + timeoutMs;
    while (behind().length > 0) {
      if (Date.now() > deadline)
        throw new Error(
          `reading ${topic} to its end timed out after ${timeoutMs} ms (partition: position of end ${behind().join(', ')})`,
        );
      const batch = await new Promise<Message[]>((resolve, reject) => {
        consumer.consume(1000, (err, messages) => (err ? reject(err) : resolve(messages)));
      });
      for (const m of batch) records.push(toReadRecord(m));
    }
    return records;
  } finally {
    await new Promise<void>((resolve) => consumer.disconnect(() => resolve()));
  }
}

/** A consumed record in the shape readAll returns (headers: one value, or every value when repeated). */
function toReadRecord(m: Message): ReadRecord {
  const headers: ReadRecord['headers'] = {};
  for (const h of m.headers ?? []) {
    for (const [name, v] of Object.entries(h)) {
      const prev = headers[name];
      headers[name] = prev === undefined ? v : [...(Array.isArray(prev) ? prev : [prev]), v];
    }
  }
  return {
    key: m.key === undefined || m.key === null ? null : m.key.toString(),
    value: m.value?.toString() ?? null,
    partition: m.partition,
    offset: String(m.offset),
    timestamp: String(m.timestamp ?? ''),
    headers,
  };
}

/** A topic's end offsets (high watermarks: records + transaction markers) by partition. */
export async function endOffsets(topic: string, brokers = KAFKA_BROKERS): Promise<Map<number, number>> {
  const admin = (
    brokers === KAFKA_BROKERS
      ? kafka
      : new KafkaJS.Kafka({ kafkaJS: { brokers: brokers.split(','), ...quiet } })
  ).admin();
  await admin.connect();
  try {
    const rows = await admin.fetchTopicOffsets(topic);
    return new Map(rows.map((r) => [r.partition, Number(r.high)]));
  } finally {
    await admin.disconnect();
  }
}

/** The committed offsets of a group on a topic. */
export async function committedOffsets(
  groupId: string,
  topic: string,
  brokers = KAFKA_BROKERS,
): Promise<Map<number, number>> {
  const admin = (
    brokers === KAFKA_BROKERS
      ? kafka
      : new KafkaJS.Kafka({ kafkaJS: { brokers: brokers.split(','), ...quiet } })
  ).admin();
  await admin.connect();
  try {
    const rows = await admin.fetchOffsets({ groupId, topics: [topic] });
    return new Map((rows[0]?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
  } finally {
    await admin.disconnect();
  }
}

/**
 * Waits until group `groupId` has committed every partition of `topic` up to the end offsets the topic
 * has when called (a processor has finished the input written so far), or throws after `timeoutMs`.
 */
export async function waitCommitted(
  groupId: string,
  topic: string,
  timeoutMs = 60_000,
  brokers = KAFKA_BROKERS,
): Promise<void> {
  const ends = await endOffsets(topic, brokers);
  await pollUntil(
    `group ${groupId} to commit ${topic} to its end offsets`,
    async () => {
      const at = await committedOffsets(groupId, topic, brokers).catch(() => new Map<number, number>());
      // a partition that holds nothing needs no commit (a group never commits what it never read)
      return [...ends].every(([p, end]) => end === 0 || (at.get(p) ?? -1) >= end);
    },
    timeoutMs,
  );
}

/** Polls a condition until it holds, with a bound (src/harness/poll.ts). */
export { pollUntil } from '../../src/harness/poll.js';
