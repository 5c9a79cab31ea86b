/**
 * Several key calls in one script call (keyCallMany-N.lua, a single Redis): KeyStore.callMany joins
 * the calls of one partition batch, up to MANY_KEYS_PER_CALL keys per script call, and every result
 * and stored state equals the reference model's, as one call per key would give; calls of other
 * batches (another committed offset) go apart; a malformed call refuses the whole script call with
 * nothing written. On Redis Cluster callMany keeps one script call per key (covered by the windowed
 * and session tests, which run callMany on both targets).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Cluster, Redis } from 'ioredis';
import { loadScripts } from '../../src/fence/index.js';
import { runScript } from '../../src/fence/script-runner.js';
import { encodeKeyCallMany } from '../../src/store/codec.js';
import { MANY_KEYS_PER_CALL, STORE_LUA_DIR } from '../../src/store/store.js';
import type { Effect, KeyCall } from '../../src/store/types.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';
import { Twin } from './twin.js';

const EXPIRE = Date.now() + 3_600_000;
const target = TARGETS.find((t) => t.name === 'standalone/cluster-fencing');

describe('key calls joined in one script call (single Redis)', () => {
  let redis: Redis | Cluster;
  before(() => {
    redis = (target as NonNullable<typeof target>).connect();
  });
  after(() => redis.disconnect());

  it('equal the model call by call, across chunks and batches, with replays and a zombie', async () => {
    const twin = new Twin(redis, uniqueName('many').replace(/-/g, '_'));
    const keys = Array.from({ length: MANY_KEYS_PER_CALL * 2 + 5 }, (_, i) => `k${i}`);
    const calls = (from: number, epoch: number, committedOffset: number): KeyCall[] =>
      keys.map((key, i) => ({
        partition: 1,
        epoch,
        committedOffset: i % 3 === 0 ? -1 : committedOffset, // two batches' worth of committed offsets
        key,
        records: [0, 1].map((d) => ({
          offset: from + 2 * i + d,
          emit: 1 as const,
          effects: [
            { store: 0, kind: 'kv', op: { op: 'add', by: i + d } } as Effect,
            {
              store: 1,
              kind: 'window',
              start: 1000 * (i % 4),
              expireAt: EXPIRE,
              op: { op: 'add', by: 1 },
            } as Effect,
            ...(i % 5 === 0 ? [{ store: 2, kind: 'kv', op: { op: 'set', value: 'x' } } as Effect] : []),
            ...(i % 7 === 0 && d === 1 ? [{ store: 2, kind: 'kv', op: { op: 'add', by: 1 } } as Effect] : []),
          ],
        })),
      }));
    const first = await twin.callMany(calls(0, 1, -1));
    assert.ok(
      first.flat().some((r) => r.verdict === 'REJECT'),
      'a record was rejected (add on text)',
    );
    // a new owner replays: REEMIT, or SKIP where the committed offset pruned the entry
    const again = (await twin.callMany(calls(0, 2, 10))).flat().map((r) => r.verdict);
    assert.ok(again.every((v) => v === 'REEMIT' || v === 'SKIP'));
    assert.ok(again.includes('SKIP') && again.includes('REEMIT'));
    await twin.callMany(calls(1000, 2, 500));
    const zombie = await twin.callMany(calls(2000, 1, 500));
    assert.ok(zombie.every((rs) => rs.every((r) => r.verdict === 'FENCE')));
    for (const key of keys) await twin.checkStored(key);
  });

  it('a malformed call refuses the whole script call: nothing written for any key', async () => {
    const twin = new Twin(redis, uniqueName('manybad').replace(/-/g, '_'));
    const script = loadScripts(STORE_LUA_DIR).get('keyCallMany');
    assert.ok(script);
    const call = (key: string): KeyCall => ({
      partition: 0,
      epoch: 1,
      committedOffset: -1,
      key,
      records: [{ offset: 5, emit: 1, effects: [{ store: 0, kind: 'kv', op: { op: 'add', by: 1 } }] }],
    });
    const many = encodeKeyCallMany(twin.store.keys, ['a', 'b', 'c'].map(call));
    const args = [...many.args];
    const i = args.lastIndexOf('5,1,1;ka0,,1;');
    args[i] = '5,1,1;kq0,,1;'; // the third call's effect: an unknown op
    await assert.rejects(runScript(redis as never, script, many.keys, args), {
      code: 'RF_SCRIPT_ERROR',
      message: /call 3: record 1 effect 1 is malformed/,
    });
    for (const k of ['a', 'b', 'c'])
      assert.equal(await redis.exists(twin.store.keys.fence(k)), 0, `${k} untouched`);
  });
});
