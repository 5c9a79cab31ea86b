/**
 * Sliding windows on Redis (src/topology/run/fold-sliding.ts, final-sliding.ts): count, reduce and
 * aggregate over SlidingWindows with emit on update (a count and reduce also on window close), on generated inputs (several keys and partitions, out-of-order
 * records, records at window edges and below the time difference, late ones as dead letters or drops,
 * several sliding arrivals in one key record, a sliding part beside a hopping count's, deleted windows,
 * batches cut at random, replays by a new owner). The executor's outputs equal the reference model's per
 * output topic and key, its dead letters and drops per partition, and the windows Redis keeps for each
 * key (above the store's retention bound) equal the last update the model forwarded for each window.
 * The inputs hold ticks (src/topology/tick.ts): they move the stream time and close windows on both
 * sides alike, bounded by the store time where they stand in the batch.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import type { Cluster, Redis } from 'ioredis';
import { RedfenceError } from '../../src/errors/index.js';
import type { CloseIndexRedis, StoreRedis } from '../../src/store/index.js';
import {
  type BuiltTopology,
  SlidingWindows,
  serdes,
  TimeWindows,
  topology,
} from '../../src/topology/index.js';
import { type ModelResult, runModel } from '../../src/topology/model.js';
import { TopologyExecutor } from '../../src/topology/run/executor.js';
import { TopologyState } from '../../src/topology/state/state.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';
import {
  assertEqualToModel,
  generated,
  HOP,
  interfering,
  otherWriter,
  type RunTotals,
  runOnRedis,
} from './run-helpers.js';
import { SLIDE, slidingCountReduce } from './sliding-topologies.js';

const RUNS = Number(process.env.RF_TOPOLOGY_RUN_RUNS ?? 40);
const appName = () => uniqueName('ts').replace(/-/g, '_');
const s = serdes.string();
type Order = { amount: number };

export { SLIDE, slidingCountReduce };
/**
 * A sliding-window aggregate (difference 5, no grace) of sums whose aggregator returns null at amount 11
 * (the window is deleted: its next record starts from the initializer), beside a hopping count of the
 * same key (a sliding part and fixed parts in one key record).
 */
export function slidingAggregate(app: string): BuiltTopology {
  const t = topology({ applicationId: app });
  const g = t.stream<string, Order>('in', { key: s }).groupByKey();
  g.windowedBy(SlidingWindows.ofTimeDifferenceWithNoGrace(SLIDE.timeDifferenceMs))
    .aggregate(
      (): { n: number; sum: number } | null => ({ n: 0, sum: 0 }),
      (_k, o, a) => (o.amount === 11 || a === null ? null : { n: a.n + 1, sum: a.sum + o.amount }),
      { name: 'slide-sums' },
    )
    .toStream()
    .map((wk, a) => [wk.key, { start: wk.start, end: wk.end, a }] as const)
    .to('slide-sums', { key: s });
  g.windowedBy(TimeWindows.ofSizeAndGrace(HOP.sizeMs, HOP.graceMs).advanceBy(HOP.advanceMs))
    .count({ name: 'hop-n' })
    .toStream()
    .map((wk, n) => [wk.key, { start: wk.start, end: wk.end, n }] as const)
    .to('hop-n', { key: s });
  return t.build();
}

/** Per output topic of a sliding aggregation: its store and how an output value and a stored value compare. */
const STATES: Record<string, { store: string; out: (o: never) => unknown; stored: (v: never) => unknown }> = {
  'slide-counts': { store: 'slide-counts', out: (o: { n: number }) => o.n, stored: (v: number) => v },
  'slide-max': {
    store: 'slide-max',
    out: (o: { max: number | null }) => o.max,
    stored: (v: Order) => v.amount,
  },
  'slide-sums': { store: 'slide-sums', out: (o: { a: unknown }) => o.a, stored: (v: unknown) => v },
};

/**
 * The windows Redis keeps per key and sliding store, above the partition's retention bound (start >=
 * store time - (2 × difference + grace): below it no fetch sees them and the model prunes them), equal
 * the last update the model forwarded per window (value and timestamp; a deleted window: none).
 * Returns how many windows it compared.
 */
