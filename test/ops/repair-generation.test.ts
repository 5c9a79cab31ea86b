/**
 * The generation in a key's token (field `g`): `redfence reconcile --repair` rewrites a drifted key under
 * the same partition and offset it was fenced at, so without more an owner's compare-and-set with a
 * token read before the repair would pass and overwrite the repair with a fold of the drifted value.
 * The repair bumps `g`, and the token is `<p>:<o>:<g>`: here the pre-repair token answers CONFLICT (the
 * current token, with its generation, comes back), the current one applies and keeps the generation,
 * and a second repair bumps it again. The store's key call (`expect`) and read (`stamp`) carry it too.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { Fence, type FenceToken } from '../../src/fence/index.js';
import { applyRepairs } from '../../src/ops/reconcile-repair.js';
import { KeyStore } from '../../src/store/index.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';

const sha1 = (s: string) => createHash('sha1').update(s).digest('hex');

for (const target of TARGETS.filter((t) => t.mode === 'cluster')) {
  describe(`the generation in a key's token on ${target.name}`, { timeout: 60_000 }, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    it("a repair's generation turns a compare-and-set with a token read before it into CONFLICT", async () => {
      const fence = new Fence({ redis, store: uniqueName('gen').replace(/-/g, '_'), mode: target.mode });
      const cas = (offset: number, expected: FenceToken | null, value: string) =>
        fence.apply({
          topic: 'in',
          partition: 0,
          epoch: 1,
          committedOffset: -1,
          key: 'k',
          records: [{ offset, operation: { op: 'cas', expected, value } }],
        });
      assert.equal((await cas(0, null, '{"n":1}'))[0]?.verdict, 'APPLY');
      const before = await fence.read('k');
      assert.deepEqual(before && { p: before.partition, o: before.offset, g: before.generation }, {
        p: 0,
        o: 0,
        g: undefined,
      });
      const repair = async (fenced: string, value: string, next: string) =>
        applyRepairs(redis as never, [
          {
            redisKey: fence.keys.state('k'),
            read: { fence: fenced, valueSha: sha1(value) },
            target: { partition: 0, offset: 0, epoch: 1, value: next },
          },
        ]);
      assert.deepEqual((await repair('0:0:1', '{"n":1}', '{"n":5}')).repaired, [fence.keys.state('k')]);
      const repaired = await fence.read('k');
      assert.equal(repaired?.generation, 1);
      assert.equal(repaired?.value?.toString(), '{"n":5}');

      // the token read before the repair: CONFLICT, nothing written, the current token returned
      const stale = await cas(1, { partition: 0, offset: 0 }, '{"n":2}');
      assert.deepEqual(stale[0], {
        verdict: 'CONFLICT',
        offset: 1,
        current: { partition: 0, offset: 0, generation: 1 },
      });
      assert.equal((await fence.read('k'))?.value?.toString(), '{"n":5}', 'the repair stands');
      // the current token applies and the generation stays
      const fresh = await cas(1, { partition: 0, offset: 0, generation: 1 }, '{"n":6}');
      assert.equal(fresh[0]?.verdict, 'APPLY');
      const now = await fence.read('k');
      assert.deepEqual(now && [now.offset, now.generation, now.value?.toString()], [1, 1, '{"n":6}']);
      // a second repair bumps it again
      const target2 = await applyRepairs(redis as never, [
        {
          redisKey: fence.keys.state('k'),
          read: { fence: '0:1:1', valueSha: sha1('{"n":6}') },
          target: { partition: 0, offset: 1, epoch: 1, value: '{"n":9}' },
        },
      ]);
      assert.equal(target2.repaired.length, 1);
      assert.equal((await fence.read('k'))?.generation, 2);
    });

    it("a key call's expect and a read's stamp carry the generation", async () => {
      const store = new KeyStore({ redis, app: uniqueName('gen').replace(/-/g, '_') });
      const call = (offset: number, expect: KeyStoreToken | null | undefined) =>
        store.call({
          partition: 0,
          epoch: 1,
          committedOffset: -1,
          key: 'k',
          ...(expect === undefined ? {} : { expect }),
          records: [{ offset, emit: 1, effects: [{ store: 1, kind: 'kv', op: { op: 'add', by: 1 } }] }],
        });
      assert.equal((await call(0, undefined))[0]?.verdict, 'APPLY');
      // a writer outside the owner changes the key's generation
      await redis.hset(store.keys.fence('k'), 'g', '3');
      const read = await store.read({ key: 'k', kv: [1] });
      assert.deepEqual(read.stamp, { partition: 0, offset: 0, epoch: 1, generation: 3 });
      const stale = await call(1, { partition: 0, offset: 0 });
      assert.deepEqual(stale[0], {
        verdict: 'CONFLICT',
        offset: 1,
        current: { partition: 0, offset: 0, generation: 3 },
      });
      assert.equal((await call(1, read.stamp))[0]?.verdict, 'APPLY');
      const after1 = await store.read({ key: 'k', kv: [1] });
      assert.deepEqual(after1.stamp, { partition: 0, offset: 1, epoch: 1, generation: 3 });
      assert.equal(after1.kv[0]?.toString(), '2');
    });
  });
}

type KeyStoreToken = { partition: number; offset: number; generation?: number };
