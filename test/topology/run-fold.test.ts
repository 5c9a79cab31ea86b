/**
 * Reduce and aggregate on Redis are read-then-write (src/topology/run/fold.ts): each key is read once,
 * folded in JS and written with `expect` = the read's stamp. Here another writer changes a key between
 * the executor's read and its write: the call is CONFLICT, the key is read and folded again, and the
 * outputs hold the other writer's value; a replay re-emits the same bytes; a replay that brings records
 * past the key's stamp folds only those, onto the stored aggregate; a writer that never stops makes the
 * batch fail with RF_CAS_CONFLICT after the bounded rounds, with nothing of it written; a key needing
 * more windows than one read holds is read in parts; a sliding window another writer adds between the
 * read and the write is found by the second read and counted in.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { RedfenceError } from '../../src/errors/index.js';
import type { StoreRedis } from '../../src/store/index.js';
import { SlidingWindows, serdes, TimeWindows, topology } from '../../src/topology/index.js';
import { runModel } from '../../src/topology/model.js';
import { TopologyExecutor } from '../../src/topology/run/executor.js';
import { MAX_FOLD_ROUNDS } from '../../src/topology/run/fold.js';
import { type AggregatePlan, planTopology } from '../../src/topology/run/plan.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';
import { interfering, otherWriter, reduceAndCount } from './run-helpers.js';

const appName = () => uniqueName('tf').replace(/-/g, '_');

const rec = (offset: number, amount: number, timestamp: number) => ({
  topic: 'in',
  partition: 0,
  offset,
  key: Buffer.from('k'),
  value: Buffer.from(JSON.stringify({ amount })),
  timestamp,
});

const rows = (outputs: readonly { topic: string; value: Buffer | null; timestamp: number }[]) =>
  outputs.map((o) => `${o.topic} ${o.value?.toString()} @${o.timestamp}`);

for (const target of TARGETS.filter((t) => t.mode === 'cluster')) {
  describe(`reduce and aggregate read-then-write on ${target.name}`, { timeout: 150_000 }, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    it('another writer between the read and the write: CONFLICT, read and fold again; replays re-emit the same bytes', async () => {
      const built = reduceAndCount(appName());
      const other = otherWriter(redis, built.applicationId);
      let offset = 100;
      const write = async () => {
        const totals = [...new TopologyExecutor(built, { redis }).plan.aggregates.values()][0];
        assert.equal(totals?.node.store, 'totals');
        await other(
          [
            { store: totals.valueStore, kind: 'kv', op: { op: 'set', value: '{"amount":1000}' } },
            { store: totals.timeStore, kind: 'kv', op: { op: 'set', value: '5' } },
          ],
          offset++,
        );
      };
      const proxy = interfering(redis as unknown as StoreRedis, 1, write);
      const exec = new TopologyExecutor(built, { redis: proxy.redis });
      const batch = {
        topic: 'in',
        partition: 0,
        epoch: 1,
        committedOffset: 0,
        records: [rec(0, 2, 10), rec(1, 3, 11)],
      };
      const first = await exec.runBatch(batch);
      assert.equal(proxy.reads(), 1, 'the other writer wrote after the first read');
      assert.deepEqual(first.verdicts, { APPLY: 1, REBASE: 1, SKIP: 0, REEMIT: 0, REJECT: 0, CONFLICT: 2 });
      const expected = ['totals {"amount":1002} @10', 'n 1 @10', 'totals {"amount":1005} @11', 'n 2 @11'];
      assert.deepEqual(rows(first.outputs), expected);

      // a new owner replays the batch: the same bytes, nothing applied
      const again = await exec.runBatch({ ...batch, epoch: 2 });
      assert.deepEqual(again.outputs, first.outputs);
      assert.deepEqual(again.verdicts, { APPLY: 0, REBASE: 0, SKIP: 0, REEMIT: 2, REJECT: 0, CONFLICT: 0 });

      // a replay with more records: the applied ones re-emit, only the new ones fold onto the stored total
      const longer = await exec.runBatch({
        ...batch,
        epoch: 2,
        records: [...batch.records, rec(2, 4, 9), rec(3, 1, 12)],
      });
      assert.deepEqual(rows(longer.outputs), [
        ...expected,
        'totals {"amount":1009} @11',
        'n 3 @11',
        'totals {"amount":1010} @12',
        'n 4 @12',
      ]);
      assert.deepEqual(longer.verdicts, { APPLY: 2, REBASE: 0, SKIP: 0, REEMIT: 2, REJECT: 0, CONFLICT: 0 });
    });

    it('a key whose batch holds thousands of windows: equal to the model', async () => {
      // size 6000, advance 1: each record is in 6000 windows; two timestamps 7 apart: 6007 window keys
      const t = topology({ applicationId: appName() });
      t.stream<string, { amount: number }>('in', { key: serdes.string() })
        .groupByKey()
        .windowedBy(TimeWindows.ofSizeWithNoGrace(6_000).advanceBy(1))
        .aggregate(
          () => 0,
          (_k, o, sum: number) => sum + o.amount,
          { name: 'wide' },
        )
        .toStream()
        .map((wk, sum) => [wk.key, { start: wk.start, sum }] as const)
        .to('wide', { key: serdes.string() });
      const built = t.build();
      const records = [rec(0, 2, 7_000), rec(1, 3, 7_007)];
      const exec = new TopologyExecutor(built, { redis });
      const got = await exec.runBatch({ topic: 'in', partition: 0, epoch: 1, committedOffset: 0, records });
      const model = runModel(built, records);
      assert.equal(got.outputs.length, 12_000);
      assert.deepEqual(rows(got.outputs), rows(model.outputs));
      // and again on top of what the first batch left: the read in parts finds it
      const next = [rec(2, 4, 7_008)];
      const more = await exec.runBatch({
        topic: 'in',
        partition: 0,
        epoch: 1,
        committedOffset: 2,
        records: next,
      });
      assert.deepEqual(
        rows(more.outputs),
        rows(runModel(built, [...records, ...next]).outputs.slice(12_000)),
      );
    });

    it('a key whose batch needs more windows than one read holds is read in parts', async () => {
      // size 10000, advance 1: two timestamps 7 apart: 10007 window keys, more than one read holds
      // (the model is slow at this size: the sums are known, 2 then 5 where both records count, 3 after)
      const t = topology({ applicationId: appName() });
      t.stream<string, { amount: number }>('in', { key: serdes.string() })
        .groupByKey()
        .windowedBy(TimeWindows.ofSizeWithNoGrace(10_000).advanceBy(1))
        .aggregate(
          () => 0,
          (_k, o, sum: number) => sum + o.amount,
          { name: 'wider' },
        )
        .toStream()
        .map((wk, sum) => [wk.key, { start: wk.start, sum }] as const)
        .to('wider', { key: serdes.string() });
      const built = t.build();
      const exec = new TopologyExecutor(built, { redis });
      const parts: number[] = [];
      const read = exec.store.read.bind(exec.store);
      exec.store.read = (request) => {
        parts.push(request.windows?.reduce((n, w) => n + w.starts.length, 0) ?? 0);
        return read(request);
      };
      const records = [rec(0, 2, 11_000), rec(1, 3, 11_007)];
      const got = await exec.runBatch({ topic: 'in', partition: 0, epoch: 1, committedOffset: 0, records });
      assert.deepEqual(parts, [10_000, 7], 'one read in two parts');
      const sums = got.outputs.map((o) => JSON.parse(String(o.value)) as { start: number; sum: number });
      const want = [
        ...Array.from({ length: 10_000 }, (_, i) => ({ start: 1_001 + i, sum: 2 })),
        ...Array.from({ length: 10_000 }, (_, i) => ({ start: 1_008 + i, sum: 1_008 + i <= 11_000 ? 5 : 3 })),
      ];
      assert.deepEqual(sums, want);
    });

    it('sliding windows: another writer between the read and the write: CONFLICT, read and fold again', async () => {
      const t = topology({ applicationId: appName() });
      t.stream<string, { amount: number }>('in', { key: serdes.string() })
        .groupByKey()
        .windowedBy(SlidingWindows.ofTimeDifferenceWithNoGrace(10))
        .count({ name: 'slide' })
        .toStream()
        .map((wk, n) => [wk.key, { start: wk.start, n }] as const)
        .to('slide', { key: serdes.string() });
      const built = t.build();
      const [slide] = [...planTopology(built).aggregates.values()] as AggregatePlan[];
      assert.ok(slide !== undefined);
      const other = otherWriter(redis, built.applicationId);
      const field = (store: number, value: string) =>
        ({
          store,
          kind: 'field',
          start: 15,
          expireAt: Date.now() + 60_000,
          op: { op: 'set', value },
        }) as const;
      // the other writer leaves the window [15, 25] holding 100 records, the last at 18
      const write = async () => {
        await other([field(slide.valueStore, '100'), field(slide.timeStore, '18')], 100);
      };
      const proxy = interfering(redis as unknown as StoreRedis, 1, write);
      const exec = new TopologyExecutor(built, { redis: proxy.redis });
      const batch = { topic: 'in', partition: 0, epoch: 1, committedOffset: 0, records: [rec(0, 2, 20)] };
      const first = await exec.runBatch(batch);
      assert.equal(proxy.reads(), 1);
      assert.deepEqual(first.verdicts, { APPLY: 0, REBASE: 1, SKIP: 0, REEMIT: 0, REJECT: 0, CONFLICT: 1 });
      // the record falls in [15, 25] (now 101) and makes its left window [10, 20]
      assert.deepEqual(rows(first.outputs), [
        'slide {"start":15,"n":101} @20',
        'slide {"start":10,"n":1} @20',
      ]);
      assert.deepEqual(rows(runModel(built, batch.records).outputs), ['slide {"start":10,"n":1} @20']);
      const again = await exec.runBatch({ ...batch, epoch: 2 });
      assert.deepEqual(again.outputs, first.outputs, 'a replay re-emits the same bytes');
    });

    it('an older owner of the partition is FENCEd on a reduce key, not sent round the CONFLICT loop', async () => {
      const exec = new TopologyExecutor(reduceAndCount(appName()), { redis });
      const batch = { topic: 'in', partition: 0, epoch: 2, committedOffset: 0, records: [rec(0, 2, 10)] };
      assert.equal((await exec.runBatch(batch)).verdicts.APPLY, 1);
      await assert.rejects(
        exec.runBatch({ ...batch, epoch: 1, committedOffset: 1, records: [rec(1, 3, 11)] }),
        (err: unknown) => RedfenceError.is(err, 'RF_TOPOLOGY_FENCED'),
      );
      const again = await exec.runBatch({ ...batch, committedOffset: 1, records: [rec(1, 3, 11)] });
      assert.deepEqual(rows(again.outputs), ['totals {"amount":5} @11', 'n 2 @11']);
    });

    it(`a writer that never stops: RF_CAS_CONFLICT after ${MAX_FOLD_ROUNDS} rounds, nothing of the batch written`, async () => {
      const built = reduceAndCount(appName());
      const [reduce, count] = [...planTopology(built).aggregates.values()] as AggregatePlan[];
      assert.equal(reduce?.node.store, 'totals');
      assert.ok(reduce !== undefined && count !== undefined);
      const other = otherWriter(redis, built.applicationId);
      let offset = 100;
      const write = async () => {
        await other(
          [
            { store: reduce.valueStore, kind: 'kv', op: { op: 'set', value: '{"amount":1}' } },
            { store: reduce.timeStore, kind: 'kv', op: { op: 'set', value: '5' } },
          ],
          offset++,
        );
      };
      const proxy = interfering(redis as unknown as StoreRedis, 1_000, write);
      const exec = new TopologyExecutor(built, { redis: proxy.redis });
      await assert.rejects(
        exec.runBatch({ topic: 'in', partition: 0, epoch: 1, committedOffset: 0, records: [rec(0, 2, 10)] }),
        (err: unknown) =>
          RedfenceError.is(err, 'RF_CAS_CONFLICT') &&
          RedfenceError.isRetriable(err) &&
          /k?eys kept changing/.test(err.message),
      );
      assert.equal(proxy.reads(), MAX_FOLD_ROUNDS);
      const fence = exec.store.keys.fence(Buffer.from('k'));
      assert.deepEqual(
        await redis.hmget(fence, 'p', 'o', `v:${reduce.valueStore}`, `v:${count.valueStore}`),
        ['7', String(offset - 1), '{"amount":1}', null],
      );
    });
  });
}
