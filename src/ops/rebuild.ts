/**
 * `redfence rebuild`: a Redis that lost a processor's store gets every key back exact, from the
 * snapshot topic and the input log (docs/operations.md, "Snapshot and rebuild").
 *
 * 1. Refuse unless the store is empty (`force`: delete its keys first) and no live member of the group
 *    owns an input partition (`force`: go on).
 * 2. Read the snapshot topic to its end: the latest key record per state key, the latest marker per
 *    partition. Each partition's replay start R = min(marker offset, the `asOf` of each of its key
 *    records): every key record reflects all of its key's records below its `asOf`, and the marker says
 *    every key with a record below its offset has a key record, so replaying from R misses nothing.
 * 3. Each partition's epoch becomes the highest seen (marker, key records, the epoch key) + `epochMargin`,
 *    so an instance that acquired an epoch after the last snapshot and still runs is fenced.
 * 4. Write the keys (value, fence, pending entries, under the new epoch) in pipelined batches (one slot
 *    per batch on a cluster), their pending index, the epoch keys.
 * 5. Replay each partition's input from R up to the group's committed offset G through the processor's
 *    own plan and apply stages, silently (nothing is produced: those outputs were committed before): the
 *    fence skips every record a restored key already reflects (offset <= its fence) and applies the rest.
 *    Then the pending entries below G are swept (committed already); those at or above G stay, and the
 *    restarted processor re-emits them (REEMIT) before going on from G as usual.
 * 6. Set a new snapshot mark, so the processor's snapshots start again.
 *
 * This file holds the options and the report, steps 1-3 (the checks, reading the snapshot, the plan per
 * partition) and `rebuild`, which runs the steps in that order; the writes of step 4 and the replay of
 * step 5 are in rebuild-steps.ts.
 */
import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import type { ProcessorDefinition } from '../definition/definition.js';
import { RedfenceError } from '../errors/index.js';
import type { FencingMode } from '../fence/index.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { type ClientSettings, commonProperties } from '../kafka/client-config.js';
import type { KeySpace } from '../keys/index.js';
import { decodeRecord, type SnapshotKey, type SnapshotMarker } from '../processor/snapshot-codec.js';
import {
  clearStore,
  failed,
  type PartitionPlan,
  pendingFrom,
  replayAll,
  restorePartition,
  storeKeys,
} from './rebuild-steps.js';
import type { PartitionRange } from './reconcile.js';
import { readLog } from './reconcile-sources.js';

export interface RebuildOptions {
  readonly definition: ProcessorDefinition<unknown, unknown>;
  readonly redis: Redis | Cluster;
  readonly keys: KeySpace;
  readonly fencing: FencingMode;
  readonly client: Omit<ClientSettings, 'groupId'>;
  readonly group: string;
  readonly snapshotTopic: string;
  readonly force: boolean;
  /** Read and plan only: nothing is written (the store need not be empty). */
  readonly dryRun?: boolean;
  /** Added to the highest epoch seen. */
  readonly epochMargin: number;
  readonly timeoutMs: number;
  readonly onProgress?: (what: string, partition: number, at: number, range: PartitionRange) => void;
  readonly warn?: (message: string) => void;
}

export interface PartitionRebuild {
  readonly partition: number;
  /** The marker's offset, or null when the partition has none. */
  readonly marker: number | null;
  readonly keys: number;
  /** The replay start R and end G (the group's committed offset). */
  readonly from: number;
  readonly to: number;
  readonly replayed: number;
  readonly epoch: number;
}

export interface RebuildReport {
  readonly snapshotRecords: number;
  readonly keys: number;
  readonly pending: number;
  /** Keys deleted first (`force`). */
  readonly cleared: number;
  /** Nothing was written (`dryRun`): `replayed` counts are 0, `cleared` is what --force would delete. */
  readonly dryRun: boolean;
  readonly partitions: PartitionRebuild[];
}

const refused = (m: string) => new RedfenceError('RF_INVALID_OPTIONS', m);

/** What step 1 found: the store's keys now, and the input's committed offsets and low watermarks. */
interface Found {
  readonly existing: string[];
  readonly committed: Map<number, number>;
  readonly low: Map<number, number>;
}

/** What step 2 read: the latest key record per state key, the latest marker per partition. */
interface Snapshot {
  readonly latest: Map<string, SnapshotKey>;
  readonly markers: Map<number, SnapshotMarker>;
  readonly records: number;
}

