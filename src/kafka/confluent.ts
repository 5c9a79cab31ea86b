/**
 * The default Kafka adapter, over @confluentinc/kafka-javascript's promise API (librdkafka inside).
 * Consumer: auto-commit off, rebalance callback awaited, cooperative-sticky (or the KIP-848 `consumer`
 * protocol), optional static membership. Producer: idempotent, acks=all, partitioner murmur2_random
 * (librdkafka's default is CRC32). Exactly-once: a transactional producer whose sendOffsets carries the
 * consumer's group metadata (KIP-447).
 */
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { RedfenceError } from '../errors/index.js';
import type {
  CommitOffset,
  ConsumerHandlers,
  InRecord,
  KafkaPort,
  OutRecord,
  TopicPartition,
  TopicSpec,
} from './types.js';
import { tpKey } from './types.js';

export interface ConfluentOptions {
  brokers: string[];
  groupId: string;
  clientId?: string;
  /** Exactly-once: the transactional id (unique per instance). Omit for at-least-once. */
  transactionalId?: string;
  /**
   * Exactly-once: how long the broker keeps a dead instance's open transaction before aborting it.
   * Until then read_committed consumers of the output stop at it. Default 10000 (as Kafka Streams).
   */
  transactionTimeoutMs?: number;
  /** 'classic' (cooperative-sticky) by default; 'consumer' is KIP-848. */
  groupProtocol?: 'classic' | 'consumer';
  /** Static membership (`group.instance.id`). */
  groupInstanceId?: string;
  sessionTimeoutMs?: number;
  maxBatchSize?: number;
  /** Extra librdkafka properties for the consumer / producer. */
  consumerConfig?: Record<string, string | number | boolean>;
  producerConfig?: Record<string, string | number | boolean>;
}

type Consumer = KafkaJS.Consumer;
type Admin = KafkaJS.Admin;

function fatal(what: string, cause: unknown): RedfenceError {
  const message = cause instanceof Error ? cause.message : String(cause);
  return new RedfenceError('RF_KAFKA_FATAL', `Kafka: ${what}: ${message}`, { cause });
}
type Producer = KafkaJS.Producer;
const quiet = { logLevel: KafkaJS.logLevel.NOTHING };

function group(offsets: readonly CommitOffset[]) {
  const byTopic = new Map<string, { partition: number; offset: string }[]>();
  for (const o of offsets) {
    const list = byTopic.get(o.topic) ?? [];
    if (list.length === 0) byTopic.set(o.topic, list);
    list.push({ partition: o.partition, offset: String(o.offset) });
  }
  return [...byTopic].map(([topic, partitions]) => ({ topic, partitions }));
}

function messages(records: readonly OutRecord[]) {
  const byTopic = new Map<string, KafkaJS.Message[]>();
  for (const r of records) {
    const list = byTopic.get(r.topic) ?? [];
    if (list.length === 0) byTopic.set(r.topic, list);
    list.push({
      key: r.key,
      value: r.value,
      ...(r.headers ? { headers: r.headers } : {}),
      ...(r.partition === undefined ? {} : { partition: r.partition }),
      ...(r.timestamp === undefined ? {} : { timestamp: r.timestamp }),
    });
  }
  return [...byTopic].map(([topic, msgs]) => ({ topic, messages: msgs }));
}

export class ConfluentKafka implements KafkaPort {
  readonly #options: ConfluentOptions;
  readonly #kafka: KafkaJS.Kafka;
  #consumer: Consumer | undefined;
  #producer: Producer | undefined;
  /** Connected on first use, so topics can be checked before start(); closed by stop(). */
  #admin: Promise<Admin> | undefined;
  #stopped = false;
  #commitTimeoutMs = 30_000;

