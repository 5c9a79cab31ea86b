/**
 * The harness's reader of a topology run's repartition topics, from before the instances start until
 * the run is judged: the runtime purges a repartition partition's committed records (DeleteRecords, at
 * most once per `repartitionPurgeIntervalMs`, 30 s by default, as Kafka Streams purges its repartition
 * topics), so they cannot be read back after the drain as the input and output topics are. It is a plain
 * consumer with no group (assigned every partition from offset 0, never committing), reading with the
 * run's isolation (read_committed in exactly-once mode: what the downstream tasks read), not the
 * runtime's Kafka port.
 *
 * A purge can only delete records the group has committed, which it read after this reader could, so
 * this reader misses records only when it falls a whole purge interval behind. It cannot miss them
 * unnoticed: `auto.offset.reset` is `error`, so a fetch below a partition's first offset stops that
 * partition with an error instead of skipping to the first offset left; `failures` then names it, and
 * the verdict fails the run (the downstream stage cannot be judged without the records).
 */
import { randomBytes } from 'node:crypto';
import { RdKafka } from '@confluentinc/kafka-javascript';
import type { ConnectionConfig, Isolation, ReadMessage } from './kafka.js';

type Consumer = InstanceType<typeof RdKafka.KafkaConsumer>;

/** librdkafka's "no offset to automatically reset to": a fetch below the partition's first offset. */
const OFFSET_RESET = -140;
const TIMEOUT = -185;

export class RepartitionLog {
  readonly #consumer: Consumer;
  /** By topic, then partition: the records read, in offset order. */
  readonly #records = new Map<string, Map<number, ReadMessage[]>>();
  readonly #partitions: ReadonlyMap<string, number>;
  /**
   * Each partition's position as of the last batch handed over (`topic/partition` -> offset): the
   * consumer's own position runs ahead of the records handed over while a consume call collects.
   */
  readonly #settled = new Map<string, number>();
  #stopped = false;
  #loop: Promise<void> = Promise.resolve();
  /** What went wrong while reading (a partition that fell behind the purge among them). */
  readonly failures: string[] = [];

  private constructor(consumer: Consumer, partitions: ReadonlyMap<string, number>) {
    this.#consumer = consumer;
    this.#partitions = partitions;
    for (const [topic, n] of partitions)
      this.#records.set(topic, new Map(Array.from({ length: n }, (_, p) => [p, [] as ReadMessage[]])));
  }

  /** Connects and starts reading every partition of `topics` (topic -> partition count) from offset 0. */
  static async open(
    brokers: readonly string[],
    topics: ReadonlyMap<string, number>,
    isolation: Isolation,
    config: ConnectionConfig = {},
  ): Promise<RepartitionLog> {
    const consumer = new RdKafka.KafkaConsumer(
      {
        ...config,
        'bootstrap.servers': brokers.join(','),
        'group.id': `chaos-repartition-log-${randomBytes(4).toString('hex')}`,
        'enable.auto.commit': false,
        'enable.auto.offset.store': false,
        'isolation.level': isolation,
        'fetch.wait.max.ms': 50,
        'fetch.message.max.bytes': 4_000_000,
        'receive.message.max.bytes': 100_000_000,
      } as RdKafka.ConsumerGlobalConfig,
      { 'auto.offset.reset': 'error' } as RdKafka.ConsumerTopicConfig,
    );
    const log = new RepartitionLog(consumer, topics);
    consumer.on('event.error', (err) => log.#failed(err));
    await new Promise<void>((resolve, reject) =>
      consumer.connect({ timeout: 30_000 }, (err) => (err ? reject(err) : resolve())),
    );
    consumer.assign(
      [...topics].flatMap(([topic, n]) =>
        Array.from({ length: n }, (_, partition) => ({ topic, partition, offset: 0 })),
      ),
    );
    consumer.setDefaultConsumeTimeout(200);
    log.#loop = log.#run();
    return log;
  }

  #failed(err: unknown): void {
    const code = (err as { code?: number })?.code;
    if (code === TIMEOUT) return;
    const what =
      code === OFFSET_RESET
        ? 'a partition fell behind the purge: its first records were deleted before this reader read them'
        : String((err as Error)?.message ?? err);
    if (!this.failures.includes(what)) this.failures.push(what);
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      const batch = await new Promise<RdKafka.Message[]>((resolve) =>
        this.#consumer.consume(1000, (err, messages) => {
          if (err) this.#failed(err);
          resolve(err ? [] : messages);
        }),
      );
      for (const m of batch) this.#records.get(m.topic)?.get(m.partition)?.push(toRead(m));
      // no consume call in flight now: the position is that of the records handed over
      const all = [...this.#partitions].flatMap(([topic, n]) =>
        Array.from({ length: n }, (_, partition) => ({ topic, partition })),
      );
      for (const at of this.#consumer.position(all))
        if (typeof at.offset === 'number' && at.offset >= 0)
          this.#settled.set(`${at.topic}/${at.partition}`, at.offset);
    }
  }

  /** The records of `topic` read so far, partition after partition, each in offset order. */
  records(topic: string): ReadMessage[] {
    return [...(this.#records.get(topic)?.values() ?? [])].flat();
  }

  /** The offset after the last record read of a partition (0: none). */
  next(topic: string, partition: number): number {
    return (this.#records.get(topic)?.get(partition)?.at(-1)?.offset ?? -1) + 1;
  }

  /**
   * This reader's position on a partition (past transaction markers and aborted records too) as of the
   * records it has handed over; -1: none yet.
   */
  position(topic: string, partition: number): number {
    return this.#settled.get(`${topic}/${partition}`) ?? -1;
  }

  partitions(topic: string): number {
    return this.#partitions.get(topic) ?? 0;
  }

  async close(): Promise<void> {
    this.#stopped = true;
    await this.#loop;
    await new Promise<void>((resolve) => this.#consumer.disconnect(() => resolve()));
  }
}

function toRead(m: RdKafka.Message): ReadMessage {
  const headers = new Map<string, Buffer[]>();
  for (const h of m.headers ?? [])
    for (const [name, v] of Object.entries(h)) {
      const list = headers.get(name) ?? [];
      headers.set(name, list);
      list.push(Buffer.isBuffer(v) ? v : Buffer.from(String(v), 'utf8'));
    }
  const key =
    m.key === undefined || m.key === null ? null : Buffer.isBuffer(m.key) ? m.key : Buffer.from(m.key);
  return {
    partition: m.partition,
    offset: m.offset,
    timestamp: typeof m.timestamp === 'number' ? m.timestamp : -1,
    key,
    value: m.value ?? null,
    headers,
  };
}
