/**
 * The chaos harness's Kafka helpers: topics, offsets, a paced workload producer, and the verifier's read
 * of a topic to its end with a chosen isolation level. The admin and producer clients are the harness's
 * own; the read goes through the library's one log reader (src/kafka/log-reader.ts: assigned, never
 * committing), which is not the processing path the verifier checks (the runtime consumes through its
 * Kafka port, src/kafka/confluent.ts). The connection settings are the runtime's: `config` is librdkafka
 * properties (security, `--kafka-config`) built by the CLI from the same options the instances get.
 */
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { type LogMessage, LogReader } from '../kafka/log-reader.js';

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

  async createTopics(
    topics: Array<{ topic: string; partitions: number; config?: Record<string, string> }>,
  ): Promise<void> {
    const admin = await this.admin();
    await admin.createTopics({
      topics: topics.map((t) => ({
        topic: t.topic,
        numPartitions: t.partitions,
        replicationFactor: 1,
        ...(t.config
          ? { configEntries: Object.entries(t.config).map(([name, value]) => ({ name, value })) }
          : {}),
      })),
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

  /** Partition -> first offset (log start: above 0 once records were deleted). */
  async startOffsets(topic: string): Promise<Map<number, number>> {
    const rows = await (await this.admin()).fetchTopicOffsets(topic);
    return new Map(rows.map((r) => [r.partition, Number(r.low)]));
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
  /** CreateTime or LogAppendTime (ms); -1 when it has none. */
  timestamp: number;
  key: Buffer | null;
  value: Buffer | null;
  /** Header name -> every value, in order. */
  headers: Map<string, Buffer[]>;
}

function toRead(m: LogMessage): ReadMessage {
  const headers = new Map<string, Buffer[]>();
  for (const [name, v] of m.headers) {
    const list = headers.get(name) ?? [];
    if (list.length === 0) headers.set(name, list);
    list.push(v);
  }
  return {
    partition: m.partition,
    offset: m.offset,
    timestamp: m.timestamp,
    key: m.key,
    value: m.value,
    headers,
  };
}

/**
 * Reads every record of `topic` from its earliest offset up to the end offsets it has when called, with
 * the given isolation level, partition after partition, handing each to `onMessage`. A partition is done
 * when its position reaches its end offset (transaction markers and aborted records included); a read
 * that makes no progress for `timeoutMs` (an open transaction under read_committed) fails.
 */
export async function readTopic(
  brokers: string[],
  topic: string,
  isolation: Isolation,
  onMessage: (m: ReadMessage) => void,
  timeoutMs = 120_000,
  config: ConnectionConfig = {},
): Promise<{ records: number; ends: Map<number, number> }> {
  const reader = await LogReader.open({
    client: {
      properties: {
        ...config,
        'bootstrap.servers': brokers.join(','),
        'fetch.message.max.bytes': 4_000_000,
        'receive.message.max.bytes': 100_000_000,
      },
    },
    readCommitted: isolation === 'read_committed',
    timeoutMs,
  });
  let records = 0;
  const ends = new Map<number, number>();
  try {
    const count = await reader.partitionCount(topic, `topic ${topic} does not exist`);
    for (let partition = 0; partition < count; partition++) {
      const { low, high } = await reader.watermarks(topic, partition);
      ends.set(partition, high);
      await reader.read(topic, partition, low, high, (m) => {
        records++;
        onMessage(toRead(m));
      });
    }
    return { records, ends };
  } finally {
    await reader.close();
  }
}
