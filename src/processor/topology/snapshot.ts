/**
 * A topology's snapshot pass (the `snapshot` option of TopologyProcessor; docs/operations.md,
 * "Snapshots of a topology"), run by the processor's Snapshotter (src/processor/snapshotter.ts: the
 * timer, the mark, the pacing, the producer). Per owned partition of every topic the topology reads
 * (its inputs and repartition topics) the pass notes, when it begins, the committed offset C (`asOf`),
 * the epoch and the stream time at C (the commit's metadata). Then:
 *
 * 1. the close index of each emit-final store for each owned partition (ZRANGE), in chunks;
 * 2. every fence key of each fence space (SCAN), with the keys beside its fence hash, each fence key's
 *    slot read in one MULTI (snapshot-read.ts). A fence key whose fence is below C of its partition was
 *    written by no record since the pass began (every record since is at or above C), so the SCAN,
 *    which began after, found every key of its slot: its record is produced. Any other is *dirty* (a
 *    window key made during the SCAN may be missing from what it found);
 * 3. the dirty fence keys again: a second SCAN of their names, a second read; one whose fence (partition,
 *    offset) did not move between its two reads had no write from before the second SCAN began to after
 *    its read, so that SCAN found all of its slot: produced. One that moved leaves its partition without
 *    a new marker (its last marker stands, and its older key record with it);
 * 4. once every record is delivered, one marker per owned partition not left so:
 *    (topic, partition, C, epoch, stream time at C).
 */
import type { Cluster, Redis } from 'ioredis';
import type { OutRecord } from '../../kafka/types.js';
import type { Logger } from '../../runtime/logger.js';
import type { KeyStore } from '../../store/index.js';
import type { RunPlan } from '../../topology/run/plan.js';
import type { OwnedPartition } from '../partition-table.js';
import { encodeClose, encodeKey, encodeMarker, type SnapshotKey } from '../snapshot-codec.js';
import { type ResolvedSnapshot, snapshotClient } from '../snapshot-options.js';
import { type PassIO, type SnapshotPass, type SnapshotStats, Snapshotter } from '../snapshotter.js';
import { readSlot, type SpaceToScan, scanSlots } from './snapshot-read.js';
import { encodeStreamTime } from './stream-time.js';
import type { TopologyParts } from './wiring.js';

export interface TopologySnapshotContext {
  readonly options: ResolvedSnapshot;
  readonly redis: Redis | Cluster;
  /** The executor's plan and its key calls per topic (known once the processor started). */
  plan(): RunPlan;
  storeFor(topic: string): KeyStore;
  /** The partitions owned now (not fenced), of every topic the topology reads. */
  partitions(): readonly OwnedPartition[];
  /** The commit metadata (stream time) at `offset`, the partition's committed one; '' none. */
  streamTimeAt(topic: string, partition: number, offset: number): string;
  /** A marker was written: replays of the partition may need its records from `offset` on. */
  marked(topic: string, partition: number, offset: number): void;
  readonly log: Logger;
}

/** Members per close-index record (one record stays well under a broker's message size). */
const CLOSE_CHUNK = 2000;
/**
 * SCAN's COUNT: the names are held for the whole pass anyway (grouped by fence key), so a scan step
 * may be larger than a page of reads; fewer round trips over a large keyspace.
 */
const SCAN_COUNT = 1000;
/** Produce calls whose delivery may be awaited at once. */
const IN_FLIGHT = 4;

interface Owned {
  readonly topic: string;
  readonly partition: number;
  readonly asOf: number;
  readonly epoch: number;
  readonly streamTime: string;
  keys: number;
  dirty: number;
}

const tp = (topic: string, partition: number) => `${topic}\u0000${partition}`;

/** Produces pages of records, at most IN_FLIGHT awaiting delivery. */
class Pages {
  readonly #inFlight: Promise<void>[] = [];
  constructor(readonly io: PassIO) {}

