/**
 * Shared pieces of the topology runtime tests: the topologies run on Redis, generated partitioned
 * inputs cut into batches, the driver that runs them through a TopologyExecutor (replaying some
 * batches as a new owner would), and the comparison with the reference model per output topic and key.
 */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { Cluster, Redis } from 'ioredis';
import { RedfenceError } from '../../src/errors/index.js';
import { partitionFor } from '../../src/partitioner/index.js';
import { type Effect, KeyStore, type StoreRedis } from '../../src/store/index.js';
import {
  type BuiltTopology,
  SessionWindows,
  serdes,
  TimeWindows,
  topology,
} from '../../src/topology/index.js';
import type { ModelDrop, ModelHeaders, ModelInput, ModelResult } from '../../src/topology/model.js';
import { TopologyExecutor } from '../../src/topology/run/executor.js';
import type { TopologyDeadLetter, TopologyOutput } from '../../src/topology/run/types.js';
import { isTick, TICK_HEADER } from '../../src/topology/tick.js';
import { timeWindowsFor } from '../../src/topology/windows.js';

const s = serdes.string();
const MIN = 60_000;
type Order = { amount: number };

/** The fraud topology of docs/streams.md (threshold and alert count low enough to alert often). */
export function fraud(app: string, emit: 'update' | 'final' = 'update'): BuiltTopology {
  const t = topology({ applicationId: app });
  t.stream<string, Order>('in', { key: s })
    .filter((_k, o) => o !== null && o.amount > 3)
    .groupByKey()
    .windowedBy(TimeWindows.ofSizeWithNoGrace(5 * MIN))
    .emit(emit)
    .count({ name: 'big-orders' })
    .toStream()
    .filter((_wk, n) => n > 2)
    .map((wk, n) => [wk.key, { start: wk.start, end: wk.end, count: n }] as const)
    .to('fraud-alerts', { key: s });
  return t.build();
}

/** A plain unwindowed count. */
export function plainCount(app: string): BuiltTopology {
  const t = topology({ applicationId: app });
  t.stream<string, Order>('in', { key: s })
    .groupByKey()
    .count({ name: 'counts' })
    .toStream()
    .to('counts', { key: s });
  return t.build();
}

/**
 * A hopping-window count with grace; big amounts go straight to a sink, some records count twice, and
 * amount 6 throws in the flatMapValues after its first record (processing-error, all or nothing).
 */
export const HOP = { sizeMs: 10, advanceMs: 5, graceMs: 3 };
export function hopping(app: string, emit: 'update' | 'final' = 'update'): BuiltTopology {
  const t = topology({ applicationId: app });
  const by = t
    .stream<string, Order>('in', { key: s })
    .split({ name: 'size' })
    .branch((_k, o) => o !== null && o.amount > 8, 'big')
    .defaultBranch('rest');
  by['size-big']?.mapValues((o) => ({ big: o.amount })).to('big', { key: s });
  by['size-rest']
    ?.flatMapValues(function* (o) {
      yield o;
      if (o === null || o.amount % 3 !== 0) return;
      // amount 6 throws once its first record reached the count: a dead letter, and that count undone
      if (o.amount === 6) throw new RangeError('six is refused');
      yield o;
    })
    .groupByKey()
    .windowedBy(TimeWindows.ofSizeAndGrace(HOP.sizeMs, HOP.graceMs).advanceBy(HOP.advanceMs))
    .emit(emit)
    .count({ name: 'hop-counts' })
    .toStream()
    .map((wk, n) => [wk.key, { start: wk.start, end: wk.end, n }] as const)
    .to('hop', { key: s });
  return t.build();
}

/**
 * A session count (gap 6, grace 4): null values count (session windows keep them), amount 7 is filtered
 * out; `onLate` as given (late sessions are dead letters or drops).
 */
