/**
 * `redfence rebuild <topology module>`: a Redis that lost a topology's state gets it back exact, from
 * the compacted snapshot topic its processors keep (src/processor/topology/snapshot.ts) and the logs of
 * the topics its stateful sub-topologies read (docs/operations.md, "Snapshots of a topology").
 *
 * 1. Refuse what it cannot restore exactly, before any connection ({@link checkRebuildable}: a pattern
 *    source, session and sliding windows); then unless `force`, an application with state in Redis
 *    or live members owning a partition it reads.
 * 2. Read the snapshot topic to its end: the latest key record per fence key, marker per partition,
 *    close-index part per partition, store and chunk.
 * 3. Per partition of each stateful sub-topology's topic: R = the marker's offset (a key record read
 *    by an older pass than the marker is refused: the stream time at its `asOf` is not kept), G = the
 *    group's committed offset and its metadata; the new epoch = the highest seen + `epochMargin`.
 * 4. Clear (`force`) and delete the layout marker; write the epochs, the fence keys' slots under the new
 *    epochs, the close indexes (rebuild-topology-steps.ts).
 * 5. Replay each partition from R to G through the executor, silently, from the marker's stream time;
 *    the stream time it ends with must be the one committed at G (else RF_STATE_CORRUPT).
 * 6. Only then the layout marker and a new snapshot mark: until they are written, a topology with time
 *    windows refuses to start on what a failed rebuild left (RF_STATE_LAYOUT), as on a lost store.
 */
import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { RedfenceError } from '../errors/index.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { type ClientSettings, commonProperties } from '../kafka/client-config.js';
import { tpKey } from '../kafka/types.js';
import { KeySpace } from '../keys/index.js';
import {
  decodeRecord,
  type SnapshotCloseIndex,
  type SnapshotKey,
  type SnapshotMarker,
} from '../processor/snapshot-codec.js';
import { scanSlots } from '../processor/topology/snapshot-read.js';
import { STORE_LAYOUT } from '../store/layout.js';
import { hasPatterns } from '../topology/patterns.js';
import { TopologyExecutor } from '../topology/run/executor.js';
import type { BuiltTopology } from '../topology/types.js';
import { failed } from './rebuild-steps.js';
import {
  clearNames,
  pendingAt,
  replayTopologyPartition,
  restoreTopologyPartition,
  type TopologyPartitionPlan,
} from './rebuild-topology-steps.js';
import { readLog } from './reconcile-sources.js';

export interface TopologyRebuildOptions {
  readonly topology: BuiltTopology;
  readonly redis: Redis | Cluster;
  readonly tenant?: string;
  readonly client: Omit<ClientSettings, 'groupId'>;
  readonly group: string;
  readonly snapshotTopic: string;
  readonly force: boolean;
  readonly dryRun?: boolean;
  readonly epochMargin: number;
  readonly timeoutMs: number;
  readonly onProgress?: (topic: string, partition: number, at: number, end: number) => void;
  readonly warn?: (message: string) => void;
}

export interface TopologyPartitionRebuild {
  readonly topic: string;
  readonly partition: number;
  readonly marker: number | null;
  readonly keys: number;
  readonly from: number;
  readonly to: number;
  readonly replayed: number;
  readonly epoch: number;
}

export interface TopologyRebuildReport {
  readonly snapshotRecords: number;
  readonly keys: number;
  readonly pending: number;
  /** Redis keys of the application deleted first (`force`; with `dryRun`: found). */
  readonly cleared: number;
  readonly dryRun: boolean;
  readonly partitions: TopologyPartitionRebuild[];
}

const refused = (m: string) => new RedfenceError('RF_INVALID_OPTIONS', m);
const unsupported = (m: string, node: string) =>
  new RedfenceError('RF_TOPOLOGY_UNSUPPORTED', m, { details: { node } });

/**
 * What a rebuild cannot give back exactly, refused before any connection: a source reading a pattern
 * (its topics are known only once listed), and session and sliding windows (a replayed record the
 * restored state already holds is skipped, and theirs need its results to move the stream time).
 */
export function checkRebuildable(built: BuiltTopology): void {
  if (hasPatterns(built))
    throw unsupported(
      `topology ${built.applicationId} reads a pattern: rebuild needs its topics by name (list them in the source)`,
      built.nodes.find((n) => n.kind === 'source' && n.pattern !== null)?.name ?? built.applicationId,
    );
  for (const n of built.nodes)
    if (n.kind === 'aggregate' && (n.window?.kind === 'session' || n.window?.kind === 'sliding'))
      throw unsupported(
        `topology node ${n.name}: ${n.window?.kind} windows cannot be rebuilt exactly (a replayed record the snapshot already holds is skipped, and these windows need its results to move the stream time)`,
        n.name,
      );
}

interface Found {
  readonly existing: string[];
  readonly counts: Map<string, number>;
  readonly low: Map<string, Map<number, number>>;
  readonly commits: Map<string, Map<number, { offset: number; metadata: string }>>;
}

interface Snapshot {
  readonly keys: Map<string, SnapshotKey>;
  readonly markers: Map<string, SnapshotMarker>;
  readonly close: Map<string, SnapshotCloseIndex>;
  readonly records: number;
}

