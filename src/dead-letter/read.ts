/**
 * Reads a dead-letter topic from its earliest offset to the end offsets it has when the read starts,
 * with a plain read_committed consumer (assign, never subscribe) that never commits: `dlq stats`,
 * `show` and `replay` leave no consumer group offsets behind and change nothing in Kafka. Partitions
 * are read one at a time, in offset order; a partition whose position stops short of its end (an open
 * transaction holds the last stable offset back) fails after `idleTimeoutMs` without progress.
 */
import { RdKafka } from '@confluentinc/kafka-javascript';
import { RedfenceError } from '../errors/index.js';
import { type ClientSettings, configError, consumerProperties } from '../kafka/client-config.js';
import { connectWatched } from '../kafka/connect.js';
import { type DeadLetterInfo, decodeDeadLetter } from './decode.js';

type Consumer = InstanceType<typeof RdKafka.KafkaConsumer>;

/** One record of the dead-letter topic, with its headers decoded. */
export interface DltRecord {
  /** The dead-letter topic's partition and offset (the replay marker's coordinates). */
  partition: number;
  offset: number;
  /** When it was dead-lettered (the DLT record's timestamp), ms since the epoch; -1 when unknown. */
  timestamp: number;
  key: Buffer | null;
  value: Buffer | null;
  /** Every header in order, repeated names included. */
  headerList: Array<[string, Buffer]>;
  /** Header name -> every value, in order. */
  headers: Map<string, Buffer[]>;
  /** Undefined when the record carries none of the four dead-letter schemes. */
  info: DeadLetterInfo | undefined;
}

export interface DltReadOptions {
  /** Brokers, client id, security and pass-through properties (the group id is made here). */
  client: Omit<ClientSettings, 'groupId'>;
  topic: string;
  /** Connect, metadata and watermark calls, and the most time a partition may go without progress. */
  timeoutMs: number;
  onRecord: (r: DltRecord) => void | Promise<void>;
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

function toRecord(m: RdKafka.Message): DltRecord {
  const headerList: Array<[string, Buffer]> = [];
  const headers = new Map<string, Buffer[]>();
  for (const h of m.headers ?? []) {
    for (const [name, v] of Object.entries(h)) {
      const b = Buffer.isBuffer(v) ? v : Buffer.from(String(v), 'utf8');
      headerList.push([name, b]);
      const list = headers.get(name) ?? [];
      if (list.length === 0) headers.set(name, list);
      list.push(b);
    }
  }
  const key =
    m.key === undefined || m.key === null ? null : Buffer.isBuffer(m.key) ? m.key : Buffer.from(m.key);
  return {
    partition: m.partition,
    offset: m.offset,
    timestamp: typeof m.timestamp === 'number' ? m.timestamp : -1,
    key,
    value: m.value ?? null,
    headerList,
    headers,
    info: decodeDeadLetter(headers),
  };
}

/** Reads every partition of the topic to its end; returns partition -> end offset read to. */
export async function readDeadLetters(o: DltReadOptions): Promise<Map<number, number>> {
  const groupId = `redfence-dlq-${process.pid}-${Date.now()}-${Math.floor(Math.random() * 1e9)}`;
  const props = consumerProperties({ ...o.client, groupId });
  let consumer: Consumer;
  try {
    consumer = new RdKafka.KafkaConsumer(props as RdKafka.ConsumerGlobalConfig, {
      'auto.offset.reset': 'earliest',
    });
  } catch (err) {
    throw configError(err, 'consumer') ?? err;
  }
  await connectWatched(consumer, 'consumer', {
    timeoutMs: o.timeoutMs,
    brokers: o.client.brokers.join(','),
  }).catch((err: unknown) => {
    if (RedfenceError.is(err)) throw err;
    const why = String((err as Error)?.message ?? err);
    throw new RedfenceError(
      'RF_KAFKA_FATAL',
      `cannot connect to Kafka at ${o.client.brokers.join(',')} within ${o.timeoutMs} ms (${why}); check --brokers`,
      { cause: err },
    );
  });
  try {
    const meta = await call<RdKafka.Metadata>('metadata', (cb) =>
      consumer.getMetadata({ topic: o.topic, timeout: o.timeoutMs }, cb),
    );
    const t = meta.topics.find((x) => x.name === o.topic);
    if (t === undefined || t.partitions.length === 0)
      throw new RedfenceError('RF_TOPIC_MISSING', `dead-letter topic ${o.topic} does not exist`);
    const ends = new Map<number, number>();
    for (const p of t.partitions.map((x) => x.id).sort((a, b) => a - b)) {
      const w = await call<RdKafka.WatermarkOffsets>('watermarks', (cb) =>
        consumer.queryWatermarkOffsets(o.topic, p, o.timeoutMs, cb),
      );
      ends.set(p, w.highOffset);
      await readPartition(consumer, o, p, w.lowOffset, w.highOffset);
    }
    return ends;
  } finally {
    await new Promise<void>((resolve) => consumer.disconnect(() => resolve()));
  }
}

async function readPartition(
  consumer: Consumer,
  o: DltReadOptions,
  partition: number,
  start: number,
  end: number,
): Promise<void> {
  if (start >= end) return;
  const tp = { topic: o.topic, partition };
  consumer.assign([{ ...tp, offset: start }]);
  consumer.setDefaultConsumeTimeout(200);
  let idle = Date.now();
  try {
    for (;;) {
      const pos = consumer.position([tp])[0]?.offset ?? -1;
      if (pos >= end) return;
      if (Date.now() - idle > o.timeoutMs)
        throw new RedfenceError(
          'RF_KAFKA_FATAL',
          `reading ${o.topic}/${partition} made no progress for ${o.timeoutMs} ms (at ${pos} of ${end}; an open transaction?)`,
        );
      const batch = await call<RdKafka.Message[]>('consume', (cb) => consumer.consume(500, cb));
      if (batch.length > 0) idle = Date.now();
      for (const m of batch) {
        if (m.offset >= end) continue;
        await o.onRecord(toRecord(m));
      }
    }
  } finally {
    consumer.unassign();
  }
}