export function sessionCount(
  app: string,
  onLate: 'dead-letter' | 'drop' = 'dead-letter',
  emit: 'update' | 'final' = 'update',
): BuiltTopology {
  const t = topology({ applicationId: app });
  t.stream<string, Order | null>('in', { key: s })
    .filter((_k, o) => o?.amount !== 7)
    .groupByKey()
    .windowedBy(SessionWindows.ofInactivityGapAndGrace(6, 4))
    .onLate(onLate)
    .emit(emit)
    .count({ name: 'sessions' })
    .toStream()
    .map((wk, n) => [wk.key, { start: wk.start, end: wk.end, n }] as const)
    .to('sessions', { key: s });
  return t.build();
}

/** What a session aggregate keeps: the record count and the amounts in order (merged: `a`'s then `b`'s). */
export type Amounts = { n: number; amounts: number[] };

/**
 * A session aggregate (gap 6, grace 4) of the amounts in order: the merger's order shows in the lists;
 * a null value deletes the merged session (the aggregator returns null).
 */
export function sessionAggregate(
  app: string,
  onLate: 'dead-letter' | 'drop' = 'dead-letter',
  emit: 'update' | 'final' = 'update',
): BuiltTopology {
  const t = topology({ applicationId: app });
  t.stream<string, Order | null>('in', { key: s })
    .groupByKey()
    .windowedBy(SessionWindows.ofInactivityGapAndGrace(6, 4))
    .onLate(onLate)
    .emit(emit)
    .aggregate(
      (): Amounts | null => ({ n: 0, amounts: [] }),
      (_k, o, a) => (o === null || a === null ? null : { n: a.n + 1, amounts: [...a.amounts, o.amount] }),
      (_k, a, b) =>
        a === null || b === null ? null : { n: a.n + b.n, amounts: [...a.amounts, ...b.amounts] },
      { name: 'session-amounts' },
    )
    .toStream()
    .map((wk, a) => [wk.key, { start: wk.start, end: wk.end, a }] as const)
    .to('session-amounts', { key: s });
  return t.build();
}

/** A session reduce (gap 5, no grace) of the amounts as numbers (the stream's serde): their sum. */
export function sessionReduce(app: string): BuiltTopology {
  const t = topology({ applicationId: app });
  t.stream<string, Order | null>('in', { key: s })
    .filter((_k, o) => o !== null)
    .mapValues((o) => (o as Order).amount)
    .groupByKey()
    .windowedBy(SessionWindows.ofInactivityGapWithNoGrace(5))
    .reduce((a, b) => a + b, { name: 'session-sums' })
    .toStream()
    .map((wk, sum) => [wk.key, { start: wk.start, end: wk.end, sum }] as const)
    .to('session-sums', { key: s });
  return t.build();
}

/** An unwindowed reduce (totals) and a count of the same grouped stream: one key call per key, with `expect`. */
export function reduceAndCount(app: string): BuiltTopology {
  const t = topology({ applicationId: app });
  const g = t.stream<string, Order>('in', { key: s }).groupByKey();
  g.reduce((a, b) => ({ amount: a.amount + b.amount }), { name: 'totals' })
    .toStream()
    .to('totals', { key: s });
  g.count({ name: 'n' }).toStream().to('n', { key: s });
  return t.build();
}

/**
 * A hopping-window aggregate (HOP) whose aggregator returns null for a null value (the window's
 * aggregate is deleted: its next record starts from the initializer and its own timestamp).
 */
export function hoppingAggregate(app: string, emit: 'update' | 'final' = 'update'): BuiltTopology {
  const t = topology({ applicationId: app });
  t.stream<string, Order | null>('in', { key: s })
    .groupByKey()
    .windowedBy(TimeWindows.ofSizeAndGrace(HOP.sizeMs, HOP.graceMs).advanceBy(HOP.advanceMs))
    .emit(emit)
    .aggregate(
      (): { n: number; sum: number } | null => ({ n: 0, sum: 0 }),
      (_k, o, a) => (o === null || a === null ? null : { n: a.n + 1, sum: a.sum + o.amount }),
      { name: 'sums' },
    )
    .toStream()
    .map((wk, a) => [wk.key, { start: wk.start, end: wk.end, a }] as const)
    .to('sums', { key: s });
  return t.build();
}

