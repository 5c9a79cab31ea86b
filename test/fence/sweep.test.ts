/**
 * Pending entries do not grow without bound: a key's own next write prunes them, and keys that are
 * not written again are pruned by sweep() once the partition's committed offset passes them.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Cluster, Redis } from 'ioredis';
import { Fence } from '../../src/index.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';

const T = 'orders';

for (const target of TARGETS) {
  describe(`pending entries on ${target.name}`, () => {
    let redis: Redis | Cluster;
    let fence: Fence;
    before(() => {
      redis = target.connect();
      fence = new Fence({ redis, store: uniqueName('sw').replace(/-/g, '_'), mode: target.mode });
    });
    after(() => redis.disconnect());

    it('sweep prunes keys not written again, keeps entries at or above the committed offset', async () => {
      const e = await fence.acquireEpoch(T, 0);
      const keys = Array.from({ length: 30 }, (_, i) => `k${i}`);
      await fence.applyBatch(
        keys.map((key, i) => ({
          topic: T,
          partition: 0,
          epoch: e,
          committedOffset: 0,
          key,
          records: [{ offset: 100 + i, operation: { op: 'add', by: 1 }, output: 'state' }],
        })),
      );
      assert.equal(await redis.zcard(fence.keys.pendingIndex(T, 0)), 30);

      // committed offset 120: keys k0..k19 (offsets 100..119) are passed, k20..k29 are not
      let pruned = 0;
      for (let more = true; more; ) {
        const r = await fence.sweep(T, 0, 120, 7); // small pages: exercises `more`
        pruned += r.pruned;
        more = r.more;
      }
      assert.equal(pruned, 20);
      for (const [i, key] of keys.entries()) {
        const s = await fence.read(key);
        assert.equal(s?.pending.length, i < 20 ? 0 : 1, key);
        assert.equal(s?.value?.toString(), '1', 'sweeping never touches values');
      }
      assert.equal(await redis.zcard(fence.keys.pendingIndex(T, 0)), 10);
    });

    it('a page of more keys than one script call takes (300) is pruned whole', async () => {
      const e = await fence.acquireEpoch(T, 5);
      const keys = Array.from({ length: 300 }, (_, i) => `many${i}`);
      await fence.applyBatch(
        keys.map((key, i) => ({
          topic: T,
          partition: 5,
          epoch: e,
          committedOffset: 0,
          key,
          records: [{ offset: 1000 + i, operation: { op: 'add', by: 1 }, output: 'state' }],
        })),
      );
      const r = await fence.sweep(T, 5, 2000);
      assert.deepEqual(r, { keys: 300, pruned: 300, more: false });
      for (const key of [keys[0], keys[127], keys[128], keys[299]])
        assert.equal((await fence.read(key as string))?.pending.length, 0, key);
      assert.equal(await redis.zcard(fence.keys.pendingIndex(T, 5)), 0);
    });

    it('a key written again after it was listed keeps its newer entry and its index membership', async () => {
      const e = await fence.acquireEpoch(T, 1);
      await fence.apply({
        topic: T,
        partition: 1,
        epoch: e,
        committedOffset: 0,
        key: 'again',
        records: [{ offset: 5, operation: { op: 'add', by: 1 }, output: 'state' }],
      });
      await fence.apply({
        topic: T,
        partition: 1,
        epoch: e,
        committedOffset: 0,
        key: 'again',
        records: [{ offset: 50, operation: { op: 'add', by: 1 }, output: 'state' }],
      });
      const r = await fence.sweep(T, 1, 10);
      assert.equal(r.pruned, 0, 'nothing below 10 is left: the index score is the highest pending offset');
      assert.deepEqual(
        (await fence.read('again'))?.pending.map((p) => p.offset),
        [5, 50],
      );
      const r2 = await fence.sweep(T, 1, 51);
      assert.equal(r2.pruned, 2);
      assert.equal(await redis.zcard(fence.keys.pendingIndex(T, 1)), 0);
    });

    it("a key's next write prunes its own entries below the committed offset", async () => {
      const e = await fence.acquireEpoch(T, 2);
      const req = { topic: T, partition: 2, epoch: e, key: 'self' };
      await fence.apply({
        ...req,
        committedOffset: 0,
        records: [1, 2, 3].map((offset) => ({
          offset,
          operation: { op: 'add' as const, by: 1 },
          output: 'state' as const,
        })),
      });
      assert.equal((await fence.read('self'))?.pending.length, 3);
      await fence.apply({
        ...req,
        committedOffset: 4,
        records: [{ offset: 4, operation: { op: 'add', by: 1 } }],
      });
      assert.deepEqual((await fence.read('self'))?.pending, []);
    });

    it('records without outputs leave no index entry', async () => {
      const e = await fence.acquireEpoch(T, 3);
      await fence.apply({
        topic: T,
        partition: 3,
        epoch: e,
        committedOffset: 0,
        key: 'quiet',
        records: [{ offset: 1, operation: { op: 'add', by: 1 } }],
      });
      assert.equal(await redis.zcard(fence.keys.pendingIndex(T, 3)), 0);
    });
  });
}
