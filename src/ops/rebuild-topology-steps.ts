/**
 * The Redis side of `redfence rebuild <topology module>` (src/ops/rebuild-topology.ts orders the steps
 * and holds the plan; docs/operations.md, "Snapshots of a topology"): clearing what a lost or half
 * rebuilt store holds (`force`), the restore (each partition's epoch key; each fence key's slot: its
 * fence hash under the new epoch with the pending entries at or above the group's committed offset G,
 * the windows, session and sliding hashes beside it with their expiry; the close indexes of the
 * emit-final stores), and the replay: each stateful sub-topology's partition read from R to G
 * (read_committed, headers kept: ticks close windows as they did) through the topology's own executor
 * from the stream time at R, producing nothing, and its stream time at G checked against the one the
 * group committed there.
 */
import type { Cluster, Redis } from 'ioredis';
import { RedfenceError } from '../errors/index.js';
import type { ClientSettings } from '../kafka/client-config.js';
import { type LogMessage, LogReader } from '../kafka/log-reader.js';
import type { SnapshotCloseIndex, SnapshotKey } from '../processor/snapshot-codec.js';
import { decodeStreamTime, encodeStreamTime } from '../processor/topology/stream-time.js';
import type { ModelHeaders, ModelInput } from '../topology/model-types.js';
import type { TopologyExecutor } from '../topology/run/executor.js';
import type { StreamTimes } from '../topology/run/types.js';
import { failed, pipelined, restoredFields } from './rebuild-steps.js';

/** One partition of a stateful sub-topology's topic, decided before anything is written. */
export interface TopologyPartitionPlan {
  readonly topic: string;
  readonly partition: number;
  readonly partitionCount: number;
  /** The marker's offset, or null when the partition has none. */
  readonly marker: number | null;
  /** The latest key record of each fence key fenced on this partition. */
  readonly keys: SnapshotKey[];
  /** The close-index parts of the partition's emit-final stores. */
  readonly close: SnapshotCloseIndex[];
  /** The replay start R and end G (the group's committed offset). */
  readonly from: number;
  readonly to: number;
  /** The commit metadata at R (the marker's) and at G (the group's): the stream times there. */
  readonly timeFrom: string;
  readonly timeTo: string | undefined;
  /** The new epoch: the highest seen plus the margin. */
  readonly epoch: number;
}

const REPLAY_BATCH = 500;

/** `force`: the names found (fence hashes, the keys beside them, close indexes, the layout marker) deleted. */
export async function clearNames(redis: Redis | Cluster, names: readonly string[]): Promise<void> {
  await pipelined(
    redis,
    names.map((redisKey) => ({ redisKey })),
    (p, it) => p.del(it.redisKey),
  );
}

/** The pending entries of a key that are restored: those at or above G (below it they were committed). */
export function pendingAt(k: SnapshotKey, to: number): number {
  return k.pending.filter(([off]) => off >= to).length;
}

/** Restores one partition: its epoch key, its fence keys' slots under the new epoch, its close indexes. */
export async function restoreTopologyPartition(
  redis: Redis | Cluster,
  epochKey: string,
  closeKey: (c: SnapshotCloseIndex) => string,
  pl: TopologyPartitionPlan,
): Promise<number> {
  await redis.set(epochKey, String(pl.epoch));
  const now = Date.now();
  await pipelined(redis, pl.keys, (p, k) => {
    p.del(k.redisKey);
    p.hset(k.redisKey, ...restoredFields(k, pl.epoch, pl.to));
    for (const s of k.slot ?? []) {
      const name = k.redisKey + s.suffix;
      p.del(name);
      // gone by the wall clock since the pass read it: Redis would have dropped it as well
      if (s.expireAt !== -1 && s.expireAt <= now) continue;
      p.hset(name, ...s.fields.flat());
      if (s.expireAt !== -1) p.pexpireat(name, s.expireAt);
    }
  });
  for (const c of pl.close) {
    if (c.members.length === 0) continue;
    // NX: a part of an older pass holds members again, or ones the index no longer needs (a window
    // already final, or closed before the group's committed clock): they finalize to nothing
    await redis.zadd(closeKey(c), 'NX', ...c.members.flat());
  }
  return pl.keys.reduce((a, k) => a + pendingAt(k, pl.to), 0);
}

