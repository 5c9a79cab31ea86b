/**
 * The partition check of a topology (docs/streams.md, "The partition check"), on real Redis: a keyed
 * record read by a sub-topology that keeps state per key, or from a repartition topic, whose key
 * murmur2 places on another partition of its topic is a dead letter `wrong-partition` with none of its
 * effects (not counted, no output in another branch), on the executor as in the reference model, and
 * again on a replay; a sub-topology without state is not checked; a key placed under an earlier
 * partition count of the topic passes; a batch without a partition count is not checked.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { partitionFor } from '../../src/partitioner/index.js';
import { serdes, topology } from '../../src/topology/index.js';
import { type ModelInput, type ModelMisplaced, runModel } from '../../src/topology/model.js';
import { TopologyExecutor } from '../../src/topology/run/executor.js';
import type { TopologyDeadLetter } from '../../src/topology/run/types.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';

const s = serdes.string();
const appName = () => uniqueName('tp').replace(/-/g, '_');

/** The first key `k<i>` murmur2 places on `partition` of `count` (and, given, not on `notOf` of its count). */
function keyOn(partition: number, count: number, notOf?: [number, number]): string {
  for (let i = 0; ; i++) {
    const k = `k${i}`;
    if (partitionFor(k, count) !== partition) continue;
    if (notOf !== undefined && partitionFor(k, notOf[1]) === notOf[0]) continue;
    return k;
  }
}

const rec = (
  topic: string,
  partition: number,
  offset: number,
  key: string | null,
  amount: number,
): ModelInput => ({
  topic,
  partition,
  offset,
  key: key === null ? null : Buffer.from(key),
  value: Buffer.from(JSON.stringify({ amount })),
  timestamp: 1000 + offset,
});

/** A count per key of `in`, beside a copy of every record (the same sub-topology: checked as a whole). */
function countAndCopy(app: string) {
  const t = topology({ applicationId: app });
  const orders = t.stream<string, { amount: number }>('in', { key: s });
  orders.to('copy', { key: s });
  orders.groupByKey().count({ name: 'n' }).toStream().to('counts', { key: s });
  return t.build();
}

const wrong = (ds: readonly TopologyDeadLetter[]) =>
  ds
    .filter((d): d is ModelMisplaced => d.reason === 'wrong-partition')
    .map((d) => [d.source.offset, d.node, d.expected, d.partitions]);
const rows = (os: readonly { topic: string; key: Buffer | null; value: Buffer | null }[]) =>
  os.map((o) => `${o.topic} ${o.key?.toString()} ${o.value?.toString()}`);