  async push(out: OutRecord[]): Promise<void> {
    if (out.length === 0) return;
    await this.io.checkMark();
    const delivered = this.io.producer.produce(out);
    delivered.catch(() => undefined); // awaited below
    this.#inFlight.push(delivered);
    if (this.#inFlight.length >= IN_FLIGHT) await this.#inFlight.shift();
  }

  async flush(): Promise<void> {
    for (const d of this.#inFlight.splice(0)) await d;
  }
}

/** The fence spaces to scan: the stateful sub-topologies', each with the topic its fences follow. */
function spacesOf(ctx: TopologySnapshotContext): SpaceToScan[] {
  const out: SpaceToScan[] = [];
  for (const sub of ctx.plan().subs.values())
    if (sub.stateful) out.push({ keys: ctx.storeFor(sub.topic).keys.space, topic: sub.topic });
  return out;
}

function ownedNow(ctx: TopologySnapshotContext): Map<string, Owned> {
  const owned = new Map<string, Owned>();
  for (const e of ctx.partitions()) {
    const asOf = Math.max(0, e.committed);
    owned.set(tp(e.topic, e.partition), {
      topic: e.topic,
      partition: e.partition,
      asOf,
      epoch: e.epoch,
      streamTime: e.committed < 0 ? '' : ctx.streamTimeAt(e.topic, e.partition, e.committed),
      keys: 0,
      dirty: 0,
    });
  }
  return owned;
}

/** Step 1: each emit-final store's close index of each owned partition of its topic. */
async function closeIndexes(ctx: TopologySnapshotContext, owned: Map<string, Owned>, pages: Pages) {
  for (const agg of ctx.plan().aggregates.values()) {
    if (agg.node.emit !== 'final' || agg.node.window === null) continue;
    const keys = ctx.storeFor(agg.topic).keys;
    for (const o of owned.values()) {
      if (o.topic !== agg.topic) continue;
      const flat = await ctx.redis.zrangeBuffer(
        keys.closeIndex(o.topic, o.partition, agg.valueStore),
        '0',
        '-1',
        'WITHSCORES',
      );
      const members: Array<[number, Buffer]> = [];
      for (let i = 0; i + 1 < flat.length; i += 2)
        members.push([Number((flat[i + 1] as Buffer).toString()), flat[i] as Buffer]);
      const out: OutRecord[] = [];
      for (let chunk = 0; chunk * CLOSE_CHUNK < members.length; chunk++)
        out.push({
          topic: ctx.options.topic,
          ...encodeClose({
            topic: o.topic,
            partition: o.partition,
            store: agg.valueStore,
            chunk,
            members: members.slice(chunk * CLOSE_CHUNK, (chunk + 1) * CLOSE_CHUNK),
          }),
        });
      await pages.push(out);
    }
  }
}

/** A key read: produced, dirty (its fence at C or above), or not ours (null). */
type Read = { readonly key: SnapshotKey; readonly owner: Owned } | null;

/**
 * Steps 2 and 3 for one space: reads the slots in pages; `keep` says whether a read is produced.
 * Returns the fence hashes it did not keep, with the fence each had.
 */
async function readSpace(
  ctx: TopologySnapshotContext,
  io: PassIO,
  pages: Pages,
  space: SpaceToScan,
  owned: Map<string, Owned>,
  names: Map<string, string[]>,
  keep: (r: NonNullable<Read>) => boolean,
  pace: { read: number; started: number },
): Promise<Map<string, string>> {
  const left = new Map<string, string>();
  const all = [...names];
  const size = ctx.options.pageSize;
  for (let i = 0; i < all.length; i += size) {
    if (io.closed()) return left;
    const page = all.slice(i, i + size);
    await io.pace(pace.read, pace.started);
    pace.read += page.length;
    const reads: Read[] = await Promise.all(
      page.map(async ([fence, suffixes]) => {
        // the fence's partition first (one HGET), so other owners' slots are not read whole
        const owner = owned.get(tp(space.topic, Number((await ctx.redis.hget(fence, 'p')) ?? Number.NaN)));
        if (owner === undefined) return null;
        const key = await readSlot(ctx.redis, fence, suffixes, owner.asOf);
        const now = key === null ? undefined : owned.get(tp(space.topic, key.partition));
        return key === null || now === undefined ? null : { key: { ...key, asOf: now.asOf }, owner: now };
      }),
    );
    const out: OutRecord[] = [];
    for (const r of reads) {
      if (r === null) continue;
      if (!keep(r)) {
        left.set(r.key.redisKey, `${r.key.partition}:${r.key.offset}`);
        continue;
      }
      r.owner.keys++;
      out.push({ topic: ctx.options.topic, ...encodeKey(r.key) });
    }
    await pages.push(out);
    io.produced(out.length);
  }
  return left;
}

/** The pass body the Snapshotter runs for a topology. */
export function topologyPass(ctx: TopologySnapshotContext): SnapshotPass {
  return async (io) => {
    const owned = ownedNow(ctx);
    if (owned.size === 0) return false;
    const at = Date.now();
    const pace = { read: 0, started: performance.now() };
    const pages = new Pages(io);
    await io.checkMark();
    await closeIndexes(ctx, owned, pages);
    for (const space of spacesOf(ctx)) {
      const closed = () => io.closed();
      const first = await scanSlots(ctx.redis, space.keys, SCAN_COUNT, closed);
      const dirty = await readSpace(
        ctx,
        io,
        pages,
        space,
        owned,
        first,
        (r) => r.key.offset < r.owner.asOf,
        pace,
      );
      if (dirty.size === 0) continue;
      const second = await scanSlots(ctx.redis, space.keys, SCAN_COUNT, closed, new Set(dirty.keys()));
      const resolved = new Set<string>();
      await readSpace(
        ctx,
        io,
        pages,
        space,
        owned,
        second,
        (r) => {
          const same = dirty.get(r.key.redisKey) === `${r.key.partition}:${r.key.offset}`;
          if (same) resolved.add(r.key.redisKey);
          return same;
        },
        pace,
      );
      // written between its two reads (or gone, or moved): its partition gets no new marker
      for (const [name, was] of dirty) {
        if (resolved.has(name)) continue;
        const o = owned.get(tp(space.topic, Number(was.split(':')[0])));
        if (o !== undefined) o.dirty++;
      }
    }
    if (io.closed()) return false;
    await pages.flush();
    await io.checkMark();
    const marked = [...owned.values()].filter((o) => o.dirty === 0);
    await io.producer.produce(
      marked.map((o) => ({
        topic: ctx.options.topic,
        ...encodeMarker({
          topic: o.topic,
          partition: o.partition,
          offset: o.asOf,
          epoch: o.epoch,
          keys: o.keys,
          at,
          streamTime: o.streamTime,
        }),
      })),
    );
    for (const o of marked) ctx.marked(o.topic, o.partition, o.asOf);
    const unmarked = owned.size - marked.length;
    if (unmarked > 0)
      ctx.log.warn(
        {
          partitions: [...owned.values()].filter((o) => o.dirty > 0).map((o) => `${o.topic}/${o.partition}`),
        },
        'snapshot pass left partitions without a new marker: keys written through both reads (their last marker stands)',
      );
    return { unmarked };
  };
}

/** What the snapshots take of the topology processor's parts (wiring.ts). */
export type SnapshotParts = Pick<
  TopologyParts,
  'o' | 'run' | 'instanceId' | 'table' | 'log' | 'timesOf' | 'redisOutage'
>;

/**
 * A topology processor's snapshots (the `snapshot` option; without it, or with a KafkaPort, every
 * method does nothing): the Snapshotter, made at start once the plan is known, and per partition the
 * offset of the last marker this instance wrote, below which alone the repartition purge deletes.
 */
export class TopologySnapshots {
  readonly #p: SnapshotParts;
  readonly #marked = new Map<string, number>();
  #snapshotter: Snapshotter | undefined;

  constructor(p: SnapshotParts) {
    this.#p = p;
  }

  /** The purge's floor (PurgeOptions.floor) with snapshots on, else undefined (purged to the commits). */
  get floor(): ((topic: string, partition: number) => number | undefined) | undefined {
    if (!this.#p.o.snapshot) return undefined;
    // no marker of this instance yet: nothing may be purged
    return (topic, partition) => this.#marked.get(tp(topic, partition));
  }

  stats(): SnapshotStats | undefined {
    return this.#snapshotter?.stats();
  }

  /** After a commit: a pass starts when one is due. */
  kick(): void {
    this.#snapshotter?.kick();
  }

  async stop(): Promise<void> {
    await this.#snapshotter?.stop();
  }

  /** Makes and starts the Snapshotter (the topic created when missing, the mark read or set). */
  async start(inputPartitions: number): Promise<void> {
    const p = this.#p;
    const { o, log } = p;
    if (!o.snapshot || !('settings' in o.kafka)) return;
    const executor = p.run.executor;
    const partitions = () => p.table.active();
    const pass = topologyPass({
      options: o.snapshot,
      redis: o.redis,
      plan: () => executor.plan,
      storeFor: (topic) => executor.storeFor(topic),
      partitions,
      streamTimeAt: (topic, partition, at) => encodeStreamTime(p.timesOf(topic).at(partition, at)),
      marked: (topic, partition, offset) => this.#marked.set(tp(topic, partition), offset),
      log,
    });
    this.#snapshotter = new Snapshotter({
      options: o.snapshot,
      redis: o.redis,
      keys: executor.store.keys.space, // the mark lives in the application's own space
      input: executor.plan.topic,
      client: snapshotClient(o.kafka.settings, `redfence-${p.instanceId}`),
      replicationFactor: o.replicationFactor,
      partitions,
      outage: p.redisOutage,
      log,
      pass,
    });
    await this.#snapshotter.start(inputPartitions);
  }
}