/** A stream time as comparable text: its clocks by node name, those never moved left out. */
function clocks(times: StreamTimes): string {
  const kept = Object.entries(times)
    .filter(([, c]) => c.stream !== -1 || c.emitted !== -1 || c.store !== -1)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return encodeStreamTime(Object.fromEntries(kept));
}

function headersOf(m: LogMessage): ModelHeaders | undefined {
  if (m.headers.length === 0) return undefined;
  const h: Record<string, Buffer | Buffer[]> = {};
  for (const [name, v] of m.headers) {
    const had = h[name];
    h[name] = had === undefined ? v : Array.isArray(had) ? [...had, v] : [had, v];
  }
  return h;
}

/** What the replay needs besides the plan. */
export interface TopologyReplaySettings {
  readonly executor: TopologyExecutor;
  readonly client: Omit<ClientSettings, 'groupId'>;
  readonly timeoutMs: number;
  readonly onProgress?: (topic: string, partition: number, at: number, end: number) => void;
}

/**
 * Replays [R, G) of one partition through the executor, producing nothing (those outputs were
 * committed before the loss), then checks the stream time it ends with against G's. Returns the
 * records replayed.
 */
export async function replayTopologyPartition(
  o: TopologyReplaySettings,
  pl: TopologyPartitionPlan,
): Promise<number> {
  const { executor } = o;
  const where = `${pl.topic}/${pl.partition}`;
  executor.setStreamTime(pl.partition, decodeStreamTime(pl.timeFrom, where), pl.topic);
  let replayed = 0;
  if (pl.to > pl.from) {
    const reader = await LogReader.open({ client: o.client, timeoutMs: o.timeoutMs });
    let buffer: ModelInput[] = [];
    const flush = async () => {
      if (buffer.length === 0) return;
      try {
        await executor.runBatch({
          topic: pl.topic,
          partition: pl.partition,
          epoch: pl.epoch,
          committedOffset: pl.to,
          records: buffer,
          partitionCount: pl.partitionCount,
          partitionCounts: [pl.partitionCount],
        });
      } catch (err) {
        if (RedfenceError.is(err, 'RF_TOPOLOGY_FENCED'))
          throw failed(`${where}: a newer epoch fenced the replay (an instance is running?)`);
        throw err;
      }
      replayed += buffer.length;
      buffer = [];
    };
    try {
      await reader.read(
        pl.topic,
        pl.partition,
        pl.from,
        pl.to,
        async (m) => {
          const headers = headersOf(m);
          buffer.push({
            topic: pl.topic,
            partition: m.partition,
            offset: m.offset,
            key: m.key,
            value: m.value,
            timestamp: m.timestamp,
            ...(headers === undefined ? {} : { headers }),
          });
          if (buffer.length >= REPLAY_BATCH) await flush();
        },
        (next) => o.onProgress?.(pl.topic, pl.partition, next, pl.to),
      );
      await flush();
    } finally {
      await reader.close();
    }
  }
  // the replay must end where the group's commit says the first run was: else some record was decided
  // otherwise than it was (what Redis is restored to would not be what the outputs say)
  if (pl.timeTo !== undefined) {
    const got = clocks(executor.streamTime(pl.partition, pl.topic));
    const want = clocks(decodeStreamTime(pl.timeTo, where));
    if (got !== want)
      throw new RedfenceError(
        'RF_STATE_CORRUPT',
        `${where}: the replay from ${pl.from} to ${pl.to} ends at another stream time than the group committed there (${got} against ${want}): the snapshot and the log do not give that state back exactly; nothing of the application is marked rebuilt`,
        { details: { partition: where } },
      );
  }
  return replayed;
}