/** Five-minute tumbling windows of the largest amount (a reduce of numbers, the stream's serde). */
export const FIVE = { sizeMs: 5 * MIN, advanceMs: 5 * MIN, graceMs: 0 };
export function tumblingReduce(app: string): BuiltTopology {
  const t = topology({ applicationId: app });
  t.stream<string, Order | null>('in', { key: s })
    .mapValues((o) => (o === null ? null : o.amount))
    .groupByKey()
    .windowedBy(TimeWindows.ofSizeWithNoGrace(FIVE.sizeMs))
    .reduce((a, b) => Math.max(a ?? -1, b ?? -1), { name: 'largest' })
    .toStream()
    .filter((_wk, v) => v === null || v > 2)
    .map((wk, v) => [wk.key, { start: wk.start, v }] as const)
    .to('largest', { key: s });
  return t.build();
}

/**
 * Another writer of the application's key `k` (a record of it from partition 7): `write(effects, offset)`
 * makes one record's effects, as a record of another partition would.
 */
export function otherWriter(redis: StoreRedis | Redis | Cluster, app: string) {
  const store = new KeyStore({ redis, app });
  return async (effects: Effect[], offset: number): Promise<void> => {
    await store.call({
      partition: 7,
      epoch: 1,
      committedOffset: -1,
      key: Buffer.from('k'),
      records: [{ offset, emit: 0, effects }],
    });
  };
}

/** A redis that runs `after` once a state read (readKey: its first ARGV is `r1`) has answered, while `times` lasts. */
export function interfering(redis: StoreRedis, times: number, afterRead: () => Promise<void>) {
  let left = times;
  const hook = async (reply: unknown, numKeys: number, args: unknown[]) => {
    if (left > 0 && String(args[numKeys]) === 'r1') {
      left--;
      await afterRead();
    }
    return reply;
  };
  return {
    reads: () => times - left,
    redis: {
      evalshaBuffer: async (sha: string, n: number, ...args: (string | Buffer | number)[]) =>
        hook(await redis.evalshaBuffer(sha, n, ...args), n, args),
      evalBuffer: async (script: string, n: number, ...args: (string | Buffer | number)[]) =>
        hook(await redis.evalBuffer(script, n, ...args), n, args),
    } satisfies StoreRedis,
  };
}

export interface Generated {
  readonly partitions: number;
  readonly input: ModelInput[];
  /** Per partition, the batch sizes (the last batch takes the rest). */
  readonly cuts: number[][];
  /** Per batch (in run order), whether a new owner replays it before its commit. */
  readonly replays: boolean[];
}

/**
 * Inputs: a few keys (some null), each on its murmur2 partition; timestamps in multiples of `unit` (so
 * window bounds are hit exactly), rising by up to `step` units (now and then by 4 steps more), some
 * going back up to `jitter` units (out of order, some late); offset holes. `misplace`: about one keyed
 * record in 40 is on the partition after its key's (the partition check's dead letters). `ticks`: about
 * one record in 12 is a tick (src/topology/tick.ts) on any partition, its timestamp up to `jitter` units
 * ahead of the records' (as a wall clock would be), sometimes behind.
 */
