/**
 * The topology runtime's batch executor (src/topology/run/) against real Redis, standalone and Cluster:
 * the fraud topology of docs/streams.md, a plain count and a hopping-window count (with a split, a
 * direct sink and records counted twice), session counts, reduce and aggregate (unwindowed, hopping with
 * emit update and final, tumbling) on generated inputs (several partitions, out-of-order and late
 * timestamps, several records per key per batch, null keys and values, offset holes, batches cut at
 * random points). Its outputs must equal the reference model's per output topic and key, in order, its
 * dead letters and drops per partition; replayed batches (a new owner before the commit) re-emit the
 * same outputs and change nothing in Redis; a record on a partition its key does not hash to is a dead
 * letter (wrong-partition) on both sides, with none of its effects; a batch with a lower epoch after a higher one is fenced. A
 * record whose walk throws (the hopping count's flatMapValues at amount 6, after its first record reached
 * the count) is a dead letter on both sides, with none of its effects. About one record in 12 is a tick
 * (src/topology/tick.ts: null key, empty value, the `redfence-tick` header): walked by no node, it moves
 * the windowed aggregations' stream time on both sides, and with emit final its closes are emitted.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { RedfenceError } from '../../src/errors/index.js';
import type { BuiltTopology } from '../../src/topology/index.js';
import { runModel } from '../../src/topology/model.js';
import { TopologyExecutor } from '../../src/topology/run/executor.js';
import { isTick } from '../../src/topology/tick.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';
import {
  assertEqualToModel,
  FIVE,
  fraud,
  generated,
  HOP,
  hopping,
  hoppingAggregate,
  plainCount,
  reduceAndCount,
  runOnRedis,
  sessionCount,
  tumblingReduce,
} from './run-helpers.js';
import { slidingCountReduce } from './sliding-topologies.js';

const RUNS = Number(process.env.RF_TOPOLOGY_RUN_RUNS ?? 40);
const appName = () => uniqueName('tr').replace(/-/g, '_');
/** The reduce case again with owner-local state, about 3 keys of the 5 (entries are evicted too). */
const OWNED = 'an unwindowed reduce beside a count, with owner-local state (900 bytes: about 3 keys)';

/** Name, topology, its window (for the replay's snapshot), and the timestamps: step, jitter, unit. */
const CASES: [string, (app: string) => BuiltTopology, typeof HOP | null, number, number, number][] = [
  ['the fraud topology (5-minute windows, no grace)', fraud, null, 2, 12, 30_000],
  ['a plain groupByKey().count()', plainCount, null, 5, 10, 1],
  ['a hopping-window count with grace, a split and a flatMapValues', hopping, HOP, 4, 20, 1],
  ['the fraud topology with emit final', (app) => fraud(app, 'final'), null, 2, 12, 30_000],
  ['the hopping-window count with emit final', (app) => hopping(app, 'final'), HOP, 4, 20, 1],
  ['a session count (gap 6, grace 4; null values counted)', sessionCount, null, 4, 20, 1],
  ['a session count dropping late records', (app) => sessionCount(app, 'drop'), null, 4, 20, 1],
  ['an unwindowed reduce beside a count of the same key', reduceAndCount, null, 5, 10, 1],
  [OWNED, reduceAndCount, null, 5, 10, 1],
  ['a hopping-window aggregate (null deletes)', hoppingAggregate, HOP, 4, 20, 1],
  ['a hopping-window aggregate with emit final', (app) => hoppingAggregate(app, 'final'), HOP, 4, 20, 1],
  ['a tumbling-window reduce of numbers', tumblingReduce, FIVE, 2, 12, 30_000],
  [
    'a sliding count and reduce (difference 5, grace 3) with emit final',
    (app) => slidingCountReduce(app, 'dead-letter', 'final'),
    null,
    4,
    20,
    1,
  ],
];

