/**
 * A throw downstream of an aggregation (docs/streams.md, "A record that cannot be walked"), on real
 * Redis Cluster: a filter, map or mapValues after `toStream()` that throws on an update or a final
 * result makes its record a dead letter marked `stateApplied` (naming the node and the aggregation),
 * the record's state kept and that update's outputs not made (in another branch too), its other updates
 * and the batch going on; the executor equals the reference model on generated inputs cut into batches
 * and replayed (a replay forwards from the pending results and throws the same way).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { type BuiltTopology, serdes, TimeWindows, topology } from '../../src/topology/index.js';
import { type ModelErrorDeadLetter, runModel } from '../../src/topology/model.js';
import { TopologyExecutor } from '../../src/topology/run/executor.js';
import type { TopologyDeadLetter } from '../../src/topology/run/types.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';
import { HOP } from './run-helpers.js';
import {
  assertGeneratedEqualModel,
  amountAt as rec,
  throwingAfterCount,
  throwingAfterHoppingCount,
} from './throw-topologies.js';

const RUNS = Number(process.env.RF_TOPOLOGY_RUN_RUNS ?? 30);
const appName = () => uniqueName('td').replace(/-/g, '_');

const CASES: [string, (app: string) => BuiltTopology, typeof HOP | null][] = [
  ['a count and a reduce whose updates throw downstream', throwingAfterCount, null],
  ['a hopping count whose updates throw downstream', (app) => throwingAfterHoppingCount(app, 'update'), HOP],
  ['a hopping count whose final results throw downstream', (app) => throwingAfterHoppingCount(app), HOP],
];

const applied = (ds: readonly TopologyDeadLetter[]) =>
  ds.filter((d): d is ModelErrorDeadLetter => d.reason === 'processing-error' && d.stateApplied === true);

/** Offset, node, aggregation and what was thrown of each state-applied dead letter. */
const named = (ds: readonly TopologyDeadLetter[]) =>
  applied(ds).map((d) => [d.source.offset, d.node, d.downstreamOf, String(d.error)]);

/** The updates of a count per key of topic `in`. */
const countUpdates = (t: ReturnType<typeof topology>) =>
  t
    .stream<string, { amount: number }>('in', { key: serdes.string() })
    .groupByKey()
    .count({ name: 'n' })
    .toStream();

const values = (os: readonly { topic: string; value: Buffer | null }[]) =>
  os.map((o) => `${o.topic} ${o.value?.toString()}`);

