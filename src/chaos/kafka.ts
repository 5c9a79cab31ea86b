/**
 * The chaos harness's own Kafka helpers: topics, offsets, a paced workload producer and a reader that
 * reads a topic to its end with a chosen isolation level. Nothing here comes from src/kafka (the
 * runtime's port): the verifier must not share the processing path it checks. Only the connection
 * settings are the runtime's: `config` is librdkafka properties (security, `--kafka-config`) built by
 * the CLI from the same options the instances get.
 */
import { KafkaJS, type Message, RdKafka } from '@confluentinc/kafka-javascript';

const quiet = { logLevel: KafkaJS.logLevel.NOTHING };

export type Isolation = 'read_committed' | 'read_uncommitted';
/** librdkafka properties every client of the harness gets (security, pass-through). */
export type ConnectionConfig = Record<string, string | number | boolean>;

export class ChaosKafka {
  readonly brokers: string[];
  readonly #kafka: KafkaJS.Kafka;
  /** One connection, shared by concurrent first callers (a failed connect is forgotten, so the next call tries again). */
  #admin: Promise<KafkaJS.Admin> | undefined;

  constructor(brokers: string[], config: ConnectionConfig = {}) {
    this.brokers = brokers;
    this.#kafka = new KafkaJS.Kafka({ ...config, kafkaJS: { brokers, ...quiet } });
  }

  admin(): Promise<KafkaJS.Admin> {
    if (!this.#admin) {
      const admin = this.#kafka.admin();
      const connected = admin.connect().then(() => admin);
      this.#admin = connected;
      connected.catch(() => {
        if (this.#admin === connected) this.#admin = undefined;
      });
    }
    return this.#admin;
  }

  async createTopics(topics: Array<{ topic: string; partitions: number }>): Promise<void> {
    const admin = await this.admin();
    await admin.createTopics({
      topics: topics.map((t) => ({ topic: t.topic, numPartitions: t.partitions, replicationFactor: 1 })),
    });
  }

  async deleteTopics(topics: string[]): Promise<void> {
    const admin = await this.admin();
    await admin.deleteTopics({ topics }).catch(() => undefined);
  }

  /** Partition -> end offset (high watermark). */
  async endOffsets(topic: string): Promise<Map<number, number>> {
    const rows = await (await this.admin()).fetchTopicOffsets(topic);
    return new Map(rows.map((r) => [r.partition, Number(r.high)]));
  }

  /** Partition -> committed offset of the group (-1: none). */
  async committedOffsets(group: string, topic: string): Promise<Map<number, number>> {
    const rows = await (await this.admin()).fetchOffsets({ groupId: group, topics: [topic] });
    return new Map((rows[0]?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
  }

  producer(): KafkaJS.Producer {
    return this.#kafka.producer({
      partitioner: 'murmur2_random',
      'enable.idempotence': true,
      acks: -1,
      'linger.ms': 5,
      'message.max.bytes': 2_000_000,
      kafkaJS: quiet,
    } as KafkaJS.ProducerConstructorConfig);
  }

  async close(): Promise<void> {
    const admin = this.#admin;
    this.#admin = undefined;
    await admin?.then((a) => a.disconnect()).catch(() => undefined);
  }
}

/** One record as the verifier sees it. */
export interface ReadMessage {
  partition: number;
  offset: number;
  key: Buffer | null;
  value: Buffer | null;
  /** Header name -> every value, in order. */
  headers: Map<string, Buffer[]>;
}

function toRead(m: Message): ReadMessage {
  const headers = new Map<string, Buffer[]>();
  for (const h of m.headers ?? []) {
    for (const [name, v] of Object.entries(h)) {
      const list = headers.get(name) ?? [];
      if (list.length === 0) headers.set(name, list);
      list.push(Buffer.isBuffer(v) ? v : Buffer.from(String(v), 'utf8'));
    }
  }
  const key = m.key === undefined || m.key === null ? null : Buffer.from(m.key as Buffer);
  return { partition: m.partition, offset: m.offset, key, value: m.value, headers };
}

/**
 * Reads every record of `topic` from the beginning up to the end offsets it has when called, with the
 * given isolation level, handing each to `onMessage`. Done when every partition's position reached its
 * end offset (transaction markers and aborted records included); throws after `timeoutMs`.
 */
export async function readTopic(
  brokers: string[],
  topic: string,
  isolation: Isolation,
  onMessage: (m: ReadMessage) => void,
  timeoutMs = 120_000,
  config: ConnectionConfig = {},
): Promise<{ records: number; ends: Map<number, number> }> {
  const kafka = new ChaosKafka(brokers, config);
  const ends = await kafka.endOffsets(topic).finally(() => kafka.close());
  const consumer = new RdKafka.KafkaConsumer(
    {
      ...config,
      'metadata.broker.list': brokers.join(','),
      'group.id': `chaos-reader-${process.pid}-${Date.now()}-${Math.floor(Math.random() * 1e9)}`,
      'enable.auto.commit': false,
      'isolation.level': isolation,
      'fetch.message.max.bytes': 4_000_000,
      'receive.message.max.bytes': 100_000_000,
    },
    { 'auto.offset.reset': 'earliest' },
  );
  await new Promise<void>((res, rej) => {
    consumer.connect({ timeout: 30_000 }, (err) => (err ? rej(err) : res()));
  });
  let records = 0;
  try {
    const todo = [...ends].filter(([, end]) => end > 0);
    if (todo.length === 0) return { records, ends };
    consumer.assign(todo.map(([partition]) => ({ topic, partition, offset: 0 })));
    consumer.setDefaultConsumeTimeout(200);
    const deadline = Date.now() + timeoutMs;
    const done = (): boolean => {
      const positions = consumer.position(todo.map(([partition]) => ({ topic, partition })));
      for (const [partition, end] of todo) {
        const p = positions.find((x) => x.partition === partition);
        if (!p || typeof p.offset !== 'number' || !(p.offset >= end)) return false;
      }
      return true;
    };
    while (!done()) {
      if (Date.now() > deadline) {
        const positions = consumer.position(todo.map(([partition]) => ({ topic, partition })));
        throw new Error(
          `reading ${topic} (${isolation}) timed out after ${timeoutMs} ms: positions ` +
            `${JSON.stringify(positions.map((p) => [p.partition, p.offset]))}, ends ${JSON.stringify([...ends])}`,
        );
      }
      const batch = await new Promise<Message[]>((res, rej) => {
        consumer.consume(1000, (err, messages) => (err ? rej(err) : res(messages)));
      });
      for (const m of batch) {
        records++;
        onMessage(toRead(m));
      }
    }
    return { records, ends };
  } finally {
    await new Promise<void>((res) => consumer.disconnect(() => res()));
  }
}
