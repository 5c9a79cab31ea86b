/**
 * Owner-local state for reduce and aggregate (src/topology/run/owner-cache.ts): a key this executor last
 * wrote is folded from its memory, not read; the write still carries the key's token. Here: folds start
 * from the cache (hits counted); a key another writer changed meanwhile (a record of the key from
 * another partition) is folded from the stale cache first, answered CONFLICT, read and folded again, so
 * the output holds the other writer's value, and so is one whose generation a writer outside the owner
 * bumped; a failed batch (FENCE by a newer owner) forgets the
 * partition's keys; the cache keeps to maxBytes; bad options are refused before any call.
 * run-equals-model.test.ts runs generated batches with the cache on against the model.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { RedfenceError } from '../../src/errors/index.js';
import { TopologyExecutor } from '../../src/topology/run/executor.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';
import { otherWriter, reduceAndCount } from './run-helpers.js';

const appName = () => uniqueName('to').replace(/-/g, '_');

const rec = (offset: number, amount: number, timestamp: number, key = 'k') => ({
  topic: 'in',
  partition: 0,
  offset,
  key: Buffer.from(key),
  value: Buffer.from(JSON.stringify({ amount })),
  timestamp,
});

const batch = (epoch: number, records: ReturnType<typeof rec>[]) => ({
  topic: 'in',
  partition: 0,
  epoch,
  committedOffset: records[0]?.offset ?? -1,
  records,
});

const totals = (outputs: readonly { topic: string; value: Buffer | null }[]) =>
  outputs.filter((o) => o.topic === 'totals').map((o) => o.value?.toString());

for (const target of TARGETS.filter((t) => t.mode === 'cluster')) {
  describe(`owner-local state on ${target.name}`, { timeout: 60_000 }, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    it('folds from the cache; a key changed elsewhere is CONFLICT, read and folded again', async () => {
      const built = reduceAndCount(appName());
      const exec = new TopologyExecutor(built, { redis, ownerCache: { maxBytes: 1 << 20 } });
      const cache = exec.ownerCache;
      assert.ok(cache !== null);
      const first = await exec.runBatch(batch(1, [rec(0, 2, 10), rec(1, 3, 11)]));
      assert.deepEqual(totals(first.outputs), ['{"amount":2}', '{"amount":5}']);
      assert.equal(cache.hits, 0, 'the first batch reads the key');
      const second = await exec.runBatch(batch(1, [rec(2, 4, 12)]));
      assert.deepEqual(totals(second.outputs), ['{"amount":9}']);
      assert.equal(cache.hits, 1, 'the second batch folds from the cache');
      assert.equal(second.verdicts.APPLY, 1);

      // another writer: a record of the key from partition 7 sets the total
      const agg = [...exec.plan.aggregates.values()].find((a) => a.node.store === 'totals');
      assert.ok(agg !== undefined);
      await otherWriter(redis, built.applicationId)(
        [
          { store: agg.valueStore, kind: 'kv', op: { op: 'set', value: '{"amount":1000}' } },
          { store: agg.timeStore, kind: 'kv', op: { op: 'set', value: '5' } },
        ],
        100,
      );
      const third = await exec.runBatch(batch(1, [rec(3, 1, 13)]));
      assert.equal(cache.hits, 2, 'the stale entry was used first');
      assert.equal(third.verdicts.CONFLICT, 1, 'and the key call refused it');
      assert.deepEqual(totals(third.outputs), ['{"amount":1001}'], "folded onto the other writer's total");
      const fourth = await exec.runBatch(batch(1, [rec(4, 1, 14)]));
      assert.equal(cache.hits, 3);
      assert.equal(fourth.verdicts.CONFLICT, 0, 'the entry was replaced by the re-read');
      assert.deepEqual(totals(fourth.outputs), ['{"amount":1002}']);

      // a writer outside the owner bumps the key's generation: the cached token no longer matches
      await redis.hset(exec.store.keys.fence(Buffer.from('k')), 'g', '1');
      const fifth = await exec.runBatch(batch(1, [rec(5, 1, 15)]));
      assert.deepEqual([cache.hits, fifth.verdicts.CONFLICT], [4, 1]);
      assert.deepEqual(totals(fifth.outputs), ['{"amount":1003}']);
      const sixth = await exec.runBatch(batch(1, [rec(6, 1, 16)]));
      assert.deepEqual(
        [cache.hits, sixth.verdicts.CONFLICT],
        [5, 0],
        'the re-read token carries the generation',
      );
      assert.deepEqual(totals(sixth.outputs), ['{"amount":1004}']);
    });

    it("a failed batch forgets the partition's keys; the cache keeps to maxBytes", async () => {
      const built = reduceAndCount(appName());
      const exec = new TopologyExecutor(built, { redis, ownerCache: { maxBytes: 600 } });
      const cache = exec.ownerCache;
      assert.ok(cache !== null);
      await exec.runBatch(
        batch(
          1,
          ['a', 'b', 'c', 'd'].map((k, i) => rec(i, 1, 10 + i, k)),
        ),
      );
      // an entry of this topology counts about 290 bytes: two fit
      assert.equal(cache.size, 2, `bounded (${cache.bytes} bytes)`);
      assert.ok(cache.bytes <= 600);
      // a newer owner of partition 0 writes key d: this owner's next batch of d is FENCEd
      const newer = new TopologyExecutor(built, { redis });
      await newer.runBatch(batch(2, [rec(4, 1, 20, 'd')]));
      await assert.rejects(exec.runBatch(batch(1, [rec(5, 1, 21, 'd')])), (e) =>
        RedfenceError.is(e, 'RF_TOPOLOGY_FENCED'),
      );
      assert.equal(cache.size, 0, "the fenced partition's entries are gone");
    });

    it('bad options are refused before any call', () => {
      for (const ownerCache of [
        { maxBytes: 0 },
        { maxBytes: 1.5 },
        { maxBytes: 5, extra: 1 },
        { maxKeys: 5 },
        null,
      ])
        assert.throws(
          () =>
            new TopologyExecutor(reduceAndCount(appName()), {
              redis,
              ownerCache: ownerCache as unknown as { maxBytes: number },
            }),
          (e) => RedfenceError.is(e, 'RF_INVALID_OPTIONS') && /ownerCache/.test((e as Error).message),
        );
    });
  });
}