async function assertStateEqual(
  redis: Redis | Cluster,
  built: BuiltTopology,
  input: readonly { key: Buffer | null; partition: number }[],
  model: ModelResult,
  got: RunTotals,
): Promise<number> {
  let compared = 0;
  const exec = got.exec;
  for (const [topic, how] of Object.entries(STATES)) {
    const agg = [...exec.plan.aggregates.values()].find((a) => a.node.store === how.store);
    if (agg === undefined) continue;
    const w = agg.node.window as { timeDifferenceMs: number; graceMs: number };
    const retention = 2 * w.timeDifferenceMs + w.graceMs;
    const keys = new Map<string, number>(
      input.flatMap((r): [string, number][] => (r.key === null ? [] : [[r.key.toString(), r.partition]])),
    );
    for (const [key, partition] of keys) {
      const bound: number = (exec.streamTime(partition)[agg.node.name]?.store ?? -1) - retention;
      const want = new Map<number, [unknown, number] | null>();
      for (const o of model.outputs)
        if (o.topic === topic && o.key?.toString() === key) {
          const v = JSON.parse(o.value?.toString() ?? 'null') as { start: number };
          const x = how.out(v as never);
          want.set(v.start, x === null ? null : [x, o.timestamp]);
        }
      const fence = exec.store.keys.fence(Buffer.from(key));
      const values = (await redis.hgetall(exec.store.keys.windowHash(fence, agg.valueStore))) ?? {};
      const times = (await redis.hgetall(exec.store.keys.windowHash(fence, agg.timeStore))) ?? {};
      const have = new Map<number, [unknown, number]>();
      for (const [f, v] of Object.entries(values))
        if (Number(f) >= bound) have.set(Number(f), [how.stored(JSON.parse(v) as never), Number(times[f])]);
      const expected = new Map(
        [...want].filter((e): e is [number, [unknown, number]] => e[0] >= bound && e[1] !== null),
      );
      assert.deepEqual(have, expected, `windows of ${key} in ${how.store} (bound ${bound})`);
      compared += have.size;
    }
    void built;
  }
  return compared;
}

/**
 * Emit final: every window whose final result went out and that Redis still holds (not pruned) is
 * marked final (`f<start>` in its value hash), and a window state read reports it final. Returns how
 * many it checked.
 */
async function assertMarked(redis: Redis | Cluster, got: RunTotals): Promise<number> {
  let checked = 0;
  const exec = got.exec;
  const state = new TopologyState(exec.plan.built, { redis });
  for (const o of got.outputs) {
    const agg = [...exec.plan.aggregates.values()].find((a) => a.node.store === o.topic);
    if (agg === undefined || o.key === null) continue;
    const { start } = JSON.parse(o.value?.toString() ?? '{}') as { start: number };
    const hash = exec.store.keys.windowHash(exec.store.keys.fence(o.key), agg.valueStore);
    const held = (await redis.hexists(hash, String(start))) === 1;
    const marked = (await redis.hexists(hash, `f${start}`)) === 1;
    assert.equal(marked, held, `${o.topic} ${o.key.toString()}@${start}: final marked while held`);
    if (!held) continue;
    const read = await state.windowStore(agg.node.store).fetch(o.key.toString(), start, start);
    assert.deepEqual(
      read.windows.map((w) => [w.start, w.final]),
      [[start, true]],
      'the state read reports it final',
    );
    checked++;
  }
  return checked;
}

/** Name, topology, and the timestamps: step, jitter, unit. */
const CASES: [string, (app: string) => BuiltTopology, number, number][] = [
  ['a sliding count and reduce (difference 5, grace 3) after a flatMapValues', slidingCountReduce, 4, 20],
  ['the sliding count and reduce dropping late records', (app) => slidingCountReduce(app, 'drop'), 4, 20],
  ['a sliding aggregate (no grace; null deletes) beside a hopping count', slidingAggregate, 3, 12],
  [
    'the sliding count and reduce with emit final',
    (app) => slidingCountReduce(app, 'dead-letter', 'final'),
    4,
    20,
  ],
];