for (const target of TARGETS.filter((t) => t.mode === 'cluster')) {
  describe(`throws downstream of an aggregation on ${target.name}`, { timeout: 300_000 }, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    for (const [name, make, window] of CASES) {
      it(`${name}: dead letters with their state applied; executor = model, replays too`, async () => {
        await assertGeneratedEqualModel(
          redis,
          () => make(appName()),
          window,
          RUNS,
          'some updates threw downstream',
          (built, got) => {
            for (const d of applied(got.deadLetters)) {
              assert.ok(d.error instanceof TypeError || d.error instanceof RangeError, String(d.error));
              assert.equal(built.nodes.find((n) => n.name === d.downstreamOf)?.kind, 'aggregate');
            }
            return applied(got.deadLetters).length;
          },
        );
      });
    }

    it('a count whose mapValues throws: that update goes, in its other branch too; the count stays; a replay throws the same way', async () => {
      const t = topology({ applicationId: appName() });
      const counts = countUpdates(t);
      counts.to('all', { key: serdes.string() });
      counts
        .mapValues((n) => {
          if (n === 2) throw new RangeError('two is refused');
          return n;
        })
        .to('out', { key: serdes.string() });
      const built = t.build();
      const mapper = built.nodes.find((n) => n.kind === 'mapValues')?.name;
      const count = built.nodes.find((n) => n.kind === 'aggregate')?.name;
      const records = [rec(0, 'a', 1), rec(1, 'b', 1), rec(2, 'a', 1), rec(3, 'a', 1)];
      const model = runModel(built, records);
      const want = [[2, mapper, count, 'RangeError: two is refused']];
      assert.deepEqual(named(model.failed), want);
      // a's second count (offset 2) is in neither topic; its third is 3: the count was kept
      const rows = ['all 1', 'out 1', 'all 1', 'out 1', 'all 3', 'out 3'];
      assert.deepEqual(values(model.outputs), rows);
      const exec = new TopologyExecutor(built, { redis });
      const batch = { topic: 'in', partition: 0, epoch: 1, committedOffset: 0, records };
      const first = await exec.runBatch(batch);
      assert.deepEqual(named(first.deadLetters), want);
      assert.equal(first.deadLetters.length, 1);
      assert.deepEqual(values(first.outputs), rows);
      assert.equal(first.verdicts.APPLY, 4, 'every count applied');
      // a new owner before the commit: REEMIT from the pending results, the same throw, the same dead letter
      exec.setStreamTime(0, {});
      const again = await exec.runBatch({ ...batch, epoch: 2 });
      assert.equal(again.verdicts.REEMIT, 4);
      assert.equal(again.verdicts.APPLY, 0, 'a replay applies nothing');
      assert.deepEqual(named(again.deadLetters), want);
      assert.deepEqual(values(again.outputs), rows);
      assert.ok(applied(again.deadLetters)[0]?.error instanceof RangeError, 'thrown again, not remembered');
    });

    it('an update that threw after writing a repartition record: the record is not written, on both sides', async () => {
      const t = topology({ applicationId: appName() });
      const counts = countUpdates(t);
      counts.repartition({ name: 'again', key: serdes.string() }).to('again-out', { key: serdes.string() });
      counts
        .filter((_k, n) => {
          if (n === 2) throw new TypeError('two is refused');
          return true;
        })
        .to('out', { key: serdes.string() });
      const built = t.build();
      const filter = built.nodes.find((n) => n.kind === 'filter')?.name;
      const records = [rec(0, 'a', 1), rec(1, 'a', 1), rec(2, 'a', 1)];
      const model = runModel(built, records);
      assert.deepEqual(
        named(model.failed).map((d) => d.slice(0, 2)),
        [[1, filter]],
      );
      // the repartition topic's records are taken at once by the model: a's counts 1 and 3, at offsets 0 and 1
      assert.deepEqual(values(model.outputs), ['again-out 1', 'out 1', 'again-out 3', 'out 3']);
      const exec = new TopologyExecutor(built, { redis });
      const got = await exec.runBatch({ topic: 'in', partition: 0, epoch: 1, committedOffset: 0, records });
      assert.deepEqual(named(got.deadLetters), named(model.failed));
      const rep = got.outputs.filter((o) => o.topic.endsWith('-again-repartition'));
      assert.deepEqual(
        values(rep).map((v) => v.split(' ')[1]),
        ['1', '3'],
        'the repartition record of count 2 is not written',
      );
      assert.deepEqual(values(got.outputs.filter((o) => o.topic === 'out')), ['out 1', 'out 3']);
    });

    it("the model: an update not walked on takes its repartition record away before a later update's is judged", () => {
      const t = topology({ applicationId: appName() });
      const hop = TimeWindows.ofSizeAndGrace(HOP.sizeMs, HOP.graceMs).advanceBy(HOP.advanceMs);
      const updates = t
        .stream<string, { amount: number }>('in', { key: serdes.string() })
        .groupByKey()
        .windowedBy(hop)
        .count({ name: 'hop-n' })
        .toStream();
      // every update goes to one key of a repartition topic, counted there: a second one throws downstream
      updates
        .map((wk): [string, number] => ['all', wk.start])
        .repartition({ name: 'all', key: serdes.string() })
        .groupByKey()
        .count({ name: 'all-n' })
        .toStream()
        .mapValues((n) => {
          if (n === 2) throw new RangeError('a second one is refused');
          return n;
        })
        .to('all-out', { key: serdes.string() });
      // after that branch: the first window's update throws, its repartition record written already
      updates
        .filter((wk) => {
          if (wk.start === 0) throw new TypeError('window 0 is refused');
          return true;
        })
        .map((wk, n): [string, number] => [wk.key, n])
        .to('out', { key: serdes.string() });
      const built = t.build();
      const filter = built.nodes.find((n) => n.kind === 'filter')?.name;
      // at 7: windows [0, 10) (its update throws, its repartition record goes) and [5, 15) (the only one counted)
      const model = runModel(built, [rec(0, 'k', 1, 7)]);
      assert.deepEqual(
        model.failed.map((d) => [d.source.topic, d.node, d.stateApplied]),
        [['in', filter, true]],
      );
      assert.deepEqual(values(model.outputs), ['all-out 1', 'out 1']);
    });
  });
}