export function generated(
  step: number,
  jitter: number,
  unit: number,
  misplace = false,
  ticks = false,
): fc.Arbitrary<Generated> {
  const rec = fc.record({
    key: fc.constantFrom('a', 'b', 'c', 'd', 'e', null),
    dt: fc.integer({ min: 0, max: step }),
    back: fc.integer({ min: 0, max: jitter }),
    amount: fc.integer({ min: 0, max: 12 }),
    nullValue: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
    hole: fc.constantFrom(0, 0, 0, 0, 2),
    spare: fc.nat(7),
    jump: fc.integer({ min: 0, max: 14 }).map((n) => (n === 0 ? 4 : 0)),
    tick: fc.integer({ min: 0, max: 11 }).map((n) => ticks && n === 0),
  });
  return fc
    .record({
      partitions: fc.integer({ min: 1, max: 3 }),
      recs: fc.array(rec, { minLength: 1, maxLength: 60, size: 'max' }),
      cuts: fc.array(fc.array(fc.integer({ min: 1, max: 9 }), { maxLength: 8 }), {
        minLength: 3,
        maxLength: 3,
      }),
      replays: fc.array(fc.boolean(), { minLength: 40, maxLength: 40 }),
    })
    .map(({ partitions, recs, cuts, replays }) => {
      const next = new Map<number, number>();
      let t = 0;
      const input = recs.map((r, i) => {
        t += r.dt + r.jump * step; // now and then a jump past several windows
        if (r.tick) {
          const partition = r.spare % partitions;
          const offset = next.get(partition) ?? r.spare;
          next.set(partition, offset + 1 + r.hole);
          const timestamp = Math.max(0, t + r.back - 2) * unit;
          const headers = { [TICK_HEADER]: `i${i}` };
          return { topic: 'in', partition, offset, key: null, value: Buffer.alloc(0), timestamp, headers };
        }
        const key = r.key === null ? null : Buffer.from(r.key);
        const wrong = misplace && key !== null && partitions > 1 && r.hole === 2 && r.spare === 7;
        const partition =
          key === null
            ? r.spare % partitions
            : (partitionFor(key, partitions) + (wrong ? 1 : 0)) % partitions;
        const offset = next.get(partition) ?? r.spare;
        next.set(partition, offset + 1 + r.hole);
        const value = r.nullValue ? null : Buffer.from(JSON.stringify({ amount: r.amount }));
        const rec = { topic: 'in', partition, offset, key, value, timestamp: Math.max(0, t - r.back) * unit };
        // every other record has headers: its outputs carry them (a session window's updates none)
        return r.spare % 2 === 0
          ? rec
          : { ...rec, headers: { seq: String(i), tag: ['k', Buffer.from([i % 256])] } };
      });
      return { partitions, input, cuts, replays };
    });
}

/** One partition batch of the run. */
interface Batch {
  readonly partition: number;
  readonly records: ModelInput[];
}

/** The batches, one partition's after another's in turn. */
function batchesOf(g: Generated): Batch[] {
  const per: Batch[][] = [];
  for (let p = 0; p < g.partitions; p++) {
    const recs = g.input.filter((r) => r.partition === p);
    const out: Batch[] = [];
    let from = 0;
    for (const size of [...(g.cuts[p] ?? []), recs.length]) {
      if (from >= recs.length) break;
      out.push({ partition: p, records: recs.slice(from, from + size) });
      from += size;
    }
    per.push(out);
  }
  const all: Batch[] = [];
  for (let i = 0; per.some((b) => b[i] !== undefined); i++)
    for (const b of per) {
      const x = b[i];
      if (x !== undefined) all.push(x);
    }
  return all;
}

export interface RunTotals {
  outputs: TopologyOutput[];
  deadLetters: TopologyDeadLetter[];
  dropped: ModelDrop[];
  replays: number;
  reemits: number;
  /** Emit-final index entries dropped behind the commits. */
  pruned: number;
  /** Outputs a tick caused (final results of the windows it closed), first runs only. */
  tickOutputs?: number;
  /** Dead letters of a replay whose aggregation threw when the batch first ran (not kept). */
  threwBefore?: number;
  /** The executor that ran the batches (its stream times, its store). */
  exec: TopologyExecutor;
}

/**
 * A replay's dead letters equal the first run's; a record whose aggregation threw is a dead letter again,
 * and when a later record of its key applied, the key's fence says it was passed unapplied, and what it
 * threw is not kept (compared without the error). Returns how many were such.
 */
export function assertReplayDeadLetters(
  again: readonly TopologyDeadLetter[],
  first: readonly TopologyDeadLetter[],
): number {
  const replayed = (d: TopologyDeadLetter | undefined) =>
    d !== undefined &&
    d.reason === 'processing-error' &&
    RedfenceError.is(d.error, 'RF_TOPOLOGY_NODE_THREW') &&
    (d.error.details as { where?: string }).where === 'replayed';
  assert.deepEqual(
    again.map((d) => (replayed(d) ? { ...d, error: null } : d)),
    first.map((d, i) => (replayed(again[i]) ? { ...d, error: null } : d)),
  );
  return again.filter(replayed).length;
}