for (const target of TARGETS.filter((t) => t.mode === 'cluster')) {
  describe(`sliding windows on ${target.name}`, { timeout: 300_000 }, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    for (const [name, make, step, jitter] of CASES) {
      it(`${name}: outputs and windows equal the model's; replays re-emit and change nothing`, async () => {
        const seen = {
          outputs: 0,
          late: 0,
          early: 0,
          deleted: 0,
          replays: 0,
          windows: 0,
          doubled: 0,
          pruned: 0,
          marked: 0,
        };
        await fc.assert(
          fc.asyncProperty(generated(step, jitter, 1, false, true), async (g) => {
            const built = make(appName());
            const model = runModel(built, g.input, { partitions: { in: g.partitions } });
            const got = await runOnRedis(redis, built, g, null);
            assertEqualToModel(model, got);
            // emit final: the model forwards closed windows only (what Redis holds is the update path's)
            if (!name.includes('emit final'))
              seen.windows += await assertStateEqual(redis, built, g.input, model, got);
            else seen.marked += await assertMarked(redis, got);
            seen.outputs += got.outputs.length;
            seen.late += got.deadLetters.length + got.dropped.filter((d) => d.reason === 'late').length;
            seen.early += got.outputs.filter((o) => o.value?.includes('"start":0,') === true).length;
            seen.deleted += got.outputs.filter((o) => o.value?.includes('"a":null') === true).length;
            seen.doubled += g.input.filter((r) => r.value?.toString().match(/"amount":(0|5|10)}/)).length;
            seen.replays += got.replays;
            seen.pruned += got.pruned;
          }),
          { numRuns: RUNS },
        );
        assert.ok(seen.outputs > 0, 'some outputs');
        if (!name.includes('emit final')) assert.ok(seen.windows > 0, 'some stored windows compared');
        assert.ok(seen.late > 0, 'some records were late');
        assert.ok(seen.early > 0, 'some records fell below the time difference (window [0, d])');
        assert.ok(seen.replays > 0, 'some batches were replayed');
        if (name.includes('emit final')) {
          assert.ok(seen.pruned > 0, 'the close index dropped entries behind commits');
          assert.ok(seen.marked > 0, 'some final windows were checked for their mark');
        }
        if (name.includes('null deletes')) assert.ok(seen.deleted > 0, 'some windows were deleted');
        else assert.ok(seen.doubled > 0, 'some records were doubled');
      });
    }

    it('emit final: another writer between the read ahead and the write fails the batch (RF_CAS_CONFLICT); run again, it runs as the model', async () => {
      const built = slidingCountReduce(appName(), 'dead-letter', 'final');
      const agg = [...new TopologyExecutor(built, { redis }).plan.aggregates.values()][0];
      assert.ok(agg !== undefined);
      const other = otherWriter(redis, built.applicationId);
      // another writer's call on key k: a window of the count at 30 (outside the records' reach)
      const write = async () => {
        const expireAt = Date.now() + 3_600_000;
        await other(
          [{ store: agg.valueStore, kind: 'field', start: 30, expireAt, op: { op: 'set', value: '9' } }],
          100,
        );
      };
      const proxy = interfering(redis as unknown as StoreRedis, 1, write);
      const index = redis as unknown as CloseIndexRedis;
      const exec = new TopologyExecutor(built, {
        redis: {
          ...proxy.redis,
          zadd: index.zadd.bind(index),
          zrangebyscoreBuffer: index.zrangebyscoreBuffer.bind(index),
          zremrangebyscore: index.zremrangebyscore.bind(index),
        } as unknown as Redis,
      });
      const value = Buffer.from('{"amount":1}');
      const records = [7, 9, 12, 25].map((timestamp, offset) => ({
        topic: 'in',
        partition: 0,
        offset,
        key: Buffer.from('k'),
        value,
        timestamp,
      }));
      const batch = { topic: 'in', partition: 0, epoch: 1, committedOffset: 0, records };
      await assert.rejects(exec.runBatch(batch), (err: unknown) => {
        assert.ok(RedfenceError.is(err, 'RF_CAS_CONFLICT') && RedfenceError.isRetriable(err), String(err));
        return true;
      });
      assert.equal(proxy.reads(), 1);
      assert.deepEqual(exec.streamTime(0), {}, 'the failed batch left the stream time as it was');
      // run again: the foreign window is never read (out of every fetch's range), the rest is the model's
      const again = await exec.runBatch(batch);
      const model = runModel(built, records, { partitions: { in: 1 } });
      assert.ok(again.outputs.length > 0, 'windows closed at 25');
      assertEqualToModel(model, {
        ...again,
        replays: 0,
        reemits: 0,
        pruned: 0,
        exec,
      } as unknown as RunTotals);
      exec.setStreamTime(0, {}); // a new owner starts from the committed stream time
      const replay = await exec.runBatch({ ...batch, epoch: 2 });
      assert.deepEqual(replay.outputs, again.outputs, 'a replay re-emits the final results');
    });

    it('a replay that brings records past the applied ones: the applied ones re-emit and move the store time, the rest fold as the model does', async () => {
      let resumed = 0;
      await fc.assert(
        fc.asyncProperty(generated(4, 20, 1), fc.nat(60), async (g, cut) => {
          const input = g.input.filter((r) => r.partition === 0);
          const k = Math.min(cut, input.length - 1);
          if (k < 1) return;
          const built = slidingCountReduce(appName());
          const exec = new TopologyExecutor(built, { redis });
          const committedOffset = input[0]?.offset ?? 0;
          const batch = { topic: 'in', partition: 0, epoch: 1, committedOffset };
          await exec.runBatch({ ...batch, records: input.slice(0, k) });
          // a new owner from the same commit, with more records: the first k REEMIT
          exec.setStreamTime(0, {});
          const again = await exec.runBatch({ ...batch, epoch: 2, records: input });
          const model = runModel(built, input, { partitions: { in: 1 } });
          const { outputs, deadLetters, dropped } = again;
          assertEqualToModel(model, {
            outputs: [...outputs],
            deadLetters: [...deadLetters],
            dropped: [...dropped],
            replays: 0,
            reemits: 0,
            pruned: 0,
            exec,
          });
          // its clocks (the store time too) are those of one run of every record
          const once = new TopologyExecutor(slidingCountReduce(appName()), { redis });
          const straight = await once.runBatch({ ...batch, records: input });
          assert.deepEqual(again.streamTime, straight.streamTime);
          resumed += again.verdicts.REEMIT > 0 && again.verdicts.APPLY > 0 ? 1 : 0;
        }),
        { numRuns: RUNS },
      );
      assert.ok(resumed > 0, 'some replays applied records past the re-emitted ones');
    });
  });
}
