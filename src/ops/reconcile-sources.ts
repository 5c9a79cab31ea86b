/**
 * The two sides reconciliation reads. The log: a plain consumer (read_committed, assigned partitions,
 * never joining or committing for the group) reads each partition from its earliest available offset
 * (or a later one asked for) to the high watermark it had when reading began, and asks the group's
 * coordinator for the committed offsets. Redis: SCAN with the store's state-key pattern on every
 * master (one node, or each master of a cluster), HGETALL of each key, and the partitions' epochs.
 */
import { RdKafka } from '@confluentinc/kafka-javascript';
import type { Cluster, Redis } from 'ioredis';
import { RedfenceError } from '../errors/index.js';
import { decodeState } from '../fence/codec.js';
import { type ClientSettings, configError, consumerProperties } from '../kafka/client-config.js';
import { connectWatched } from '../kafka/connect.js';
import type { KeySpace } from '../keys/keys.js';
import type { PartitionRange, StoredKey } from './reconcile.js';
import type { LogRecord } from './reconcile-fold.js';

export interface LogReadOptions {
  readonly client: Omit<ClientSettings, 'groupId'>;
  readonly topic: string;
  readonly group: string;
  /** Partitions to read (default: all). */
  readonly partitions?: readonly number[];
  /** Start no earlier than this offset in each partition. */
  readonly from?: number;
  readonly timeoutMs: number;
  readonly onRecord: (r: LogRecord) => Promise<void> | void;
  readonly onProgress?: (partition: number, at: number, range: PartitionRange) => void;
  /**
   * Called once the committed offsets are known and before the end offsets are: read the store here.
   * Commits follow Redis writes and the end offsets are read after the store, so a processor running
   * meanwhile can only make the store look ahead of the committed offsets, never behind them, and never
   * beyond the end read.
   */
  readonly between: (partitionCount: number) => Promise<void>;
}

type Consumer = InstanceType<typeof RdKafka.KafkaConsumer>;

function call<T>(what: string, fn: (cb: (err: unknown, v: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) =>
    fn((err, v) =>
      err
        ? reject(
            configError(err, 'consumer') ??
              new RedfenceError(
                'RF_KAFKA_FATAL',
                `${what} failed: ${String((err as Error)?.message ?? err)}`,
                { cause: err },
              ),
          )
        : resolve(v),
    ),
  );
}

/** Reads the input log; returns the partition count and each partition's range. */
export async function readLog(o: LogReadOptions): Promise<Map<number, PartitionRange>> {
  const props = consumerProperties({ ...o.client, groupId: o.group });
  const consumer: Consumer = new RdKafka.KafkaConsumer(props as RdKafka.ConsumerGlobalConfig, {
    'auto.offset.reset': 'earliest',
  });
  // watched: a refused password fails with RF_KAFKA_AUTH, brokers that do not answer with RF_KAFKA_UNAVAILABLE
  await connectWatched(consumer, 'consumer', {
    timeoutMs: o.timeoutMs,
    brokers: o.client.brokers.join(','),
  }).catch((err: unknown) => {
    throw RedfenceError.is(err) ? err : (configError(err, 'consumer') ?? err);
  });
  try {
    const meta = await call<RdKafka.Metadata>('metadata', (cb) =>
      consumer.getMetadata({ topic: o.topic, timeout: o.timeoutMs }, cb),
    );
    const t = meta.topics.find((x) => x.name === o.topic);
    if (t === undefined || t.partitions.length === 0)
      throw new RedfenceError('RF_TOPIC_MISSING', `input topic ${o.topic} does not exist`);
    const partitionCount = t.partitions.length;
    const wanted = o.partitions ?? t.partitions.map((p) => p.id).sort((a, b) => a - b);
    for (const p of wanted)
      if (p >= partitionCount)
        throw new RedfenceError(
          'RF_INVALID_OPTIONS',
          `--partitions: ${o.topic} has no partition ${p} (it has ${partitionCount})`,
        );
    const committed = await call<RdKafka.TopicPartitionOffset[]>('committed offsets', (cb) =>
      consumer.committed(
        wanted.map((partition) => ({ topic: o.topic, partition })),
        o.timeoutMs,
        cb,
      ),
    );
    await o.between(partitionCount);
    const ranges = new Map<number, PartitionRange>();
    for (const p of wanted) {
      const w = await call<RdKafka.WatermarkOffsets>('watermarks', (cb) =>
        consumer.queryWatermarkOffsets(o.topic, p, o.timeoutMs, cb),
      );
      const start = Math.max(w.lowOffset, o.from ?? 0);
      const c = Number(committed.find((x) => x.partition === p)?.offset ?? -1);
      ranges.set(p, {
        partition: p,
        start,
        end: w.highOffset,
        committed: Number.isFinite(c) && c >= 0 ? c : start,
      });
    }
    for (const range of ranges.values()) await readPartition(consumer, o, range);
    return ranges;
  } finally {
    await new Promise<void>((resolve) => consumer.disconnect(() => resolve()));
  }
}