/** Step 1: what the application holds in Redis now, the topics, the group's offsets and members. */
async function check(o: TopologyRebuildOptions, exec: TopologyExecutor, topics: string[]): Promise<Found> {
  const existing: string[] = [];
  const plan = exec.plan;
  for (const sub of plan.subs.values()) {
    if (!sub.stateful) continue;
    const found = await scanSlots(o.redis, exec.storeFor(sub.topic).keys.space, 1000, () => false);
    for (const [fence, suffixes] of found) existing.push(fence, ...suffixes.map((s) => fence + s));
  }
  if (existing.length > 0 && !o.force && !o.dryRun)
    throw refused(
      `application ${plan.built.applicationId} has state in Redis (${existing.length} keys): rebuild restores into an empty store (--force deletes the application's keys first)`,
    );
  const admin = new KafkaAdmin(commonProperties({ ...o.client, groupId: o.group }));
  try {
    const owners = await admin.groupOwners(o.group);
    const live = [...owners.owned].filter((tp) => topics.some((t) => tp.startsWith(`${t}:`)));
    if (live.length > 0 && !o.force && !o.dryRun)
      throw refused(
        `group ${o.group} has live members owning ${live.length} partition(s): stop every instance first (--force goes on anyway)`,
      );
    if (live.length > 0) o.warn?.(`group ${o.group} has live members: their writes may race the rebuild`);
    const counts = await admin.describeTopics([...topics, o.snapshotTopic]);
    for (const t of topics)
      if (!counts.has(t)) throw new RedfenceError('RF_TOPIC_MISSING', `topic ${t} does not exist`);
    if (!counts.has(o.snapshotTopic))
      throw new RedfenceError(
        'RF_TOPIC_MISSING',
        `snapshot topic ${o.snapshotTopic} does not exist (--snapshot-topic)`,
      );
    const low = new Map<string, Map<number, number>>();
    for (const t of topics) low.set(t, await admin.lowWatermarks(t));
    const commits = await admin.groupCommits(o.group, topics);
    return { existing, counts, low, commits };
  } finally {
    await admin.close();
  }
}

/** Step 2: the snapshot topic to its end. */
async function readSnapshot(o: TopologyRebuildOptions, prefixes: string[]): Promise<Snapshot> {
  const keys = new Map<string, SnapshotKey>();
  const markers = new Map<string, SnapshotMarker>();
  const close = new Map<string, SnapshotCloseIndex>();
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
      const name = r.key?.toString('utf8') ?? '';
      if (rec === null) {
        keys.delete(name);
        close.delete(name);
      } else if (rec.kind === 'marker')
        markers.set(tpKey(rec.marker.topic, rec.marker.partition), rec.marker);
      else if (rec.kind === 'close') close.set(name, rec.close);
      else if (rec.key.slot === undefined)
        throw refused(
          `${o.snapshotTopic} holds a processor's snapshot, not a topology's: rebuild a processor with its own module`,
        );
      else if (prefixes.some((p) => name.startsWith(p))) keys.set(name, rec.key);
    },
  });
  return { keys, markers, close, records };
}

/** Step 3 for one partition: R, G and their stream times, the new epoch. */
async function planPartition(
  o: TopologyRebuildOptions,
  at: { topic: string; partition: number; count: number; epochKey: string },
  snap: { marker: SnapshotMarker | undefined; keys: SnapshotKey[]; close: SnapshotCloseIndex[] },
  found: Found,
): Promise<TopologyPartitionPlan> {
  const { topic, partition } = at;
  const where = `partition ${partition} of ${topic}`;
  const m = snap.marker;
  const lowest = found.low.get(topic)?.get(partition) ?? 0;
  const g = found.commits.get(topic)?.get(partition);
  let from: number;
  let timeFrom = '';
  if (m !== undefined) {
    from = snap.keys.reduce((a, k) => Math.min(a, k.asOf), m.offset);
    if (from < m.offset)
      throw failed(
        `${where}: a key record was read by a pass that began at offset ${from}, before the marker's ${m.offset} (an older owner's pass?): the stream time there is not in the snapshot; let a running processor complete a new pass, then rebuild`,
      );
    timeFrom = m.streamTime ?? '';
  } else if (snap.keys.length === 0 && (g === undefined || g.offset <= lowest)) {
    from = g?.offset ?? lowest;
    timeFrom = g?.metadata ?? '';
  } else if (o.force && lowest === 0) {
    from = 0;
    o.warn?.(`${where} has no complete snapshot: replaying it from offset 0`);
  } else
    throw failed(
      `${where} has no complete snapshot (no marker) in ${o.snapshotTopic}${o.force ? ' and its log no longer starts at 0' : ' (--force replays it from offset 0 when the log still starts there)'}`,
    );
  if (from < lowest)
    throw failed(
      `${where}: the replay must start at offset ${from}, but the log starts at ${lowest} now (retention or a purge): the state after the last snapshot cannot be recovered exactly`,
    );
  const to = g?.offset ?? from;
  if (to < from)
    throw failed(
      `${where}: the group's committed offset ${to} is below the snapshot's ${from} (offsets reset since?): its stream time there is not known`,
    );
  const stored = Number((await o.redis.get(at.epochKey)) ?? 0);
  const seen = snap.keys.reduce((a, k) => Math.max(a, k.epoch), Math.max(m?.epoch ?? 0, stored));
  return {
    topic,
    partition,
    partitionCount: at.count,
    marker: m?.offset ?? null,
    keys: snap.keys,
    close: snap.close,
    from,
    to,
    timeFrom,
    timeTo: g?.metadata,
    epoch: seen + o.epochMargin,
  };
}