/**
 * Where a partition's replay starts: the marker's offset, or earlier when a key record was read by a
 * pass that began earlier (a slower pass of a former owner produced after a newer one): that record
 * reflects its key only below its own `asOf`.
 */
export function replayStart(marker: SnapshotMarker, keys: readonly Pick<SnapshotKey, 'asOf'>[]): number {
  return keys.reduce((a, k) => Math.min(a, k.asOf), marker.offset);
}

/** Step 1: an empty store and no live owner (or `force`, or `dryRun`); the topics exist; the offsets. */
async function check(o: RebuildOptions, dryRun: boolean, warn: (m: string) => void): Promise<Found> {
  const { redis, keys } = o;
  const input = o.definition.input;
  const existing = await storeKeys(redis, keys, o.force || dryRun ? Number.POSITIVE_INFINITY : 1);
  if (existing.length > 0 && !o.force && !dryRun)
    throw refused(
      `the store ${keys.store} is not empty: rebuild restores into an empty store (--force deletes the store's keys first)`,
    );
  const admin = new KafkaAdmin(commonProperties({ ...o.client, groupId: o.group }));
  let committed: Map<number, number>;
  let low: Map<number, number>;
  try {
    const owners = await admin.groupOwners(o.group);
    const live = [...owners.owned].filter((tp) => tp.startsWith(`${input}:`));
    if (live.length > 0 && !o.force && !dryRun)
      throw refused(
        `group ${o.group} has live members owning ${live.length} input partition(s): stop every instance first (--force goes on anyway)`,
      );
    if (live.length > 0) warn(`group ${o.group} has live members: their writes may race the rebuild`);
    const topics = await admin.describeTopics([input, o.snapshotTopic]);
    if (!topics.has(input))
      throw new RedfenceError('RF_TOPIC_MISSING', `input topic ${input} does not exist`);
    if (!topics.has(o.snapshotTopic))
      throw new RedfenceError(
        'RF_TOPIC_MISSING',
        `snapshot topic ${o.snapshotTopic} does not exist (--snapshot-topic)`,
      );
    committed = (await admin.groupOffsets(o.group, [input])).get(input) ?? new Map();
    low = await admin.lowWatermarks(input);
  } finally {
    await admin.close();
  }
  if (low.size === 0) throw new RedfenceError('RF_TOPIC_MISSING', `input topic ${input} does not exist`);
  return { existing, committed, low };
}

/** Step 2: the snapshot topic to its end. */
async function readSnapshot(o: RebuildOptions): Promise<Snapshot> {
  const input = o.definition.input;
  const latest = new Map<string, SnapshotKey>();
  const markers = new Map<number, SnapshotMarker>();
  const prefix = o.keys.statePattern().slice(0, -2);
  let records = 0;
  await readLog({
    client: o.client,
    topic: o.snapshotTopic,
    group: o.group,
    timeoutMs: o.timeoutMs,
    between: async () => undefined,
    onRecord: (r) => {
      records++;
      const rec = decodeRecord(r.key, r.value);
      if (rec === null) {
        if (r.key !== null) latest.delete(r.key.toString('utf8'));
      } else if (rec.kind === 'marker') {
        if (rec.marker.topic === input) markers.set(rec.marker.partition, rec.marker);
      } else if (rec.kind === 'close' || rec.key.slot !== undefined || rec.key.fields !== undefined)
        throw refused(
          `${o.snapshotTopic} holds a topology's snapshot, not a processor's: rebuild a topology with its own module`,
        );
      else if (rec.key.redisKey.startsWith(prefix)) latest.set(rec.key.redisKey, rec.key);
    },
    onProgress: (p, at, range) => o.onProgress?.('snapshot', p, at, range),
  });
  return { latest, markers, records };
}

/** The key records by partition; those of partitions the input does not have now are reported and dropped. */
function keysByPartition(
  latest: ReadonlyMap<string, SnapshotKey>,
  partitionCount: number,
  input: string,
  warn: (m: string) => void,
): Map<number, SnapshotKey[]> {
  const byPartition = new Map<number, SnapshotKey[]>();
  for (const k of latest.values()) {
    const list = byPartition.get(k.partition) ?? [];
    if (list.length === 0) byPartition.set(k.partition, list);
    list.push(k);
  }
  for (const [p, list] of byPartition)
    if (p >= partitionCount)
      warn(
        `${list.length} key records are fenced on partition ${p}, which ${input} does not have now: not restored`,
      );
  return byPartition;
}

