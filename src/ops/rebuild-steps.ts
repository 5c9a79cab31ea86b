/**
 * The Redis side of `redfence rebuild` (src/ops/rebuild.ts, which orders the steps and holds the plan;
 * docs/operations.md, "Snapshot and rebuild"): finding the store's keys; the restore (step 4: delete
 * first with `force`, then per partition the epoch key, the keys with their fences and pending entries
 * in pipelined batches of one slot each on a cluster, the pending index); the replay (step 5: each
 * partition's input from R up to G through the processor's own plan and apply stages, silently, then
 * the sweep of the pending entries below G).
 */
import { Cluster, type Redis } from 'ioredis';
import type { ProcessorDefinition } from '../definition/definition.js';
import { RedfenceError } from '../errors/index.js';
import { Fence, type FencingMode } from '../fence/index.js';
import type { ClientSettings } from '../kafka/client-config.js';
import type { InRecord } from '../kafka/types.js';
import { type KeySpace, keySlot } from '../keys/index.js';
import { applyAll } from '../processor/apply.js';
import { jsonDecode, plan } from '../processor/plan.js';
import type { SnapshotKey } from '../processor/snapshot-codec.js';
import { userCaller } from '../processor/user-call.js';
import type { PartitionRange } from './reconcile.js';
import { readLog } from './reconcile-sources.js';

/** One partition's part of a rebuild, decided before anything is written. */
export interface PartitionPlan {
  readonly partition: number;
  /** The marker's offset, or null when the partition has none. */
  readonly marker: number | null;
  /** The latest key record of each of the partition's state keys. */
  readonly keys: SnapshotKey[];
  /** The replay start R and end G (the group's committed offset). */
  readonly from: number;
  readonly to: number;
  /** The new epoch: the highest seen plus the margin. */
  readonly epoch: number;
}

/** What the replay needs of the rebuild's options. */
export interface ReplaySettings {
  readonly definition: ProcessorDefinition<unknown, unknown>;
  readonly redis: Redis | Cluster;
  readonly keys: KeySpace;
  readonly fencing: FencingMode;
  readonly client: Omit<ClientSettings, 'groupId'>;
  readonly group: string;
  readonly timeoutMs: number;
  readonly onProgress?: (what: string, partition: number, at: number, range: PartitionRange) => void;
}

const REPLAY_BATCH = 500;
const WRITE_BATCH = 500;

export const failed = (m: string) => new RedfenceError('RF_INVALID_STATE', m);

function masters(redis: Redis | Cluster): Redis[] {
  return redis instanceof Cluster ? redis.nodes('master') : [redis];
}

/** The store's state keys (all, or the first `limit`). */
export async function storeKeys(redis: Redis | Cluster, keys: KeySpace, limit = Number.POSITIVE_INFINITY) {
  const found: string[] = [];
  for (const node of masters(redis)) {
    let cursor = '0';
    do {
      const [next, batch] = await node.scan(cursor, 'MATCH', keys.statePattern(), 'COUNT', 1000);
      cursor = next;
      found.push(...batch);
      if (found.length >= limit) return found;
    } while (cursor !== '0');
  }
  return found;
}

/** Runs `write(pipeline, key)` for every key, in batches of one slot on a cluster. */
export async function pipelined<K extends { redisKey: string }>(
  redis: Redis | Cluster,
  items: readonly K[],
  write: (p: ReturnType<Redis['pipeline']>, item: K) => void,
): Promise<void> {
  const groups = new Map<number, K[]>();
  const cluster = redis instanceof Cluster;
  for (const it of items) {
    const g = cluster ? keySlot(it.redisKey) : 0;
    const list = groups.get(g) ?? [];
    if (list.length === 0) groups.set(g, list);
    list.push(it);
  }
  const batches: K[][] = [];
  for (const list of groups.values())
    for (let i = 0; i < list.length; i += WRITE_BATCH) batches.push(list.slice(i, i + WRITE_BATCH));
  for (let i = 0; i < batches.length; i += 8)
    await Promise.all(
      batches.slice(i, i + 8).map(async (batch) => {
        const p = redis.pipeline();
        for (const it of batch) write(p, it);
        const replies = (await p.exec()) ?? [];
        const bad = replies.find(([err]) => err !== null);
        if (bad)
          throw new RedfenceError(
            'RF_REDIS_UNAVAILABLE',
            `restoring keys failed: ${(bad[0] as Error).message}`,
            {
              cause: bad[0],
            },
          );
      }),
    );
}

/** The pending entries of a key that are restored: those at or above G (below it they were committed). */
export function pendingFrom(k: SnapshotKey, to: number): number {
  return k.pending.filter(([off]) => off >= to).length;
}

/** `force`: the store's keys and every partition's pending index are deleted first. */
export async function clearStore(
  redis: Redis | Cluster,
  keys: KeySpace,
  input: string,
  existing: readonly string[],
  partitionCount: number,
): Promise<void> {
  if (existing.length === 0) return;
  await pipelined(
    redis,
    existing.map((redisKey) => ({ redisKey })),
    (p, it) => p.del(it.redisKey),
  );
  for (let partition = 0; partition < partitionCount; partition++)
    await redis.del(keys.pendingIndex(input, partition));
}

/**
 * A restored key's hash fields: its fence under the new `epoch`, its value, its other fields (a
 * topology's stores) and its pending entries at or above the group's committed offset `to` (those
 * below are done: their outputs were committed).
 */