/** Everything Redis holds for a batch's keys: fence hashes (without the writer epoch) and window keys. */
async function snapshot(
  redis: Redis | Cluster,
  exec: TopologyExecutor,
  b: Batch,
  window: typeof HOP | null,
): Promise<unknown[]> {
  const out: unknown[] = [];
  const aggs = [...exec.plan.aggregates.values()];
  for (const a of aggs)
    if (a.node.emit === 'final' && a.node.window !== null) {
      const index = exec.store.keys.closeIndex('in', b.partition, a.valueStore);
      out.push(index, await redis.zrangebyscore(index, '-inf', '+inf', 'WITHSCORES'));
    }
  const stores = aggs.flatMap((a) => [a.valueStore, a.timeStore]);
  for (const r of b.records) {
    if (r.key === null) continue;
    const fence = exec.store.keys.fence(r.key);
    const h = (await redis.hgetallBuffer(fence)) as Record<string, Buffer>;
    delete h.e; // a new owner's replay raises the key's writer epoch, nothing else
    out.push(fence, h);
    for (const a of aggs)
      if (a.node.window?.kind === 'session') {
        const name = exec.store.keys.session(fence, a.valueStore);
        out.push(name, await redis.hgetallBuffer(name), await redis.pexpiretime(name));
      } else if (a.node.window?.kind === 'sliding')
        for (const id of [a.valueStore, a.timeStore]) {
          const name = exec.store.keys.windowHash(fence, id);
          out.push(name, await redis.hgetallBuffer(name), await redis.pexpiretime(name));
        }
    if (window === null) continue;
    for (const start of timeWindowsFor(window, r.timestamp))
      for (const id of stores) {
        const name = exec.store.keys.window(fence, id, start);
        out.push(name, await redis.hgetallBuffer(name), await redis.pexpiretime(name));
      }
  }
  return out;
}

/**
 * Runs the generated batches; a batch marked for replay is run again by a new owner (epoch + 1) from the
 * stream time it started with, before its commit: the same outputs, dead letters and drops, REEMIT
 * only, and Redis unchanged. `ownerCache`: the executor keeps owner-local state (a replay's new owner
 * starts without it, as setStreamTime drops it).
 */
export async function runOnRedis(
  redis: Redis | Cluster,
  built: BuiltTopology,
  g: Generated,
  window: typeof HOP | null,
  ownerCache?: { maxBytes: number },
): Promise<RunTotals> {
  const exec = new TopologyExecutor(built, { redis, ...(ownerCache === undefined ? {} : { ownerCache }) });
  const totals: RunTotals = {
    outputs: [],
    deadLetters: [],
    dropped: [],
    replays: 0,
    reemits: 0,
    pruned: 0,
    tickOutputs: 0,
    threwBefore: 0,
    exec,
  };
  const epochs = new Map<number, number>();
  let i = 0;
  for (const b of batchesOf(g)) {
    const epoch = epochs.get(b.partition) ?? 1;
    const committedOffset = b.records[0]?.offset ?? -1;
    const batch = {
      topic: 'in',
      partition: b.partition,
      epoch,
      committedOffset,
      records: b.records,
      partitionCount: g.partitions,
    };
    // everything before the batch is committed: the emit-final index drops what no replay can need
    totals.pruned += await exec.committed('in', b.partition, committedOffset);
    const before = exec.streamTime(b.partition);
    const first = await exec.runBatch(batch);
    const tickAt = new Set(b.records.filter(isTick).map((r) => r.offset));
    totals.tickOutputs = (totals.tickOutputs ?? 0) + first.outputs.filter((o) => tickAt.has(o.offset)).length;
    totals.outputs.push(...first.outputs);
    totals.deadLetters.push(...first.deadLetters);
    totals.dropped.push(...first.dropped);
    if (g.replays[i++ % g.replays.length] !== true) continue;
    const stored = await snapshot(redis, exec, b, window);
    exec.setStreamTime(b.partition, before); // as a new owner reads it from the commit's metadata
    epochs.set(b.partition, epoch + 1);
    const again = await exec.runBatch({ ...batch, epoch: epoch + 1 });
    assert.deepEqual(again.outputs, first.outputs, 'a replay re-emits the same outputs');
    totals.threwBefore =
      (totals.threwBefore ?? 0) + assertReplayDeadLetters(again.deadLetters, first.deadLetters);
    assert.deepEqual(again.dropped, first.dropped);
    assert.deepEqual(again.streamTime, first.streamTime);
    assert.deepEqual(again.nodes, first.nodes, 'a replay walks the same records through each node');
    assert.equal(again.verdicts.APPLY + again.verdicts.REBASE, 0, 'a replay applies nothing');
    assert.equal(again.verdicts.REEMIT, first.verdicts.APPLY + first.verdicts.REBASE + first.verdicts.REJECT);
    assert.deepEqual(await snapshot(redis, exec, b, window), stored, 'a replay changes no state');
    totals.replays++;
    totals.reemits += again.verdicts.REEMIT;
  }
  return totals;
}

