/**
 * A throw inside an aggregation (docs/streams.md, "A record that cannot be walked"), on real Redis,
 * standalone and Cluster: a reducer, aggregator or merger that throws on some records (depending on the
 * state it meets) makes its record a dead letter naming the aggregation, all or nothing, on generated
 * inputs cut into batches and replayed, and the executor equals the reference model. Stored state the
 * store's serde cannot read, and a fold throwing in a later round, fail the batch (and the model's run)
 * with RF_TOPOLOGY_NODE_THREW naming the node and the record (a throw downstream of an aggregation is a
 * dead letter with its state applied: run-downstream-throws.test.ts).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { RedfenceError } from '../../src/errors/index.js';
import type { StoreRedis } from '../../src/store/index.js';
import { type BuiltTopology, serdes, TimeWindows, topology } from '../../src/topology/index.js';
import { runModel } from '../../src/topology/model.js';
import { TopologyExecutor } from '../../src/topology/run/executor.js';
import { planTopology } from '../../src/topology/run/plan.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';
import { HOP, interfering, otherWriter, reduceAndCount } from './run-helpers.js';
import {
  assertGeneratedEqualModel,
  amountAt as rec,
  throwingHoppingAggregate,
  throwingReduceAndCount,
  throwingSessionAggregate,
  throwingSlidingReduce,
} from './throw-topologies.js';

const RUNS = Number(process.env.RF_TOPOLOGY_RUN_RUNS ?? 30);
const appName = () => uniqueName('tt').replace(/-/g, '_');

const CASES: [string, (app: string) => BuiltTopology, typeof HOP | null][] = [
  ['an unwindowed reduce that throws, beside a count of the same key', throwingReduceAndCount, null],
  ['a hopping-window aggregate that throws', (app) => throwingHoppingAggregate(app), HOP],
  [
    'a hopping-window aggregate with emit final that throws',
    (app) => throwingHoppingAggregate(app, 'final'),
    HOP,
  ],
  [
    'a session aggregate with emit final whose aggregator and merger throw',
    (app) => throwingSessionAggregate(app),
    null,
  ],
  [
    'a session aggregate whose aggregator and merger throw',
    (app) => throwingSessionAggregate(app, 'update'),
    null,
  ],
  ['a sliding reduce with emit final that throws', (app) => throwingSlidingReduce(app), null],
];

for (const target of TARGETS.filter((t) => t.mode === 'cluster')) {
  describe(`aggregations that throw on ${target.name}`, { timeout: 300_000 }, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    for (const [name, make, window] of CASES) {
      it(`${name}: its records are dead letters naming it, none of their effects; executor = model`, async () => {
        await assertGeneratedEqualModel(
          redis,
          () => make(appName()),
          window,
          RUNS,
          'some records threw in their aggregation',
          (built, got) => {
            const aggregations = new Set(
              built.nodes.filter((n) => n.kind === 'aggregate').map((n) => n.name),
            );
            const threw = got.deadLetters.filter((d) => d.reason === 'processing-error');
            for (const d of threw) {
              assert.ok(aggregations.has(d.node), `the dead letter names the aggregation (${d.node})`);
              assert.ok(d.error instanceof RangeError || d.error instanceof TypeError, String(d.error));
            }
            return threw.length;
          },
        );
      });
    }

    it('a replay before the commit: the record is a dead letter again, its key unchanged', async () => {
      const built = throwingReduceAndCount(appName());
      const exec = new TopologyExecutor(built, { redis });
      // totals 1, then 7 on an odd total throws, then 2 applies after it on the same key
      const records = [rec(0, 'k', 1), rec(1, 'k', 7), rec(2, 'k', 2)];
      const batch = { topic: 'in', partition: 0, epoch: 1, committedOffset: 0, records };
      const first = await exec.runBatch(batch);
      const reduce = built.nodes.find((n) => n.kind === 'aggregate' && n.store === 'totals')?.name;
      assert.deepEqual(
        first.deadLetters.map((d) => [
          d.source.offset,
          d.reason,
          d.node,
          String((d as { error?: unknown }).error),
        ]),
        [[1, 'processing-error', reduce, 'RangeError: seven is refused here']],
      );
      assert.deepEqual(
        first.outputs.map((o) => [o.topic, o.value?.toString()]),
        [
          ['totals', '{"amount":1}'],
          ['n', '1'],
          ['totals', '{"amount":3}'],
          ['n', '2'],
        ],
      );
      assert.deepEqual(
        runModel(built, records).outputs.map((o) => o.value?.toString()),
        ['{"amount":1}', '1', '{"amount":3}', '2'],
      );
      exec.setStreamTime(0, {});
      const again = await exec.runBatch({ ...batch, epoch: 2 });
      assert.deepEqual(again.outputs, first.outputs);
      const d = again.deadLetters[0];
      assert.equal(again.deadLetters.length, 1);
      assert.equal(d?.source.offset, 1);
      assert.equal(d?.node, reduce);
      assert.ok(RedfenceError.is((d as { error?: unknown }).error, 'RF_TOPOLOGY_NODE_THREW'));
      assert.equal(again.verdicts.APPLY, 0, 'a replay applies nothing');
    });

    it("a record whose aggregator throws in its second window after its first window's update threw downstream: a dead letter on both sides", async () => {
      const t = topology({ applicationId: appName() });
      t.stream<string, { amount: number }>('in', { key: serdes.string() })
        .groupByKey()
        .windowedBy(TimeWindows.ofSizeAndGrace(HOP.sizeMs, HOP.graceMs).advanceBy(HOP.advanceMs))
        .aggregate(
          () => ({ n: 0 }),
          (_k, o, a) => {
            if (o.amount === 7 && a.n % 2 === 1) throw new RangeError('seven on an odd count');
            return { n: a.n + 1 };
          },
          { name: 'hop-n' },
        )
        .toStream()
        .mapValues((a) => {
          if (a.n === 3) throw new TypeError('three is refused downstream');
          return a.n;
        })
        .map((wk, n): [string, string] => [wk.key, `${wk.start}:${n}`])
        .to('out', { key: serdes.string(), value: serdes.string() });
      const built = t.build();
      const agg = built.nodes.find((n) => n.kind === 'aggregate')?.name;
      // windows [0, 10) and [5, 15): at 7, amount 7 makes [0, 10) 3 (its update throws downstream), then
      // meets [5, 15) at 1 (odd): its aggregator throws, so the record is a dead letter and nothing fails
      const records = [rec(0, 'k', 1, 1), rec(1, 'k', 1, 6), rec(2, 'k', 7, 7)];
      const model = runModel(built, records);
      const named = (ds: readonly { source: { offset: number }; node: string }[]) =>
        ds.map((d) => [d.source.offset, d.node, String((d as { error?: unknown }).error)]);
      assert.deepEqual(named(model.failed), [[2, agg, 'RangeError: seven on an odd count']]);
      const exec = new TopologyExecutor(built, { redis });
      const got = await exec.runBatch({ topic: 'in', partition: 0, epoch: 1, committedOffset: 0, records });
      assert.deepEqual(named(got.deadLetters), named(model.failed));
      const values = (os: readonly { value: Buffer | null }[]) => os.map((o) => o.value?.toString());
      assert.deepEqual(values(model.outputs), ['0:1', '0:2', '5:1']);
      assert.deepEqual(values(got.outputs), values(model.outputs));
      // without the aggregator's throw the same update is a dead letter with its state applied: the
      // downstream throw is real
      const mapper = built.nodes.find((n) => n.kind === 'mapValues')?.name;
      const five = [rec(3, 'j', 1, 1), rec(4, 'j', 1, 6), rec(5, 'j', 5, 7)];
      const downstream = (ds: readonly { source: { offset: number }; node: string }[]) =>
        ds.map((d) => [d.source.offset, d.node, (d as { stateApplied?: true }).stateApplied]);
      assert.deepEqual(downstream(runModel(built, five).failed), [[5, mapper, true]]);
      const got5 = await exec.runBatch({
        topic: 'in',
        partition: 0,
        epoch: 1,
        committedOffset: 3,
        records: five,
      });
      assert.deepEqual(downstream(got5.deadLetters), [[5, mapper, true]]);
      assert.deepEqual(
        values(got5.outputs),
        ['0:1', '0:2', '5:1', '5:2'],
        "[0, 10)'s third update is not made, [5, 15)'s is",
      );
    });

    it('emit final: the index entry of a window only the dead-lettered record made finalizes to nothing', async () => {
      const built = throwingHoppingAggregate(appName(), 'final');
      const exec = new TopologyExecutor(built, { redis });
      const sums = [...exec.plan.aggregates.values()][0];
      assert.ok(sums !== undefined);
      const index = exec.store.keys.closeIndex('in', 0, sums.valueStore);
      // 7 at 7 falls in [0, 10) (one record: odd, it throws) and [5, 15) (only it): a dead letter
      const first = await exec.runBatch({
        topic: 'in',
        partition: 0,
        epoch: 1,
        committedOffset: 0,
        records: [rec(0, 'k', 1, 1), rec(1, 'k', 7, 7)],
      });
      assert.deepEqual(
        first.deadLetters.map((d) => [d.source.offset, d.reason]),
        [[1, 'processing-error']],
      );
      const entries = await redis.zrangebyscore(index, '-inf', '+inf');
      assert.equal(entries.length, 2, 'the failed try indexed [5, 15) beside [0, 10)');
      // another key's records close [0, 10) at 13 and [5, 15) at 18: k's [0, 10) gives its final result,
      // its [5, 15) nothing (never written)
      const closing = [rec(2, 'j', 1, 13), rec(3, 'j', 1, 18)];
      const second = await exec.runBatch({
        topic: 'in',
        partition: 0,
        epoch: 1,
        committedOffset: 2,
        records: closing,
      });
      const model = runModel(built, [rec(0, 'k', 1, 1), rec(1, 'k', 7, 7), ...closing]);
      const rows = (os: readonly { key: Buffer | null; value: Buffer | null }[]) =>
        os.map((o) => `${o.key?.toString()} ${o.value?.toString()}`);
      assert.deepEqual(rows(model.outputs), [
        'k {"start":0,"end":10,"a":{"n":1,"sum":1}}',
        'j {"start":5,"end":15,"a":{"n":1,"sum":1}}',
      ]);
      assert.deepEqual(rows([...first.outputs, ...second.outputs]), rows(model.outputs));
    });

    it('a record whose reducer throws and whose later branch throws in its walk: a dead letter naming the walk on both sides', async () => {
      const t = topology({ applicationId: appName() });
      const orders = t.stream<string, { amount: number }>('in', { key: serdes.string() });
      orders
        .groupByKey()
        .reduce(
          (a, b) => {
            if (b.amount === 7) throw new RangeError('the reducer refuses 7');
            return { amount: a.amount + b.amount };
          },
          { name: 'sums' },
        )
        .toStream()
        .to('sums', { key: serdes.string() });
      orders
        .filter((_k, o) => {
          if (o.amount === 7) throw new TypeError('the filter refuses 7');
          return true;
        })
        .to('all', { key: serdes.string() });
      const built = t.build();
      const filter = built.nodes.find((n) => n.kind === 'filter')?.name;
      // the reduce branch comes first in the walk, but every fold comes after the walk on Redis
      const records = [rec(0, 'k', 1), rec(1, 'k', 7), rec(2, 'k', 2)];
      const model = runModel(built, records);
      const named = (ds: readonly { source: { offset: number }; node: string }[]) =>
        ds.map((d) => [d.source.offset, d.node, String((d as { error?: unknown }).error)]);
      assert.deepEqual(named(model.failed), [[1, filter, 'TypeError: the filter refuses 7']]);
      const exec = new TopologyExecutor(built, { redis });
      const got = await exec.runBatch({ topic: 'in', partition: 0, epoch: 1, committedOffset: 0, records });
      assert.deepEqual(named(got.deadLetters), named(model.failed));
      const rows = (os: readonly { topic: string; value: Buffer | null }[]) =>
        os.map((o) => `${o.topic} ${o.value?.toString()}`).sort();
      assert.deepEqual(rows(got.outputs), rows(model.outputs));
      assert.equal(got.outputs.length, 4);
    });

    it("a reducer that throws in a later round (after another writer's CONFLICT) fails the batch: RF_TOPOLOGY_NODE_THREW", async () => {
      const built = throwingReduceAndCount(appName());
      const totals = [...planTopology(built).aggregates.values()].find((a) => a.node.store === 'totals');
      assert.ok(totals !== undefined);
      // another writer leaves an odd total (1) on the key between the batch's first read and its write
      const other = otherWriter(redis, built.applicationId);
      const write = async () => {
        await other(
          [
            { store: totals.valueStore, kind: 'kv', op: { op: 'set', value: '{"amount":1}' } },
            { store: totals.timeStore, kind: 'kv', op: { op: 'set', value: '5' } },
          ],
          100,
        );
      };
      const proxy = interfering(redis as unknown as StoreRedis, 1, write);
      const exec = new TopologyExecutor(built, { redis: proxy.redis });
      // the first round folds 7 onto no total (it applies); the second meets 1 + 7 on an odd total
      const batch = { topic: 'in', partition: 0, epoch: 1, committedOffset: 0, records: [rec(0, 'k', 7)] };
      await assert.rejects(exec.runBatch(batch), (e: unknown) => {
        assert.ok(RedfenceError.is(e, 'RF_TOPOLOGY_NODE_THREW'), String(e));
        assert.deepEqual(e.details, {
          node: totals.node.name,
          topic: 'in',
          partition: 0,
          offset: 0,
          where: 'in a read-then-write round after a CONFLICT, other keys written',
        });
        assert.ok(e.cause instanceof RangeError);
        return true;
      });
      assert.equal(proxy.reads(), 1, 'the other writer wrote after the first read');
    });

    it('a stored aggregate its serde cannot read fails the batch: RF_TOPOLOGY_NODE_THREW, no dead letter', async () => {
      const built = reduceAndCount(appName());
      const exec = new TopologyExecutor(built, { redis });
      const totals = [...exec.plan.aggregates.values()].find((a) => a.node.store === 'totals');
      assert.ok(totals !== undefined);
      // only a foreign writer (or another serde) could leave this: not JSON
      const fence = exec.store.keys.fence(Buffer.from('k'));
      await redis.hset(fence, `v:${totals.valueStore}`, '{not json', `v:${totals.timeStore}`, '1');
      await assert.rejects(
        exec.runBatch({ topic: 'in', partition: 0, epoch: 1, committedOffset: 0, records: [rec(0, 'k', 1)] }),
        (e: unknown) =>
          RedfenceError.is(e, 'RF_TOPOLOGY_NODE_THREW') &&
          (e.details as { node: string; where: string }).node === totals.node.name &&
          (e.details as { where: string }).where === 'its store serde cannot read the stored state' &&
          !e.message.includes('not json'),
      );
    });
  });
}