  constructor(options: ConfluentOptions) {
    if (!Array.isArray(options.brokers) || options.brokers.length === 0) {
      throw new RedfenceError('RF_INVALID_OPTIONS', 'kafka.brokers must list at least one host:port');
    }
    this.#options = options;
    this.#kafka = new KafkaJS.Kafka({
      'client.id': options.clientId ?? 'redfence',
      kafkaJS: { brokers: options.brokers, ...quiet },
    });
  }

  async start(topics: string[], handlers: ConsumerHandlers): Promise<void> {
    const o = this.#options;
    const protocol = o.groupProtocol ?? 'classic';
    const producer = this.#kafka.producer({
      partitioner: 'murmur2_random',
      'enable.idempotence': true,
      acks: -1,
      'linger.ms': 5,
      ...(o.transactionalId
        ? {
            'transactional.id': o.transactionalId,
            'transaction.timeout.ms': o.transactionTimeoutMs ?? 10_000,
            // librdkafka requires socket.timeout.ms <= transaction.timeout.ms + 100
            'socket.timeout.ms': Math.min(60_000, o.transactionTimeoutMs ?? 10_000),
          }
        : {}),
      ...o.producerConfig,
      kafkaJS: quiet,
    } as KafkaJS.ProducerConstructorConfig);
    await producer.connect();
    this.#producer = producer;

    const consumer = this.#kafka.consumer({
      'group.id': o.groupId,
      'enable.auto.commit': false,
      'auto.offset.reset': 'earliest',
      'isolation.level': 'read_committed',
      'js.consumer.max.batch.size': o.maxBatchSize ?? 500,
      // Prefetch a few batches per partition, not librdkafka's 100,000 records / 64 MiB: the memory of
      // an instance started on a long backlog stays bounded (docs/benchmarks.md, peak RSS).
      'queued.min.messages': Math.max(1000, 2 * (o.maxBatchSize ?? 500)),
      'queued.max.messages.kbytes': 16_384,
      ...(protocol === 'consumer'
        ? { 'group.protocol': 'consumer' }
        : {
            'partition.assignment.strategy': 'cooperative-sticky',
            'session.timeout.ms': o.sessionTimeoutMs ?? 10_000,
            'heartbeat.interval.ms': Math.max(500, Math.floor((o.sessionTimeoutMs ?? 10_000) / 5)),
          }),
      ...(o.groupInstanceId ? { 'group.instance.id': o.groupInstanceId } : {}),
      rebalance_cb: async (
        err: { code: number },
        assignment: TopicPartition[],
        fns: { assignmentLost(): boolean },
      ) => {
        const tps = assignment.map((a) => ({ topic: a.topic, partition: a.partition }));
        if (err.code === KafkaJS.ErrorCodes.ERR__ASSIGN_PARTITIONS) await handlers.onAssign(tps);
        else await handlers.onRevoke(tps, fns.assignmentLost());
      },
      ...o.consumerConfig,
      kafkaJS: { ...quiet },
    } as unknown as KafkaJS.ConsumerConstructorConfig);
    await consumer.connect();
    this.#consumer = consumer;
    this.#commitTimeoutMs = Math.max(
      30_000,
      Number(o.consumerConfig?.['socket.timeout.ms'] ?? 0),
      2 * (o.sessionTimeoutMs ?? 10_000),
    );
    await consumer.subscribe({ topics });
    await consumer.run({
      partitionsConsumedConcurrently: 1,
      eachBatch: async ({ batch }) => {
        const records: InRecord[] = batch.messages.map((m) => ({
          topic: batch.topic,
          partition: batch.partition,
          offset: m.offset,
          key: m.key ?? null,
          value: m.value ?? null,
          headers: (m.headers ?? {}) as InRecord['headers'],
          timestamp: m.timestamp,
        }));
        await handlers.onBatch(batch.topic, batch.partition, records, batch.highWatermark);
      },
    });
  }

  #ready(): { consumer: Consumer; producer: Producer } {
    if (!this.#consumer || !this.#producer)
      throw new RedfenceError('RF_INVALID_STATE', 'the Kafka adapter is not started');
    return { consumer: this.#consumer, producer: this.#producer };
  }

  /** The admin client, connecting it on first use; a failed connect is tried again by the next call. */
  async #adminClient(): Promise<Admin> {
    if (this.#stopped) throw new RedfenceError('RF_INVALID_STATE', 'the Kafka adapter is stopped');
    if (this.#admin === undefined) {
      const admin = this.#kafka.admin({ kafkaJS: quiet } as KafkaJS.AdminConstructorConfig);
      const connecting = admin.connect().then(() => admin);
      this.#admin = connecting;
      connecting.catch(() => {
        if (this.#admin === connecting) this.#admin = undefined;
      });
    }
    return this.#admin;
  }

  async produce(records: readonly OutRecord[], handedOver?: () => void): Promise<void> {
    if (records.length === 0) return;
    const sent = this.#ready().producer.sendBatch({ topicMessages: messages(records) });
    handedOver?.();
    await sent;
  }

  /**
   * Commits and resolves only once the group coordinator has stored the offsets. The client's
   * commitOffsets() resolves when the commit is queued (librdkafka commitAsync), not when it is stored:
   * a process killed right after it could lose the commit, and a refused commit would go unnoticed.
   * librdkafka reports the outcome through the consumer's poll loop, which waits for the batch handler
   * that is calling this, so the outcome is read back instead: committed offsets are fetched from the
   * coordinator (which answers from what it has appended to __consumer_offsets) until they reach these
   * ones. Typically one round trip.
   */
  async commit(offsets: readonly CommitOffset[]): Promise<void> {
    if (offsets.length === 0) return;
    const { consumer } = this.#ready();
    const send = () =>
      consumer.commitOffsets(
        offsets.map((o) => ({ topic: o.topic, partition: o.partition, offset: String(o.offset) })),
      );
    await send();
    const tps = offsets.map((o) => ({ topic: o.topic, partition: o.partition }));
    const started = Date.now();
    const deadline = started + this.#commitTimeoutMs;
    let sentAt = started;
    for (let delay = 0; ; delay = Math.min(250, delay === 0 ? 5 : delay * 2)) {
      if (delay > 0) await new Promise((r) => setTimeout(r, delay));
      const stored = await consumer.committed(tps, Math.max(1, deadline - Date.now()));
      const behind = offsets.filter(
        (o) =>
          !stored.some(
            (r) => r.topic === o.topic && r.partition === o.partition && Number(r.offset) >= o.offset,
          ),
      );
      if (behind.length === 0) return;
      if (Date.now() >= deadline)
        throw new RedfenceError(
          'RF_COMMIT_UNCONFIRMED',
          `Kafka: the group coordinator did not store the commit within ${this.#commitTimeoutMs} ms (` +
            behind.map((o) => `${o.topic}/${o.partition}@${o.offset}`).join(', ') +
            ')',
        );
      // A refused commit (e.g. REBALANCE_IN_PROGRESS while the group changes generation) is reported
      // only through the poll loop: send it again (commits are idempotent) until the coordinator has it.
      if (Date.now() - sentAt >= 1000) {
        sentAt = Date.now();
        await send();
      }
    }
  }

  async produceTransactionally(
    records: readonly OutRecord[],
    offsets: readonly CommitOffset[],
    beforeCommit?: () => void,
  ): Promise<void> {
    const { consumer, producer } = this.#ready();
    let txn: KafkaJS.Transaction;
    try {
      txn = await producer.transaction();
    } catch (err) {
      throw fatal('cannot begin a transaction', err);
    }
    try {
      if (records.length > 0) await txn.sendBatch({ topicMessages: messages(records) });
      await txn.sendOffsets({ consumer, topics: group(offsets) });
      beforeCommit?.();
      await txn.commit();
    } catch (err) {
      if ((err as { fatal?: unknown })?.fatal === true)
        throw fatal('the transactional producer failed fatally', err);
      try {
        await txn.abort();
      } catch {
        // A transaction that can be neither committed nor aborted leaves the producer unusable
        // (every later transaction fails): typically it was fenced by a newer producer.
        throw fatal('a failed transaction could not be aborted', err);
      }
      throw err;
    }
  }

  async committed(partitions: readonly TopicPartition[]): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    if (partitions.length === 0) return out;
    const rows = await this.#ready().consumer.committed(
      partitions.map((p) => ({ topic: p.topic, partition: p.partition })),
    );
    for (const r of rows) {
      const n = Number(r.offset);
      out.set(tpKey(r.topic, r.partition), Number.isFinite(n) && n >= 0 ? n : -1);
    }
    return out;
  }

  async partitionCount(topic: string): Promise<number> {
    const n = (await this.describeTopics([topic])).get(topic);
    if (n === undefined) throw new RedfenceError('RF_TOPIC_MISSING', `topic ${topic} does not exist`);
    return n;
  }

  async describeTopics(topics: readonly string[]): Promise<Map<string, number>> {
    const admin = await this.#adminClient();
    const out = new Map<string, number>();
    // One request per topic: a request naming a missing topic fails as a whole.
    await Promise.all(
      [...new Set(topics)].map(async (topic) => {
        try {
          const meta = await admin.fetchTopicMetadata({ topics: [topic] });
          const n = meta[0]?.partitions.length ?? 0;
          if (n > 0) out.set(topic, n);
        } catch (err) {
          if ((err as { code?: unknown })?.code !== KafkaJS.ErrorCodes.ERR_UNKNOWN_TOPIC_OR_PART) throw err;
        }
      }),
    );
    return out;
  }

  async createTopics(topics: readonly TopicSpec[]): Promise<void> {
    if (topics.length === 0) return;
    const admin = await this.#adminClient();
    try {
      // A topic that exists already (another instance made it meanwhile) is not an error here.
      await admin.createTopics({
        topics: topics.map((t) => ({
          topic: t.topic,
          numPartitions: t.partitions,
          replicationFactor: t.replicationFactor ?? -1,
        })),
      });
    } catch (err) {
      const inner = (err as { errors?: unknown })?.errors;
      const reasons = Array.isArray(inner) ? inner.map((e) => (e as Error)?.message).join('; ') : '';
      throw new Error(`Kafka: cannot create topics: ${reasons || (err as Error)?.message}`, { cause: err });
    }
  }

  async highWatermarks(topic: string): Promise<Map<number, number>> {
    const rows = await (await this.#adminClient()).fetchTopicOffsets(topic);
    return new Map(rows.map((r) => [r.partition, Number(r.high)]));
  }

  seek(partition: TopicPartition, offset: number): void {
    this.#consumer?.seek({ topic: partition.topic, partition: partition.partition, offset: String(offset) });
  }

  pause(partitions: readonly TopicPartition[]): void {
    this.#consumer?.pause(
      group(partitions.map((p) => ({ ...p, offset: 0 }))).map((g) => ({
        topic: g.topic,
        partitions: g.partitions.map((x) => x.partition),
      })),
    );
  }

  resume(partitions: readonly TopicPartition[]): void {
    this.#consumer?.resume(
      group(partitions.map((p) => ({ ...p, offset: 0 }))).map((g) => ({
        topic: g.topic,
        partitions: g.partitions.map((x) => x.partition),
      })),
    );
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    await this.#consumer?.disconnect().catch(() => undefined);
    await this.#producer?.disconnect().catch(() => undefined);
    const admin = this.#admin;
    this.#admin = undefined;
    await admin?.then((a) => a.disconnect()).catch(() => undefined);
  }
}