for (const target of TARGETS.filter((t) => t.name !== 'standalone/cluster-fencing')) {
  describe(`the partition check of a topology on ${target.name}`, { timeout: 120_000 }, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    it('a misplaced record of a stateful sub-topology: a dead letter, none of its effects; executor = model; a replay the same', async () => {
      const built = countAndCopy(appName());
      const here = keyOn(1, 2);
      const there = keyOn(0, 2);
      const records = [
        rec('in', 1, 0, here, 1),
        rec('in', 1, 1, there, 2), // hashes to 0: refused
        rec('in', 1, 2, here, 3),
        rec('in', 1, 3, null, 4), // no key: not checked (the count drops it, the copy has it)
        rec('in', 1, 4, there, 5),
      ];
      const source = built.nodes.find((n) => n.kind === 'source')?.name;
      const want = [
        [1, source, 0, 2],
        [4, source, 0, 2],
      ];
      const model = runModel(built, records, { partitions: { in: 2 } });
      assert.deepEqual(wrong(model.misplaced), want);
      const outputs = [
        `copy ${here} {"amount":1}`,
        `counts ${here} 1`,
        `copy ${here} {"amount":3}`,
        `counts ${here} 2`,
        'copy undefined {"amount":4}',
      ];
      assert.deepEqual(rows(model.outputs), outputs);
      // without the count the model has a guess at most: not checked
      assert.equal(runModel(built, records).misplaced.length, 0);

      const exec = new TopologyExecutor(built, { redis });
      const batch = { topic: 'in', partition: 1, epoch: 1, committedOffset: 0, records, partitionCount: 2 };
      const first = await exec.runBatch(batch);
      assert.deepEqual(wrong(first.deadLetters), want);
      assert.equal(first.deadLetters.length, 2);
      assert.deepEqual(rows(first.outputs), outputs);
      assert.equal(first.verdicts.APPLY, 2, 'only the placed records reached the store');
      // a new owner replays the batch before its commit: the same dead letters, nothing applied
      exec.setStreamTime(1, {});
      const again = await exec.runBatch({ ...batch, epoch: 2 });
      assert.deepEqual(again.deadLetters, first.deadLetters);
      assert.deepEqual(rows(again.outputs), outputs);
      assert.equal(again.verdicts.APPLY + again.verdicts.REBASE, 0);
      // the count of `there` was never made: its first placed record counts 1
      const placed = await exec.runBatch({
        topic: 'in',
        partition: 0,
        epoch: 1,
        committedOffset: 0,
        records: [rec('in', 0, 0, there, 6)],
        partitionCount: 2,
      });
      assert.deepEqual(rows(placed.outputs), [`copy ${there} {"amount":6}`, `counts ${there} 1`]);
    });

    it('a sub-topology without state, and a batch without a partition count, are not checked', async () => {
      const t = topology({ applicationId: appName() });
      t.stream<string, { amount: number }>('in', { key: s }).to('copy', { key: s });
      const stateless = t.build();
      const there = keyOn(0, 2);
      const records = [rec('in', 1, 0, there, 1)];
      assert.equal(runModel(stateless, records, { partitions: { in: 2 } }).misplaced.length, 0);
      const exec = new TopologyExecutor(stateless, { redis });
      const r = await exec.runBatch({
        topic: 'in',
        partition: 1,
        epoch: 1,
        committedOffset: 0,
        records,
        partitionCount: 2,
      });
      assert.deepEqual([r.deadLetters.length, r.outputs.length], [0, 1]);

      const counted = new TopologyExecutor(countAndCopy(appName()), { redis });
      const u = await counted.runBatch({ topic: 'in', partition: 1, epoch: 1, committedOffset: 0, records });
      assert.deepEqual(
        [u.deadLetters.length, u.verdicts.APPLY],
        [0, 1],
        'no count given: the caller does not check',
      );
    });

    it('a repartition topic: a misplaced key is a dead letter; one placed under an earlier count passes', async () => {
      const app = appName();
      const t = topology({ applicationId: app });
      t.stream<string, { amount: number }>('in', { key: s })
        .groupBy((_k, o) => `r${o.amount}`, { key: s, name: 'by-amount' })
        .count({ name: 'per-amount' })
        .toStream()
        .to('counts', { key: s });
      const built = t.build();
      const topic = `${app}-by-amount-repartition`;
      const exec = new TopologyExecutor(built, { redis });
      const on1of3 = keyOn(1, 3, [1, 2]); // on 1 of 3, not of 2
      const earlier = keyOn(1, 2, [1, 3]); // on 1 of 2 (before partitions were added), not of 3
      const records = [rec(topic, 1, 0, on1of3, 1), rec(topic, 1, 1, earlier, 1)];
      const node = built.nodes.find((n) => n.kind === 'source' && n.internal)?.name;
      const now = await exec.runBatch({
        topic,
        partition: 1,
        epoch: 1,
        committedOffset: 0,
        records,
        partitionCount: 3,
      });
      assert.deepEqual(wrong(now.deadLetters), [[1, node, partitionFor(earlier, 3), 3]]);
      assert.deepEqual(rows(now.outputs), [`counts ${on1of3} 1`]);
      const other = new TopologyExecutor(built, { redis });
      const withHistory = await other.runBatch({
        topic,
        partition: 1,
        epoch: 2,
        committedOffset: 0,
        records,
        partitionCount: 3,
        partitionCounts: [2, 3],
      });
      assert.equal(withHistory.deadLetters.length, 0, 'placed by murmur2 under the count of 2');
    });

    it('refuses a partition count the batch cannot have', async () => {
      const exec = new TopologyExecutor(countAndCopy(appName()), { redis });
      const batch = { topic: 'in', partition: 2, epoch: 1, committedOffset: 0, records: [] };
      await assert.rejects(exec.runBatch({ ...batch, partitionCount: 2 }), { code: 'RF_INVALID_ARGUMENT' });
      await assert.rejects(exec.runBatch({ ...batch, partitionCounts: [3] }), {
        code: 'RF_INVALID_ARGUMENT',
      });
    });
  });
}
