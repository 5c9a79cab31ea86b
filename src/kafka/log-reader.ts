/**
 * The one way the library reads a topic outside a consumer group's flow (`redfence dlq`, `redfence
 * reconcile`): a plain read_committed consumer that is assigned partitions, never subscribes, never
 * commits, so a read leaves no group offsets behind and changes nothing in Kafka. Each partition is read
 * in offset order between two offsets, usually its earliest and the end offset it had when the read
 * began; a partition whose position stops short of the end (an open transaction holds the last stable
 * offset back) fails after `timeoutMs` without progress. The group id, when given, is only used to ask
 * for that group's committed offsets. `redfence lag --time-lag` peeks at the first record of several
 * partitions at once ({@link LogReader.first}); the outbox relay's progress recovery reads the last
 * record of a partition ({@link LogReader.last}).
 */
import { RdKafka } from '@confluentinc/kafka-javascript';
import { RedfenceError } from '../errors/index.js';
import { type ClientSettings, configError, consumerProperties } from './client-config.js';
import { connectWatched } from './connect.js';

type Consumer = InstanceType<typeof RdKafka.KafkaConsumer>;

/** One record as read: headers in order (repeated names kept), bytes as Buffers. */
export interface LogMessage {
  partition: number;
  offset: number;
  /** The record's timestamp (ms since the epoch); -1 when it has none. */
  timestamp: number;
  key: Buffer | null;
  value: Buffer | null;
  headers: Array<[string, Buffer]>;
}

export interface LogReaderOptions {
  /**
   * Brokers, client id, security and pass-through properties; or, for a caller that already holds
   * them, the librdkafka properties themselves (`bootstrap.servers`, security, pass-through).
   */
  client: Omit<ClientSettings, 'groupId'> | { properties: Record<string, unknown> };
  /** read_committed (default) or read_uncommitted. */
  readCommitted?: boolean;
  /** Whose committed offsets {@link LogReader.committed} reads; default: a one-off id nobody uses. */
  group?: string;
  /** Connect, metadata, watermark and committed-offset calls, and the most time a partition may go without progress. */
  timeoutMs: number;
  /** Once aborted, a read in progress stops (RF_INVALID_STATE) at its next fetch. */
  signal?: AbortSignal;
}

function call<T>(what: string, fn: (cb: (err: unknown, v: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) =>
    fn((err, v) =>
      err
        ? reject(
            configError(err, 'consumer') ??
              new RedfenceError(
                'RF_KAFKA_FATAL',
                `${what} failed: ${String((err as Error)?.message ?? err)}`,
                {
                  cause: err,
                },
              ),
          )
        : resolve(v),
    ),
  );
}

function toMessage(m: RdKafka.Message): LogMessage {
  const headers: Array<[string, Buffer]> = [];
  for (const h of m.headers ?? [])
    for (const [name, v] of Object.entries(h))
      headers.push([name, Buffer.isBuffer(v) ? v : Buffer.from(String(v), 'utf8')]);
  return {
    partition: m.partition,
    offset: m.offset,
    timestamp: typeof m.timestamp === 'number' ? m.timestamp : -1,
    key: m.key === undefined || m.key === null ? null : Buffer.isBuffer(m.key) ? m.key : Buffer.from(m.key),
    value: m.value ?? null,
    headers,
  };
}

export class LogReader {
  readonly #consumer: Consumer;
  readonly #o: LogReaderOptions;

  private constructor(consumer: Consumer, o: LogReaderOptions) {
    this.#consumer = consumer;
    this.#o = o;
  }

  /**
   * Connects. Refused client properties are RF_INVALID_OPTIONS; refused credentials RF_KAFKA_AUTH; no
   * answer within `timeoutMs` RF_KAFKA_FATAL naming the brokers.
   */
  static async open(o: LogReaderOptions): Promise<LogReader> {
    const groupId =
      o.group ?? `redfence-read-${process.pid}-${Date.now()}-${Math.floor(Math.random() * 1e9)}`;
    const base =
      'properties' in o.client
        ? { ...o.client.properties, 'group.id': groupId }
        : consumerProperties({ ...o.client, groupId });
    let consumer: Consumer;
    try {
      consumer = new RdKafka.KafkaConsumer(
        {
          ...base,
          'enable.auto.commit': false,
          'enable.auto.offset.store': false,
          'fetch.wait.max.ms': 10,
          'isolation.level': o.readCommitted === false ? 'read_uncommitted' : 'read_committed',
        } as RdKafka.ConsumerGlobalConfig,
        { 'auto.offset.reset': 'earliest' },
      );
    } catch (err) {
      throw configError(err, 'consumer') ?? err;
    }
    const brokers =
      'properties' in o.client
        ? String(o.client.properties['bootstrap.servers'] ?? 'the bootstrap servers')
        : o.client.brokers.join(',');
    await connectWatched(consumer, 'consumer', { timeoutMs: o.timeoutMs, brokers }).catch((err: unknown) => {
      if (RedfenceError.is(err)) throw err;
      throw (
        configError(err, 'consumer') ??
        new RedfenceError(
          'RF_KAFKA_FATAL',
          `cannot connect to Kafka at ${brokers} within ${o.timeoutMs} ms (${String((err as Error)?.message ?? err)}); check --brokers`,
          { cause: err },
        )
      );
    });
    return new LogReader(consumer, o);
  }