export function restoredFields(
  k: {
    readonly partition: number;
    readonly offset: number;
    readonly value: Buffer | null;
    readonly fields?: ReadonlyArray<readonly [string, Buffer]>;
    readonly pending: ReadonlyArray<readonly [number, Buffer]>;
  },
  epoch: number,
  to: number,
): Array<string | Buffer> {
  const fields: Array<string | Buffer> = [
    'p',
    String(k.partition),
    'o',
    String(k.offset),
    'e',
    String(epoch),
  ];
  if (k.value !== null) fields.push('v', k.value);
  for (const [f, raw] of k.fields ?? []) fields.push(f, raw);
  for (const [off, raw] of k.pending) if (off >= to) fields.push(`#${off}`, raw);
  return fields;
}

/** Step 4 for one partition: its epoch key, its keys under the new epoch, their pending index. Returns the pending entries restored. */
export async function restorePartition(
  redis: Redis | Cluster,
  keys: KeySpace,
  input: string,
  pl: PartitionPlan,
): Promise<number> {
  await redis.set(keys.epoch(input, pl.partition), String(pl.epoch));
  await pipelined(redis, pl.keys, (p, k) => {
    p.del(k.redisKey);
    p.hset(k.redisKey, ...restoredFields(k, pl.epoch, pl.to));
  });
  // entries below the committed offset are done (their outputs committed): not restored
  const withPending = pl.keys.filter((k) => k.pending.some(([off]) => off >= pl.to));
  const count = withPending.reduce((a, k) => a + pendingFrom(k, pl.to), 0);
  const idx = keys.pendingIndex(input, pl.partition);
  for (let i = 0; i < withPending.length; i += WRITE_BATCH) {
    const members: Array<string | number> = [];
    for (const k of withPending.slice(i, i + WRITE_BATCH))
      members.push(Math.max(...k.pending.map(([off]) => off)), k.redisKey);
    await redis.zadd(idx, 'GT', ...members);
  }
  return count;
}

type PlanContext = Parameters<typeof plan>[0];
type ApplyContext = Parameters<typeof applyAll>[0];

/** The fence and the plan and apply contexts the replay runs every partition through. */
interface Replayer {
  readonly fence: Fence;
  readonly planCtx: PlanContext;
  readonly applyCtx: ApplyContext;
}

async function replayer(o: ReplaySettings, partitionCount: number): Promise<Replayer> {
  const { redis, keys, definition } = o;
  const fence = new Fence({ redis, store: keys.store, mode: o.fencing });
  const signal = new AbortController().signal;
  const callUser = userCaller(3, signal);
  // the partition counts the store was written under were lost with it: today's is recorded again.
  // Limit: a replayed record placed under an older count (partitions added since the snapshot) fails
  // the partition check and is not applied (docs/operations.md, "Snapshot and rebuild")
  const partitionCounts = await fence.partitionCounts(definition.input, partitionCount);
  const planCtx = { decode: definition.decode ?? jsonDecode, partitionCount, partitionCounts, callUser };
  const applyCtx = {
    definition,
    fence,
    redisStep: <T>(_what: string, fn: () => Promise<T>) => fn(),
    callUser,
    signal,
  };
  return { fence, planCtx, applyCtx };
}

/** Step 5 for one partition: [from, to) through plan + apply, silently; then the sweep below `to`. Returns the records replayed. */
async function replayPartition(o: ReplaySettings, r: Replayer, pl: PartitionPlan): Promise<number> {
  const input = o.definition.input;
  let replayed = 0;
  if (pl.to <= pl.from) return replayed;
  const target = { topic: input, partition: pl.partition, epoch: pl.epoch, committed: -1 };
  let buffer: InRecord[] = [];
  const flush = async () => {
    if (buffer.length === 0) return;
    const planned = await plan(r.planCtx, input, pl.partition, buffer);
    const applied = await applyAll(r.applyCtx, target, planned);
    if (applied.results === 'FENCED')
      throw failed(`partition ${pl.partition}: a newer epoch fenced the replay (an instance is running?)`);
    replayed += buffer.length;
    buffer = [];
  };
  await readLog({
    client: o.client,
    topic: input,
    group: o.group,
    partitions: [pl.partition],
    from: pl.from,
    timeoutMs: o.timeoutMs,
    between: async () => undefined,
    onRecord: async (rec) => {
      if (rec.offset >= pl.to) return;
      buffer.push({
        topic: input,
        partition: rec.partition,
        offset: String(rec.offset),
        key: rec.key,
        value: rec.value,
        headers: {},
        timestamp: rec.timestamp,
      });
      if (buffer.length >= REPLAY_BATCH) await flush();
    },
    onProgress: (p, at, range) => o.onProgress?.('input', p, at, range),
  });
  await flush();
  for (let more = true; more; ) more = (await r.fence.sweep(input, pl.partition, pl.to)).more;
  return replayed;
}

/** Step 5: every partition in turn. Returns the records replayed per plan, in the plans' order. */
export async function replayAll(
  o: ReplaySettings,
  plans: readonly PartitionPlan[],
  partitionCount: number,
): Promise<number[]> {
  const r = await replayer(o, partitionCount);
  const replayed: number[] = [];
  for (const pl of plans) replayed.push(await replayPartition(o, r, pl));
  return replayed;
}
