/**
 * A state hash whose fence field was overwritten by something else (not an integer): the scripts read
 * such a field as absent (Lua's `tonumber`), so reading it back must say so. `Fence.read` and the
 * store reader of `redfence reconcile` (src/ops/reconcile-sources.ts) report RF_STATE_CORRUPT naming the
 * field, never its text; a key whose fields are integers reads as before.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Fence } from '../../src/fence/index.js';
import { readStore } from '../../src/ops/reconcile-sources.js';
import { standalone, uniqueName } from '../helpers/env.js';

describe('stored fence fields that are not integers', () => {
  const redis = standalone();
  after(() => redis.disconnect());
  const fence = new Fence({ redis, store: uniqueName('fields').replace(/-/g, '_'), mode: 'cluster' });

  it('Fence.read and the reconcile reader name the field and never show its text', async () => {
    const apply = (offset: number) =>
      fence.apply({
        topic: 't',
        partition: 2,
        epoch: 1,
        committedOffset: -1,
        key: 'k',
        records: [{ offset, operation: { op: 'add', by: 1 }, output: 'state' }],
      });
    await apply(5);
    const key = fence.keys.state('k');
    const sound = await fence.read('k');
    assert.equal(sound?.offset, 5);
    assert.equal(sound?.partition, 2);
    for (const [field, text] of [
      ['o', 'secret-offset'],
      ['p', ''],
      ['e', '1.5'],
      ['g', 'NaN'],
    ] as const) {
      const before = await redis.hget(key, field);
      await redis.hset(key, field, text);
      await assert.rejects(fence.read('k'), (err: Error & { code?: string }) => {
        assert.equal(err.code, 'RF_STATE_CORRUPT');
        assert.match(err.message, new RegExp(`fence field ${field} is not an integer`));
        if (text !== '') assert.ok(!err.message.includes(text), err.message);
        return true;
      });
      const stored = await readStore(redis, fence.keys);
      const mine = stored.filter((s) => s.redisKey === key);
      assert.equal(mine.length, 1);
      const state = mine[0]?.state;
      assert.ok(state && 'corrupt' in state, `${field}: read as corrupt`);
      assert.match(state.corrupt, new RegExp(`fence field ${field}`));
      if (before === null) await redis.hdel(key, field);
      else await redis.hset(key, field, before);
    }
    // the fault shown: the script reads a non-integer `o` as no offset, so the same record applies again
    await redis.hset(key, 'o', 'x');
    const again = await apply(5);
    assert.equal(again[0]?.verdict, 'APPLY');
    await redis.del(key);
  });
});
