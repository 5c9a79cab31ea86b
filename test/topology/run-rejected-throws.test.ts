/**
 * A record both REJECTed by an aggregation and thrown on downstream of another (docs/streams.md, "A
 * record refused and thrown on"), on real Redis: one record reaches two aggregations on different
 * fence keys (their key serdes differ); the first's stored count is not an integer (a foreign writer),
 * so its key call REJECTs, and the second's update throws in a mapValues after it. The record is one
 * dead letter, reason `rejected`, marked `stateApplied` with the downstream throw in it (two dead
 * letters would let `redfence dlq replay` send the refused one back and count the other key twice); a
 * REJECT whose other key applied without a throw is one dead letter marked `stateApplied` too. The
 * outputs are the reference model's (which has no foreign writer) without the refused key's updates; a
 * replay gives the same.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { type Serde, serdes, topology } from '../../src/topology/index.js';
import { type ModelErrorDeadLetter, type ModelInput, runModel } from '../../src/topology/model.js';
import { TopologyExecutor } from '../../src/topology/run/executor.js';
import type { RejectedDeadLetter } from '../../src/topology/run/types.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';

const s = serdes.string();
const upper: Serde<string> = {
  serialize: (k) => Buffer.from(k.toUpperCase()),
  deserialize: (b) => b.toString().toLowerCase(),
};
const appName = () => uniqueName('trt').replace(/-/g, '_');

/** A count per key (`n`) beside a count per upper-cased key (`m`) whose second update throws downstream. */
function twoKeys(app: string) {
  const t = topology({ applicationId: app });
  const orders = t.stream<string, { amount: number }>('in', { key: s });
  orders.groupByKey().count({ name: 'n' }).toStream().to('n', { key: s });
  orders
    .groupByKey({ key: upper })
    .count({ name: 'm' })
    .toStream()
    .mapValues((m) => {
      if (m === 2) throw new RangeError('two is refused');
      return m;
    })
    .to('m', { key: s });
  return t.build();
}

const rec = (offset: number, key: string): ModelInput => ({
  topic: 'in',
  partition: 0,
  offset,
  key: Buffer.from(key),
  value: Buffer.from('{"amount":1}'),
  timestamp: offset + 1,
});
const rows = (os: readonly { topic: string; key: Buffer | null; value: Buffer | null }[]) =>
  os.map((o) => `${o.topic} ${o.key?.toString()} ${o.value?.toString()}`);

for (const target of TARGETS.filter((t) => t.name !== 'standalone/cluster-fencing')) {
  describe(`a record refused and thrown on, on ${target.name}`, { timeout: 60_000 }, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    it('one dead letter with both failures; outputs are the model’s without the refused key; a replay the same', async () => {
      const built = twoKeys(appName());
      const [n, m] = built.nodes.filter((x) => x.kind === 'aggregate').map((x) => x.name);
      const mapper = built.nodes.find((x) => x.kind === 'mapValues')?.name;
      const records = [rec(0, 'a'), rec(1, 'b'), rec(2, 'a'), rec(3, 'b')];
      const model = runModel(built, records);
      // the model (no foreign writer): offsets 2 and 3 make m = 2, which throws downstream: one dead letter each
      assert.deepEqual(
        model.failed.map((f: ModelErrorDeadLetter) => [
          f.source.offset,
          f.node,
          f.downstreamOf,
          f.stateApplied,
        ]),
        [
          [2, mapper, m, true],
          [3, mapper, m, true],
        ],
      );
      const exec = new TopologyExecutor(built, { redis });
      // a foreign writer left a count of `a` in store n that is not an integer: a's calls on n REJECT
      const nStore = [...exec.plan.aggregates.values()].find((x) => x.node.name === n)?.valueStore;
      await redis.hset(exec.store.keys.fence(Buffer.from('a')), `v:${nStore}`, 'x');
      const batch = { topic: 'in', partition: 0, epoch: 1, committedOffset: 0, records };
      const first = await exec.runBatch(batch);
      // the model's outputs without n's updates of `a`
      const want = rows(model.outputs).filter((r) => !r.startsWith('n a '));
      assert.deepEqual(rows(first.outputs), want);
      assert.deepEqual(rows(first.outputs), ['m a 1', 'n b 1', 'm b 1', 'n b 2']);
      const shape = (d: (typeof first.deadLetters)[number]) => {
        if (d.reason !== 'rejected') return [d.source.offset, d.reason, d.node];
        const r = d as RejectedDeadLetter;
        return [
          r.source.offset,
          r.reason,
          r.node,
          r.stateApplied,
          r.downstream === undefined
            ? null
            : [r.downstream.node, r.downstream.downstreamOf, String(r.downstream.error)],
        ];
      };
      assert.deepEqual(first.deadLetters.map(shape), [
        [0, 'rejected', n, true, null], // a's m applied: one dead letter, its state applied
        [2, 'rejected', n, true, [mapper, m, 'RangeError: two is refused']], // both failures in one
        [3, 'processing-error', mapper], // b: the model's dead letter
      ]);
      assert.equal(first.deadLetters.length, 3, 'one dead letter per record');
      exec.setStreamTime(0, {});
      const again = await exec.runBatch({ ...batch, epoch: 2 });
      assert.deepEqual(again.deadLetters.map(shape), first.deadLetters.map(shape));
      assert.deepEqual(rows(again.outputs), rows(first.outputs));
      assert.equal(again.verdicts.APPLY + again.verdicts.REBASE, 0, 'a replay applies nothing');
    });
  });
}
