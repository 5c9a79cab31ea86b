/**
 * The two sides reconciliation reads. The log: the library's log reader (src/kafka/log-reader.ts:
 * read_committed, assigned partitions, never joining or committing for the group) reads each partition from its earliest available offset
 * (or a later one asked for) to the high watermark it had when reading began, and asks the group's
 * coordinator for the committed offsets. Redis: SCAN with the store's state-key pattern on every
 * master (one node, or each master of a cluster), HGETALL of each key, and the partitions' epochs.
 */
import type { Cluster, Redis } from 'ioredis';
import { RedfenceError } from '../errors/index.js';
import { decodeState } from '../fence/codec.js';
import type { ClientSettings } from '../kafka/client-config.js';
import { LogReader } from '../kafka/log-reader.js';
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

/** Reads the input log; returns the partition count and each partition's range. */
export async function readLog(o: LogReadOptions): Promise<Map<number, PartitionRange>> {
  const reader = await LogReader.open({ client: o.client, group: o.group, timeoutMs: o.timeoutMs });
  try {
    const partitionCount = await reader.partitionCount(o.topic, `input topic ${o.topic} does not exist`);
    const wanted = o.partitions ?? Array.from({ length: partitionCount }, (_, p) => p);
    for (const p of wanted)
      if (p >= partitionCount)
        throw new RedfenceError(
          'RF_INVALID_OPTIONS',
          `--partitions: ${o.topic} has no partition ${p} (it has ${partitionCount})`,
        );
    const committed = await reader.committed(o.topic, wanted);
    await o.between(partitionCount);
    const ranges = new Map<number, PartitionRange>();
    for (const p of wanted) {
      const w = await reader.watermarks(o.topic, p);
      const start = Math.max(w.low, o.from ?? 0);
      const c = committed.get(p) ?? -1;
      ranges.set(p, { partition: p, start, end: w.high, committed: c >= 0 ? c : start });
    }
    for (const range of ranges.values())
      await reader.read(
        o.topic,
        range.partition,
        range.start,
        range.end,
        (m) =>
          o.onRecord({
            partition: m.partition,
            offset: m.offset,
            key: m.key,
            value: m.value,
            timestamp: String(m.timestamp),
          }),
        (next) => o.onProgress?.(range.partition, next, range),
      );
    return ranges;
  } finally {
    await reader.close();
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
