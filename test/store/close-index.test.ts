/**
 * The close-time index of open windows (src/store/close-index.ts) on a standalone Redis and on Redis
 * Cluster: due windows come in Kafka Streams' emission order (start, then key bytes, binary keys
 * included), adding again changes nothing, reads are paged, removal is by start, the key shares the
 * partition epoch's slot, and bad input is refused before any call.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Cluster, Redis } from 'ioredis';
import { KeySpace } from '../../src/keys/index.js';
import { CloseIndex, type IndexedWindow } from '../../src/store/close-index.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';

const order = (a: IndexedWindow, b: IndexedWindow) => a.start - b.start || Buffer.compare(a.key, b.key);

for (const target of TARGETS.filter((t) => t.mode === 'cluster')) {
  describe(`close-time index on ${target.name}`, () => {
    let redis: Redis | Cluster;
    before(() => {
      redis = target.connect();
    });
    after(() => redis.disconnect());

    it('gives due windows by (start, key bytes), pages, ignores a second add, removes by start', async () => {
      const app = uniqueName('ci').replace(/-/g, '_');
      const index = new CloseIndex({ redis, app });
      const keys = [
        Buffer.from('b'),
        Buffer.from('a'),
        Buffer.from([0xff, 0]),
        Buffer.from([0]),
        Buffer.from('ab'),
      ];
      const windows: IndexedWindow[] = [];
      for (const start of [300, 0, 100, 200]) for (const key of keys) windows.push({ key, start });
      await index.add('orders', 3, 1, windows);
      await index.add('orders', 3, 1, windows.slice(0, 7)); // a replay: nothing new
      assert.equal(await redis.zcard(index.key('orders', 3, 1)), windows.length);
      const want = [...windows].sort(order);

      const all = await index.due('orders', 3, 1, { from: 0, upTo: 10_000, limit: 1000 });
      assert.deepEqual(all, want);
      const upTo100 = await index.due('orders', 3, 1, { from: 0, upTo: 100, limit: 1000 });
      assert.deepEqual(
        upTo100,
        want.filter((w) => w.start <= 100),
      );
      // paged: a full page reads on from its last start (that start's windows come again)
      const page = await index.due('orders', 3, 1, { from: 0, upTo: 10_000, limit: 7 });
      assert.deepEqual(page, want.slice(0, 7));
      const next = await index.due('orders', 3, 1, {
        from: (page.at(-1) as IndexedWindow).start,
        upTo: 10_000,
        limit: 1000,
      });
      assert.deepEqual(
        next,
        want.filter((w) => w.start >= 100),
      );
      // other partitions and stores are apart
      assert.deepEqual(await index.due('orders', 2, 1, { from: 0, upTo: 10_000, limit: 10 }), []);
      assert.deepEqual(await index.due('orders', 3, 2, { from: 0, upTo: 10_000, limit: 10 }), []);

      assert.equal(await index.remove('orders', 3, 1, 100), 2 * keys.length);
      assert.deepEqual(
        await index.due('orders', 3, 1, { from: 0, upTo: 10_000, limit: 1000 }),
        want.filter((w) => w.start > 100),
      );
    });

    if (target.name.startsWith('cluster'))
      it("shares the partition epoch's slot", async () => {
        const app = uniqueName('slot').replace(/-/g, '_');
        const index = new CloseIndex({ redis, app });
        const epoch = new KeySpace({ store: app }).epoch('orders', 5);
        const slot = (k: string) => (redis as Cluster).cluster('KEYSLOT', k) as Promise<number>;
        assert.equal(await slot(index.key('orders', 5, 9)), await slot(epoch));
      });
  });
}

describe('close-time index: bad input', () => {
  it('is refused with RF_INVALID_ARGUMENT naming the field, before any call', async () => {
    let calls = 0;
    const count = async () => {
      calls++;
      return [];
    };
    const redis = { zadd: count, zrangebyscoreBuffer: count, zremrangebyscore: async () => ++calls };
    const index = new CloseIndex({ redis, app: 'app' });
    const cases: [() => Promise<unknown>, RegExp][] = [
      [() => index.add('orders', 0, 1, [{ key: Buffer.from('k'), start: -1 }]), /windows\[0\]\.start/],
      [() => index.add('orders', 0, 1, [{ key: 'k' as never, start: 0 }]), /windows\[0\]\.key/],
      [() => index.add('bad topic', 0, 1, []), /topic/],
      [() => index.add('orders', 0, 70_000, []), /store id/],
      [() => index.due('orders', 0, 1, { from: 0, upTo: 1.5, limit: 1 }), /upTo/],
      [() => index.due('orders', 0, 1, { from: 0, upTo: 1, limit: 0 }), /limit/],
      [() => index.remove('orders', -1, 1, 0), /partition/],
    ];
    for (const [fn, message] of cases)
      await assert.rejects(fn(), { code: 'RF_INVALID_ARGUMENT', message }, String(message));
    assert.equal(calls, 0);
  });
});