/**
 * Outputs as `topic key -> [value, timestamp]...` in order (hex bytes). A key lives on one partition, so
 * its order is its partition's; records without a key come from every partition: compared as a set.
 */
function perKey(
  outputs: readonly {
    topic: string;
    key: Buffer | null;
    value: Buffer | null;
    timestamp: number;
    headers?: ModelHeaders;
  }[],
) {
  const m = new Map<string, string[]>();
  const text = (v: Buffer | string) => (typeof v === 'string' ? `s${v}` : v.toString('hex'));
  for (const o of outputs) {
    const k = `${o.topic} ${o.key?.toString('hex') ?? '-'}`;
    const h = Object.entries(o.headers ?? {}).map(
      ([n, v]) => `${n}=${Array.isArray(v) ? v.map(text) : text(v as Buffer | string)}`,
    );
    m.set(k, [...(m.get(k) ?? []), `${o.value?.toString('hex') ?? '-'} @${o.timestamp} ${h.join(';')}`]);
  }
  for (const [k, list] of m) if (k.endsWith(' -')) list.sort();
  return m;
}

/** Per partition, in order: what happened to which offset. */
function perPartition(
  items: readonly { source: ModelInput; node: string; reason: string }[],
  extra: (x: never) => unknown,
) {
  const m = new Map<number, unknown[]>();
  for (const x of items)
    m.set(x.source.partition, [
      ...(m.get(x.source.partition) ?? []),
      [x.source.offset, x.node, x.reason, extra(x as never)],
    ]);
  return m;
}

/** The executor's outputs equal the model's per output topic and key, in order; dead letters and drops per partition. */
export function assertEqualToModel(model: ModelResult, got: RunTotals): void {
  assert.deepEqual(perKey(got.outputs), perKey(model.outputs), 'outputs per topic and key');
  // a late record's windows; a record whose walk threw: what it threw (downstream: its state applied);
  // a misplaced one: where its key hashes to
  const detail = (x: {
    windows?: unknown;
    error?: unknown;
    stateApplied?: true;
    downstreamOf?: string;
    expected?: number;
    partitions?: number;
  }) =>
    x.stateApplied === true
      ? [x.error, x.downstreamOf]
      : x.expected !== undefined
        ? [x.expected, x.partitions]
        : (x.windows ?? x.error ?? null);
  const byOffset = <T extends { source: ModelInput }>(xs: readonly T[]) =>
    [...xs].sort((a, b) => a.source.partition - b.source.partition || a.source.offset - b.source.offset);
  assert.deepEqual(
    perPartition(byOffset(got.deadLetters), detail),
    perPartition(byOffset([...model.deadLetters, ...model.failed, ...model.misplaced]), detail),
    'dead letters',
  );
  assert.deepEqual(
    perPartition(got.dropped, () => null),
    perPartition(model.dropped, () => null),
    'drops',
  );
}