/** One partition, in offset order, from its start to its end (transaction markers count). */
async function readPartition(consumer: Consumer, o: LogReadOptions, range: PartitionRange): Promise<void> {
  if (range.start >= range.end) return;
  const tp = { topic: o.topic, partition: range.partition };
  consumer.assign([{ ...tp, offset: range.start }]);
  consumer.setDefaultConsumeTimeout(200);
  let idle = Date.now();
  try {
    for (;;) {
      const pos = consumer.position([tp])[0]?.offset ?? -1;
      if (pos >= range.end) return;
      if (Date.now() - idle > o.timeoutMs)
        throw new RedfenceError(
          'RF_KAFKA_FATAL',
          `reading ${o.topic}/${range.partition} made no progress for ${o.timeoutMs} ms (at ${pos} of ${range.end}; an open transaction?)`,
        );
      const batch = await call<RdKafka.Message[]>('consume', (cb) => consumer.consume(1000, cb));
      if (batch.length > 0) idle = Date.now();
      for (const m of batch) {
        if (m.offset >= range.end) continue;
        await o.onRecord({
          partition: m.partition,
          offset: m.offset,
          key:
            m.key === undefined || m.key === null
              ? null
              : Buffer.isBuffer(m.key)
                ? m.key
                : Buffer.from(m.key),
          value: m.value ?? null,
          timestamp: String(m.timestamp ?? ''),
        });
      }
      const last = batch.at(-1);
      if (last !== undefined) o.onProgress?.(range.partition, last.offset + 1, range);
    }
  } finally {
    consumer.unassign();
  }
}

/** Every master of the client: the client itself, or a cluster's masters. */
function masters(redis: Redis | Cluster): Redis[] {
  return 'nodes' in redis && typeof redis.nodes === 'function'
    ? (redis as Cluster).nodes('master')
    : [redis as Redis];
}

/** Every state key of the store, decoded; a hash that cannot be decoded comes back as corrupt. */
export async function readStore(redis: Redis | Cluster, keys: KeySpace): Promise<StoredKey[]> {
  const pattern = keys.statePattern();
  const head = pattern.slice(0, -2); // 'rf:[t=..:]{<store>:'
  const names = new Set<string>();
  for (const node of masters(redis)) {
    let cursor = '0';
    do {
      const [next, batch] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      for (const k of batch) names.add(k);
    } while (cursor !== '0');
  }
  const list = [...names].sort();
  const out: StoredKey[] = [];
  for (let i = 0; i < list.length; i += 500) {
    const chunk = list.slice(i, i + 500);
    const hashes = await Promise.all(
      chunk.map((k) => redis.hgetallBuffer(k).catch((err: unknown) => err as Error)),
    );
    chunk.forEach((redisKey, j) => {
      const h = hashes[j];
      const id = redisKey.slice(head.length, -1);
      if (h instanceof Error) {
        if (/WRONGTYPE/.test(h.message)) out.push({ redisKey, id, state: { corrupt: 'not a hash' } });
        else throw new RedfenceError('RF_REDIS_UNAVAILABLE', `HGETALL failed: ${h.message}`, { cause: h });
        return;
      }
      if (h === undefined || Object.keys(h).length === 0) return; // gone since the scan
      try {
        const state = decodeState(h);
        if (state !== null) out.push({ redisKey, id, state });
      } catch (err) {
        out.push({ redisKey, id, state: { corrupt: err instanceof Error ? err.message : String(err) } });
      }
    });
  }
  return out;
}

/** The partitions' epoch counters (0 when a partition never had an owner). */
export async function readEpochs(
  redis: Redis | Cluster,
  keys: KeySpace,
  topic: string,
  partitions: Iterable<number>,
): Promise<Map<number, number>> {
  const out = new Map<number, number>();
  for (const p of partitions) out.set(p, Number((await redis.get(keys.epoch(topic, p))) ?? 0));
  return out;
}