for (const target of TARGETS.filter((t) => t.mode === 'cluster')) {
  describe(`topology batches on ${target.name}`, { timeout: 300_000 }, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    for (const [name, make, window, step, jitter, unit] of CASES) {
      it(`${name}: outputs equal the model's per topic and key; replays re-emit and change nothing`, async () => {
        const seen = {
          outputs: 0,
          late: 0,
          lateDrops: 0,
          tombstones: 0,
          deleted: 0,
          replays: 0,
          reemits: 0,
          partitions: 0,
          pruned: 0,
          failed: 0,
          misplaced: 0,
          cacheHits: 0,
          ticks: 0,
          tickOutputs: 0,
        };
        const property = fc.asyncProperty(generated(step, jitter, unit, true, true), async (g) => {
          const built = make(appName());
          const model = runModel(built, g.input, { partitions: { in: g.partitions } });
          const got = await runOnRedis(
            redis,
            built,
            g,
            window,
            name === OWNED ? { maxBytes: 900 } : undefined,
          );
          seen.cacheHits += got.exec.ownerCache?.hits ?? 0;
          assertEqualToModel(model, got);
          seen.outputs += got.outputs.length;
          seen.late += model.deadLetters.length;
          seen.failed += model.failed.length;
          seen.misplaced += model.misplaced.length;
          seen.lateDrops += model.dropped.filter((d) => d.reason === 'late').length;
          seen.tombstones += got.outputs.filter((o) => o.value?.includes('"n":null') === true).length;
          seen.deleted += got.outputs.filter((o) => o.value?.includes('"a":null') === true).length;
          seen.replays += got.replays;
          seen.reemits += got.reemits;
          seen.pruned += got.pruned;
          seen.ticks += g.input.filter(isTick).length;
          seen.tickOutputs += got.tickOutputs ?? 0;
          seen.partitions = Math.max(seen.partitions, g.partitions);
        });
        // what the cases below must have met, over all runs (late records, ticks that closed windows, ...)
        const coverage = (): Array<[boolean, string]> => [
          [seen.outputs > 0, 'some outputs'],
          [seen.replays > 0 && seen.reemits > 0, 'some batches were replayed'],
          [seen.partitions > 1, 'several partitions'],
          [seen.misplaced > 0, 'some records were on a partition their key does not hash to'],
          [
            make === plainCount || make === reduceAndCount || seen.late + seen.lateDrops > 0,
            'some records were late',
          ],
          [!name.startsWith('a session') || seen.tombstones > 0, 'some sessions merged'],
          [!name.includes('null deletes') || seen.deleted > 0, 'some aggregates were deleted'],
          [name !== OWNED || seen.cacheHits > 0, 'some folds started from owner-local state'],
          [seen.ticks > 0, 'some records were ticks'],
          [!name.includes('emit final') || seen.pruned > 0, 'the index dropped entries behind commits'],
          [
            !name.includes('emit final') || seen.tickOutputs > 0,
            'some ticks closed windows: their final results went out',
          ],
          // amount 6 throws in its flatMapValues after its first record reached the count
          [
            !(make === hopping || name.startsWith('the hopping-window count')) || seen.failed > 0,
            'some records threw in their walk',
          ],
        ];
        // the inputs are drawn at random: a round of RUNS that happened to miss a case is followed by
        // another (at most three rounds), so the cases are met without fixing the seed
        for (let round = 0; round < 3; round++) {
          await fc.assert(property, { numRuns: RUNS });
          if (coverage().every(([met]) => met)) break;
        }
        for (const [met, what] of coverage()) assert.ok(met, what);
      });
    }

    it('a record the store refuses (REJECT) is a dead letter, the same one again on replay', async () => {
      const exec = new TopologyExecutor(plainCount(appName()), { redis });
      // a count that is not an integer (only a foreign writer could leave one): add 1 cannot apply
      const countStore = exec.plan.aggregates.values().next().value?.valueStore;
      await redis.hset(exec.store.keys.fence(Buffer.from('k')), `v:${countStore}`, 'x');
      const value = Buffer.from('{"amount":1}');
      const records = [
        { topic: 'in', partition: 0, offset: 3, key: Buffer.from('k'), value, timestamp: 7 },
        { topic: 'in', partition: 0, offset: 4, key: Buffer.from('j'), value, timestamp: 8 },
      ];
      const batch = { topic: 'in', partition: 0, epoch: 1, committedOffset: 3, records };
      const first = await exec.runBatch(batch);
      const node = exec.plan.aggregates.values().next().value?.node.name;
      assert.deepEqual(first.deadLetters, [
        {
          reason: 'rejected',
          node,
          store: 'counts',
          message: 'add failed: stored value is not an integer',
          source: records[0],
        },
      ]);
      assert.deepEqual(
        first.outputs.map((o) => [o.key?.toString(), o.value?.toString(), o.offset]),
        [['j', '1', 4]],
      );
      assert.deepEqual(first.verdicts, { APPLY: 1, REBASE: 0, SKIP: 0, REEMIT: 0, REJECT: 1, CONFLICT: 0 });
      const again = await exec.runBatch(batch);
      assert.deepEqual(again.deadLetters, first.deadLetters);
      assert.deepEqual(again.outputs, first.outputs);
      assert.deepEqual(again.verdicts, { APPLY: 0, REBASE: 0, SKIP: 0, REEMIT: 2, REJECT: 0, CONFLICT: 0 });
    });

    it('window keys expire at max(end + grace, now) + retention; real-sized timestamps count exactly', async () => {
      const now = Math.ceil((Date.now() + 3_600_000) / 10) * 10; // ahead and ahead + 1 share their windows
      const exec = new TopologyExecutor(hopping(appName()), { redis, retentionMs: 60_000, now: () => now });
      const value = Buffer.from('{"amount":1}');
      const old = 1_000; // event time far behind the wall clock (reading old data)
      const ahead = now + 1_000_000_007; // event time ahead of it
      const records = [old, ahead, ahead + 1].map((timestamp, offset) => ({
        topic: 'in',
        partition: 0,
        offset,
        key: Buffer.from('k'),
        value,
        timestamp,
      }));
      const r = await exec.runBatch({ topic: 'in', partition: 0, epoch: 1, committedOffset: 0, records });
      const fence = exec.store.keys.fence(Buffer.from('k'));
      const expiry = async (start: number) =>
        Number(
          await redis.pexpiretime(
            exec.store.keys.window(
              fence,
              exec.plan.aggregates.values().next().value?.valueStore ?? -1,
              start,
            ),
          ),
        );
      assert.equal(await expiry(1_000), now + 60_000); // [1000, 1010): its end is long past
      const start = Math.floor(ahead / 5) * 5; // the latest hopping window of `ahead`
      assert.equal(await expiry(start), start + HOP.sizeMs + HOP.graceMs + 60_000);
      const last = r.outputs.at(-1);
      assert.equal(last?.value?.toString(), `{"start":${start},"end":${start + HOP.sizeMs},"n":2}`);
      assert.equal(last?.timestamp, ahead + 1);
    });

    it('a batch with a lower epoch after a higher one is FENCEd: nothing forwarded, stream time kept', async () => {
      const exec = new TopologyExecutor(hopping(appName()), { redis });
      const rec = (offset: number, key: string, timestamp: number) => ({
        topic: 'in',
        partition: 0,
        offset,
        key: Buffer.from(key),
        value: Buffer.from('{"amount":1}'),
        timestamp,
      });
      const ok = await exec.runBatch({
        topic: 'in',
        partition: 0,
        epoch: 2,
        committedOffset: 0,
        records: [rec(0, 'a', 1), rec(1, 'b', 2)],
      });
      assert.equal(ok.outputs.length, 2); // timestamps 1 and 2 are in window [0, 10) only
      const before = exec.streamTime(0);
      // one batch per partition at a time: each starts from the stream time the one before left
      const running = exec.runBatch({ topic: 'in', partition: 0, epoch: 2, committedOffset: 2, records: [] });
      await assert.rejects(
        exec.runBatch({ topic: 'in', partition: 0, epoch: 2, committedOffset: 2, records: [] }),
        (err: unknown) => RedfenceError.is(err, 'RF_INVALID_STATE'),
      );
      await running;
      await assert.rejects(
        exec.runBatch({ topic: 'in', partition: 0, epoch: 1, committedOffset: 2, records: [rec(2, 'a', 3)] }),
        (err: unknown) =>
          RedfenceError.is(err, 'RF_TOPOLOGY_FENCED') &&
          (err.details as { newerEpoch: number }).newerEpoch === 2,
      );
      assert.deepEqual(exec.streamTime(0), before);
      // the newer owner goes on
      const next = await exec.runBatch({
        topic: 'in',
        partition: 0,
        epoch: 2,
        committedOffset: 2,
        records: [rec(2, 'a', 3)],
      });
      assert.deepEqual(
        next.outputs.map((o) => o.value?.toString()),
        ['{"start":0,"end":10,"n":2}'],
      );
    });
  });
}
