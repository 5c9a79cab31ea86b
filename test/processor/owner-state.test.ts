/**
 * A reducer's owner-local state (src/processor/owner-state.ts) through the processor's apply step on
 * real Redis: a key this owner last wrote is folded from memory (no HGETALL: counted on the Redis
 * connection); a key another writer changed meanwhile (a record of it from another partition) is
 * folded from the stale entry first, answered CONFLICT, read and folded again; so is a key
 * `reconcile --repair` rewrote under the same partition and offset (its generation moved); a replayed
 * record, a new epoch and a FENCEd apply read again.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { defineProcessor } from '../../src/definition/definition.js';
import { Fence } from '../../src/fence/index.js';
import { applyRepairs } from '../../src/ops/reconcile-repair.js';
import { type ApplyContext, applyAll } from '../../src/processor/apply.js';
import { OwnerState } from '../../src/processor/owner-state.js';
import type { Planned } from '../../src/processor/plan.js';
import { userCaller } from '../../src/processor/user-call.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';

const planned = (offset: number, amount: number, key = 'k'): Planned => ({
  record: {
    topic: 'in',
    partition: 0,
    offset: String(offset),
    key: Buffer.from(key),
    value: null,
    timestamp: '0',
    headers: {},
  },
  meta: { topic: 'in', partition: 0, offset, key, timestamp: '0' },
  value: { amount },
});

for (const target of TARGETS.filter((t) => t.mode === 'cluster')) {
  describe(`a reducer's owner-local state on ${target.name}`, { timeout: 60_000 }, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    it('folds from memory; another writer, a repair, a replay and a new epoch read again', async () => {
      const store = uniqueName('own').replace(/-/g, '_');
      const fence = new Fence({ redis, store, mode: target.mode });
      const owner = new OwnerState(1 << 20);
      let reads = 0;
      const ctx: ApplyContext = {
        definition: defineProcessor<{ amount: number }, number>({
          input: 'in',
          output: 'out',
          store,
          reduce: (total, o) => ({ state: (total ?? 0) + o.amount }),
        }) as never,
        fence: {
          batch: (...a) => fence.batch(...a),
          applyKeys: (...a) => fence.applyKeys(...a),
          read: (key) => {
            reads++;
            return fence.read(key);
          },
        },
        redisStep: (_what, fn) => fn(),
        callUser: userCaller(0, new AbortController().signal),
        signal: new AbortController().signal,
        owner,
      };
      const at = (epoch: number) => ({ topic: 'in', partition: 0, epoch, committed: -1 });
      const value = async () => (await fence.read('k'))?.value?.toString();
      const verdicts = (a: Awaited<ReturnType<typeof applyAll>>) =>
        a.results === 'FENCED'
          ? 'FENCED'
          : [...a.results.verdicts].map((v) => String.fromCharCode(v)).join('');

      assert.equal(verdicts(await applyAll(ctx, at(1), [planned(0, 2), planned(1, 3)])), 'AA');
      assert.equal(reads, 1, 'the first batch reads the key');
      assert.equal(verdicts(await applyAll(ctx, at(1), [planned(2, 4)])), 'A');
      assert.deepEqual([reads, owner.hits, await value()], [1, 1, '9'], 'folded from memory');

      // another writer: a record of the key from partition 7
      await fence.apply({
        topic: 'in',
        partition: 7,
        epoch: 1,
        committedOffset: -1,
        key: 'k',
        records: [{ offset: 100, operation: { op: 'set', value: '1000' } }],
      });
      // REBASE: the key's last record was another partition's
      assert.equal(verdicts(await applyAll(ctx, at(1), [planned(3, 1)])), 'B');
      assert.deepEqual([reads, owner.hits, await value()], [2, 2, '1001'], 'CONFLICT, read, folded again');

      // reconcile --repair rewrites the key at the same partition and offset (its generation moves)
      const { createHash } = await import('node:crypto');
      const sha = createHash('sha1').update('1001').digest('hex');
      await applyRepairs(redis as never, [
        {
          redisKey: fence.keys.state('k'),
          read: { fence: '0:3:1', valueSha: sha },
          target: { partition: 0, offset: 3, epoch: 1, value: '500' },
        },
      ]);
      assert.equal(verdicts(await applyAll(ctx, at(1), [planned(4, 1)])), 'A');
      assert.deepEqual([reads, owner.hits, await value()], [3, 3, '501'], 'the repair stands: read again');

      // a replay of offset 4 is not folded from memory: read, REEMIT
      assert.equal(verdicts(await applyAll(ctx, at(1), [planned(4, 1)])), 'R');
      assert.equal(reads, 4);
      // a new epoch (the partition assigned again) reads
      assert.equal(verdicts(await applyAll(ctx, at(2), [planned(5, 1)])), 'A');
      assert.deepEqual([reads, await value()], [5, '502']);
      // a FENCEd apply (an older epoch now) forgets the partition
      assert.equal(owner.size, 1);
      assert.equal(verdicts(await applyAll(ctx, at(1), [planned(6, 1)])), 'FENCED');
      assert.equal(owner.size, 0);
    });
  });
}