export async function rebuildTopology(o: TopologyRebuildOptions): Promise<TopologyRebuildReport> {
  checkRebuildable(o.topology);
  const exec = new TopologyExecutor(o.topology, {
    redis: o.redis,
    ...(o.tenant === undefined ? {} : { tenant: o.tenant }),
  });
  const app = new KeySpace({ store: o.topology.applicationId, ...(o.tenant ? { tenant: o.tenant } : {}) });
  const stateful = [...exec.plan.subs.values()].filter((s) => s.stateful).map((s) => s.topic);
  // each stateful sub-topology's fence space, by the prefix of its fence hashes (`rf:[t=..:]{<app>[@<topic>]:`)
  const prefixes = stateful.map((t) => exec.storeFor(t).keys.space.statePattern().slice(0, -2));
  const found = await check(o, exec, [...exec.plan.subs.keys()]);
  const snapshot = await readSnapshot(o, prefixes);

  // 3. the keys by the topic of their space and their partition; the plan of every partition
  const byPartition = new Map<string, SnapshotKey[]>();
  for (const k of snapshot.keys.values()) {
    const topic = stateful.find((_t, i) => k.redisKey.startsWith(prefixes[i] as string));
    if (topic === undefined) continue;
    if (k.partition >= (found.counts.get(topic) ?? 0))
      throw failed(
        `a key record is fenced on partition ${k.partition}, which ${topic} does not have now (the partition count must not change between the snapshot and the rebuild)`,
      );
    const list = byPartition.get(tpKey(topic, k.partition)) ?? [];
    if (list.length === 0) byPartition.set(tpKey(topic, k.partition), list);
    list.push(k);
  }
  const plans: TopologyPartitionPlan[] = [];
  for (const topic of stateful) {
    const count = found.counts.get(topic) ?? 0;
    for (let partition = 0; partition < count; partition++) {
      const close = [...snapshot.close.values()].filter(
        (c) => c.topic === topic && c.partition === partition,
      );
      const at = { topic, partition, count, epochKey: app.epoch(topic, partition) };
      const keys = byPartition.get(tpKey(topic, partition)) ?? [];
      const marker = snapshot.markers.get(tpKey(topic, partition));
      plans.push(await planPartition(o, at, { marker, keys, close }, found));
    }
  }
  const pending = plans.reduce((n, pl) => n + pl.keys.reduce((a, k) => a + pendingAt(k, pl.to), 0), 0);
  const report = (replayed: number[]): TopologyRebuildReport => ({
    snapshotRecords: snapshot.records,
    keys: snapshot.keys.size,
    pending,
    cleared: found.existing.length,
    dryRun: o.dryRun === true,
    partitions: plans.map((pl, i) => ({
      topic: pl.topic,
      partition: pl.partition,
      marker: pl.marker,
      keys: pl.keys.length,
      from: pl.from,
      to: pl.to,
      replayed: replayed[i] ?? 0,
      epoch: pl.epoch,
    })),
  });
  if (o.dryRun) return report([]);

  // 4. clear; until step 6 no layout marker: a windowed topology refuses to start on a half rebuild
  const layout = exec.store.keys.layout();
  const closeIndexes = plans.flatMap((pl) =>
    [...exec.plan.aggregates.values()]
      .filter((a) => a.topic === pl.topic && a.node.emit === 'final' && a.node.window !== null)
      .map((a) => exec.storeFor(pl.topic).keys.closeIndex(pl.topic, pl.partition, a.valueStore)),
  );
  await clearNames(o.redis, [...found.existing, ...closeIndexes, layout]);
  for (const pl of plans)
    await restoreTopologyPartition(
      o.redis,
      app.epoch(pl.topic, pl.partition),
      (c) => exec.storeFor(c.topic).keys.closeIndex(c.topic, c.partition, c.store),
      pl,
    );

  // 5. the replay, silently, each partition ending at the stream time the group committed
  const replayed: number[] = [];
  const settings = {
    executor: exec,
    client: o.client,
    timeoutMs: o.timeoutMs,
    ...(o.onProgress ? { onProgress: o.onProgress } : {}),
  };
  for (const pl of plans) replayed.push(await replayTopologyPartition(settings, pl));

  // 6. the layout marker and a new snapshot mark: the processors start, and snapshot, again
  await o.redis.hset(layout, 'l', STORE_LAYOUT);
  await o.redis.set(app.snapshotMark(exec.plan.topic), randomBytes(12).toString('hex'));
  return report(replayed);
}