/** Steps 2-3 per partition: the replay range R..G and the new epoch (reads the epoch key). */
async function planPartition(
  o: RebuildOptions,
  partition: number,
  m: SnapshotMarker | undefined,
  list: SnapshotKey[],
  found: Found,
  warn: (m: string) => void,
): Promise<PartitionPlan> {
  const input = o.definition.input;
  const lowest = found.low.get(partition) ?? 0;
  const g = found.committed.get(partition);
  let from: number;
  if (m !== undefined) from = replayStart(m, list);
  else if (list.length === 0 && (g === undefined || g <= lowest)) from = lowest;
  else if (o.force) {
    from = lowest;
    warn(`partition ${partition} has no complete snapshot: replaying from the earliest offset ${lowest}`);
  } else
    throw failed(
      `partition ${partition} of ${input} has no complete snapshot (no marker) in ${o.snapshotTopic}: keys whose records are all gone from the log cannot be restored (--force replays from the earliest offset anyway)`,
    );
  if (from < lowest)
    throw failed(
      `partition ${partition} of ${input}: the replay must start at offset ${from}, but the log starts at ${lowest} now (retention): the state after the last snapshot cannot be recovered exactly`,
    );
  let to = g ?? from;
  if (to < from) {
    warn(`partition ${partition}: the group's committed offset ${to} is below the snapshot's ${from}`);
    to = from;
  }
  const stored = Number((await o.redis.get(o.keys.epoch(input, partition))) ?? 0);
  const seen = list.reduce((a, k) => Math.max(a, k.epoch), Math.max(m?.epoch ?? 0, stored));
  return { partition, marker: m?.offset ?? null, keys: list, from, to, epoch: seen + o.epochMargin };
}

/** A partition's line of the report. */
function partitionReport(pl: PartitionPlan, replayed: number): PartitionRebuild {
  return {
    partition: pl.partition,
    marker: pl.marker,
    keys: pl.keys.length,
    from: pl.from,
    to: pl.to,
    replayed,
    epoch: pl.epoch,
  };
}

export async function rebuild(o: RebuildOptions): Promise<RebuildReport> {
  const { redis, keys } = o;
  const input = o.definition.input;
  const warn = o.warn ?? (() => undefined);
  const dryRun = o.dryRun === true;

  // 1. an empty store and no live owner
  const found = await check(o, dryRun, warn);
  const partitionCount = found.low.size;

  // 2. the snapshot; 3. the plan per partition: replay range and new epoch
  const snapshot = await readSnapshot(o);
  const byPartition = keysByPartition(snapshot.latest, partitionCount, input, warn);
  const plans: PartitionPlan[] = [];
  for (let partition = 0; partition < partitionCount; partition++)
    plans.push(
      await planPartition(
        o,
        partition,
        snapshot.markers.get(partition),
        byPartition.get(partition) ?? [],
        found,
        warn,
      ),
    );
  const report = (pending: number, partitions: PartitionRebuild[]): RebuildReport => ({
    snapshotRecords: snapshot.records,
    keys: snapshot.latest.size,
    pending,
    cleared: found.existing.length,
    dryRun,
    partitions,
  });

  if (dryRun)
    return report(
      plans.reduce((n, pl) => n + pl.keys.reduce((a, k) => a + pendingFrom(k, pl.to), 0), 0),
      plans.map((pl) => partitionReport(pl, 0)),
    );

  // 4. clear (force), epochs, keys, pending index
  await clearStore(redis, keys, input, found.existing, partitionCount);
  let pendingCount = 0;
  for (const pl of plans) pendingCount += await restorePartition(redis, keys, input, pl);

  // 5. replay [from, to) through plan + apply, silently; sweep below `to`
  const replayed = await replayAll(o, plans, partitionCount);

  // 6. a new mark: the processor's snapshots start again
  await redis.set(keys.snapshotMark(input), randomBytes(12).toString('hex'));
  return report(
    pendingCount,
    plans.map((pl, i) => partitionReport(pl, replayed[i] ?? 0)),
  );
}