  /** The topic's partition count; RF_TOPIC_MISSING with `missing` as the message when it has none. */
  async partitionCount(topic: string, missing: string): Promise<number> {
    const meta = await call<RdKafka.Metadata>('metadata', (cb) =>
      this.#consumer.getMetadata({ topic, timeout: this.#o.timeoutMs }, cb),
    );
    const t = meta.topics.find((x) => x.name === topic);
    if (t === undefined || t.partitions.length === 0) throw new RedfenceError('RF_TOPIC_MISSING', missing);
    return t.partitions.length;
  }

  /** The partition's earliest offset and its end (high watermark) now. */
  async watermarks(topic: string, partition: number): Promise<{ low: number; high: number }> {
    const w = await call<RdKafka.WatermarkOffsets>('watermarks', (cb) =>
      this.#consumer.queryWatermarkOffsets(topic, partition, this.#o.timeoutMs, cb),
    );
    return { low: w.lowOffset, high: w.highOffset };
  }

  /** The group's committed offset of each partition; -1 where it has none. */
  async committed(topic: string, partitions: readonly number[]): Promise<Map<number, number>> {
    const rows = await call<RdKafka.TopicPartitionOffset[]>('committed offsets', (cb) =>
      this.#consumer.committed(
        partitions.map((partition) => ({ topic, partition })),
        this.#o.timeoutMs,
        cb,
      ),
    );
    return new Map(
      partitions.map((p) => {
        const c = Number(rows.find((x) => x.partition === p)?.offset ?? -1);
        return [p, Number.isFinite(c) && c >= 0 ? c : -1];
      }),
    );
  }

  /**
   * Reads `[start, end)` of one partition in offset order (transaction markers take offsets too, so the
   * position, not the last record, says when the end is reached). `onBatch` runs after each fetch with
   * the next offset to read.
   */
  async read(
    topic: string,
    partition: number,
    start: number,
    end: number,
    onMessage: (m: LogMessage) => void | Promise<void>,
    onBatch?: (next: number) => void,
  ): Promise<void> {
    if (start >= end) return;
    const consumer = this.#consumer;
    const tp = { topic, partition };
    consumer.assign([{ ...tp, offset: start }]);
    consumer.setDefaultConsumeTimeout(200);
    // return what is fetched once a first record is there (else every call waited out the 200 ms for
    // 500 records, and a short read took 0.5 s); never ask for more than are left before `end`
    (
      consumer as unknown as { setDefaultIsTimeoutOnlyForFirstMessage(on: boolean): void }
    ).setDefaultIsTimeoutOnlyForFirstMessage(true);
    let idle = Date.now();
    try {
      for (;;) {
        const pos = consumer.position([tp])[0]?.offset ?? -1;
        if (pos >= end) return;
        if (this.#o.signal?.aborted)
          throw new RedfenceError('RF_INVALID_STATE', `reading ${topic}/${partition} was stopped (aborted)`);
        if (Date.now() - idle > this.#o.timeoutMs)
          throw new RedfenceError(
            'RF_KAFKA_FATAL',
            `reading ${topic}/${partition} made no progress for ${this.#o.timeoutMs} ms (at ${pos} of ${end}; an open transaction?)`,
          );
        const want = Math.max(1, Math.min(500, end - pos));
        const batch = await call<RdKafka.Message[]>('consume', (cb) => consumer.consume(want, cb));
        if (batch.length > 0) idle = Date.now();
        for (const m of batch) if (m.offset < end) await onMessage(toMessage(m));
        const last = batch.at(-1);
        if (last !== undefined) onBatch?.(last.offset + 1);
      }
    } finally {
      consumer.unassign();
    }
  }

  /**
   * The last record of one partition below its end (the high watermark now), or undefined when it has
   * none; in read_committed, the last committed one (aborted records and markers take offsets too, so
   * it looks back over a window that grows fourfold until it meets a record or the earliest offset).
   */
  async last(topic: string, partition: number): Promise<LogMessage | undefined> {
    const { low, high } = await this.watermarks(topic, partition);
    for (let span = 8; ; span *= 4) {
      const from = Math.max(low, high - span);
      let last: LogMessage | undefined;
      await this.read(topic, partition, from, high, (m) => {
        last = m;
      });
      if (last !== undefined || from <= low) return last;
    }
  }

  /**
   * The record at each given position (topic, partition, offset), read together; a position with no
   * record yet within `timeoutMs` is left out of the answer.
   */
  async first(
    positions: ReadonlyArray<{ topic: string; partition: number; offset: number }>,
    timeoutMs: number,
  ): Promise<Map<string, LogMessage>> {
    const key = (t: string, p: number) => `${t}:${p}`;
    const found = new Map<string, LogMessage>();
    if (positions.length === 0) return found;
    const consumer = this.#consumer;
    const want = new Set(positions.map((x) => key(x.topic, x.partition)));
    consumer.assign(positions.map((x) => ({ ...x })));
    consumer.setDefaultConsumeTimeout(200);
    const deadline = Date.now() + timeoutMs;
    try {
      while (want.size > 0 && Date.now() < deadline) {
        const batch = await call<RdKafka.Message[]>('consume', (cb) => consumer.consume(100, cb));
        for (const m of batch) {
          const k = key(m.topic, m.partition);
          if (!want.delete(k)) continue;
          found.set(k, toMessage(m));
        }
      }
    } finally {
      consumer.unassign();
    }
    return found;
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.#consumer.disconnect(() => resolve()));
  }
}
