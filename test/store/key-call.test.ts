/**
 * The key call (src/store/lua/keyCall-N.lua) on every Redis target with cluster fencing: each row of
 * the decision table with effects (APPLY, SKIP, REEMIT with identical results, REBASE, FENCE, REJECT,
 * pending pruning), emit-final once with the window's expiry, and bad input refused with nothing
 * written. Every call is compared with the reference model (src/store/model.ts), results and stored
 * state.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Cluster, Redis } from 'ioredis';
import { loadScripts } from '../../src/fence/index.js';
import { runScript } from '../../src/fence/script-runner.js';
import { STORE_LUA_DIR } from '../../src/store/store.js';
import type { Effect, KeyCall } from '../../src/store/types.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';
import { Twin } from './twin.js';

const EXPIRE = Date.now() + 3_600_000;
const b = (s: string) => Buffer.from(s);
const count = (start: number): Effect => ({
  store: 1,
  kind: 'window',
  start,
  expireAt: EXPIRE + start,
  op: { op: 'add', by: 1 },
});

for (const target of TARGETS.filter((t) => t.mode === 'cluster')) {
  describe(`key call on ${target.name}`, () => {
    let redis: Redis | Cluster;
    let twin: Twin;
    before(() => {
      redis = target.connect();
      twin = new Twin(redis, uniqueName('kc').replace(/-/g, '_'));
    });
    after(() => redis.disconnect());

    const call = (key: string, over: Partial<KeyCall>): KeyCall => ({
      partition: 0,
      epoch: 1,
      committedOffset: -1,
      key,
      records: [],
      ...over,
    });

    it('APPLY makes every effect in order; REEMIT gives the same results; SKIP once committed', async () => {
      const records = [
        {
          offset: 10,
          emit: 1 as const,
          effects: [
            { store: 0, kind: 'kv', op: { op: 'set', value: 'hello' } },
            { store: 3, kind: 'kv', op: { op: 'add', by: 5 } },
            count(0),
            count(0),
            { store: 2, kind: 'window', start: 0, expireAt: EXPIRE, op: { op: 'max', value: 7 } },
          ] as Effect[],
        },
        {
          offset: 12,
          emit: 0 as const,
          effects: [{ store: 3, kind: 'kv', op: { op: 'add', by: -2 } }] as Effect[],
        },
        {
          offset: 15,
          emit: 1 as const,
          effects: [count(0), { store: 0, kind: 'kv', op: { op: 'delete' } }] as Effect[],
        },
      ];
      const got = await twin.call(call('a', { records }));
      assert.deepEqual(got, [
        { verdict: 'APPLY', offset: 10, results: [b('hello'), b('5'), b('1'), b('2'), b('7')] },
        { verdict: 'APPLY', offset: 12 },
        { verdict: 'APPLY', offset: 15, results: [b('3'), null] },
      ]);
      await twin.checkStored('a');

      // the owner crashed before its commit: the same call again
      const again = await twin.call(call('a', { epoch: 2, records }));
      assert.deepEqual(again, [
        { verdict: 'REEMIT', offset: 10, results: [b('hello'), b('5'), b('1'), b('2'), b('7')] },
        { verdict: 'SKIP', offset: 12 },
        { verdict: 'REEMIT', offset: 15, results: [b('3'), null] },
      ]);
      await twin.checkStored('a');

      // committed past 10: its entry is pruned, a replay of it SKIPs
      const later = await twin.call(call('a', { epoch: 2, committedOffset: 11, records }));
      assert.deepEqual(
        later.map((r) => r.verdict),
        ['SKIP', 'SKIP', 'REEMIT'],
      );
      await twin.checkStored('a');
      const pruned = await twin.call(
        call('a', { epoch: 2, committedOffset: 16, records: [{ offset: 16, emit: 0, effects: [] }] }),
      );
      assert.deepEqual(pruned, [{ verdict: 'APPLY', offset: 16 }]);
      assert.equal(twin.model.get('a')?.pending.size, 0);
      await twin.checkStored('a');
    });

    it('FENCE: a zombie with a lower epoch writes nothing', async () => {
      await twin.call(call('z', { epoch: 5, records: [{ offset: 1, emit: 1, effects: [count(10)] }] }));
      const zombie = await twin.call(
        call('z', {
          epoch: 4,
          records: [
            { offset: 2, emit: 1, effects: [count(10)] },
            { offset: 3, emit: 1, effects: [{ store: 0, kind: 'kv', op: { op: 'set', value: 'x' } }] },
          ],
        }),
      );
      assert.deepEqual(zombie, [
        { verdict: 'FENCE', offset: 2, epoch: 5 },
        { verdict: 'FENCE', offset: 3, epoch: 5 },
      ]);
      await twin.checkStored('z');
      assert.equal(twin.model.get('z')?.windows.get('1:10')?.value?.toString(), '1');
    });

    it('REBASE: a record from another partition applies, resets the fence and drops the old entries', async () => {
      await twin.call(call('r', { records: [{ offset: 100, emit: 1, effects: [count(20)] }] }));
      const got = await twin.call(
        call('r', {
          partition: 3,
          records: [
            { offset: 4, emit: 1, effects: [count(20)] },
            { offset: 5, emit: 1, effects: [count(20)] },
          ],
        }),
      );
      assert.deepEqual(got, [
        { verdict: 'REBASE', offset: 4, previousPartition: 0, results: [b('2')] },
        { verdict: 'APPLY', offset: 5, results: [b('3')] },
      ]);
      await twin.checkStored('r');
    });

    it('REJECT: none of the record effects is made, the fence moves, a replay re-emits the reason', async () => {
      const records = [
        {
          offset: 1,
          emit: 1 as const,
          effects: [{ store: 0, kind: 'kv', op: { op: 'set', value: 'text' } }] as Effect[],
        },
        {
          offset: 2,
          emit: 1 as const,
          effects: [count(30), { store: 0, kind: 'kv', op: { op: 'add', by: 1 } }] as Effect[],
        },
        {
          offset: 3,
          emit: 1 as const,
          effects: [{ store: 4, kind: 'kv', op: { op: 'add', by: 2 ** 52 } }] as Effect[],
        },
        {
          offset: 4,
          emit: 1 as const,
          effects: [{ store: 4, kind: 'kv', op: { op: 'add', by: 2 ** 52 } }] as Effect[],
        },
        {
          offset: 5,
          emit: 1 as const,
          effects: [{ store: 0, kind: 'kv', op: { op: 'max', value: 3 } }] as Effect[],
        },
      ];
      const got = await twin.call(call('x', { records }));
      assert.deepEqual(
        got.map((r) => r.verdict),
        ['APPLY', 'REJECT', 'APPLY', 'REJECT', 'REJECT'],
      );
      assert.deepEqual(got[1], {
        verdict: 'REJECT',
        offset: 2,
        reason: 'add failed: stored value is not an integer',
      });
      assert.deepEqual(got[3], { verdict: 'REJECT', offset: 4, reason: 'add failed: result beyond 2^53' });
      assert.equal(
        twin.model.get('x')?.windows.has('1:30'),
        false,
        'the window effect before the failing one is not made',
      );
      await twin.checkStored('x');
      const replay = await twin.call(call('x', { epoch: 2, records }));
      assert.deepEqual(replay[1], {
        verdict: 'REEMIT',
        offset: 2,
        deadLetter: 'add failed: stored value is not an integer',
      });
      await twin.checkStored('x');
    });

    it('final: the window value once, a second final gives null; the window expires at expireAt', async () => {
      const at = Date.now() + 120_000;
      const w = (start: number): Effect => ({
        store: 1,
        kind: 'window',
        start,
        expireAt: at,
        op: { op: 'add', by: 4 },
      });
      const fin = (start: number): Effect => ({ store: 1, kind: 'final', start });
      const got = await twin.call(
        call('f', {
          records: [
            { offset: 1, emit: 1, effects: [w(0), w(0), w(100)] },
            { offset: 2, emit: 1, effects: [fin(0), fin(200)] },
            { offset: 3, emit: 1, effects: [fin(0), w(100), fin(100), fin(100)] },
          ],
        }),
      );
      assert.deepEqual(got, [
        { verdict: 'APPLY', offset: 1, results: [b('4'), b('8'), b('4')] },
        { verdict: 'APPLY', offset: 2, results: [b('8'), null] },
        { verdict: 'APPLY', offset: 3, results: [null, b('8'), b('8'), null] },
      ]);
      const replay = await twin.call(
        call('f', { epoch: 2, records: [{ offset: 2, emit: 1, effects: [fin(0), fin(200)] }] }),
      );
      assert.deepEqual(
        replay,
        [{ verdict: 'REEMIT', offset: 2, results: [b('8'), null] }],
        'a replay of the final re-emits it',
      );
      const second = await twin.call(
        call('f', { epoch: 2, records: [{ offset: 9, emit: 1, effects: [fin(0)] }] }),
      );
      assert.deepEqual(second, [{ verdict: 'APPLY', offset: 9, results: [null] }]);
      await twin.checkStored('f');
      const name = twin.store.keys.window(twin.store.keys.fence('f'), 1, 0);
      const pttl = await redis.pttl(name);
      assert.ok(pttl > 100_000 && pttl <= 120_000, `PTTL ${pttl}`);
      assert.equal(await redis.exists(twin.store.keys.window(twin.store.keys.fence('f'), 1, 200)), 0);
    });

    it("a window's time field: one key holds value and time; one record's finals take both, once", async () => {
      const at = Date.now() + 120_000;
      const count = (start: number): Effect => ({
        store: 1,
        kind: 'window',
        start,
        expireAt: at,
        op: { op: 'add', by: 1 },
      });
      const time = (start: number, t: number): Effect => ({
        store: 1,
        kind: 'window',
        field: 'time',
        start,
        expireAt: at,
        op: { op: 'max', value: t },
      });
      const fin = (start: number, field?: 'time'): Effect =>
        field === undefined ? { store: 1, kind: 'final', start } : { store: 1, kind: 'final', start, field };
      const got = await twin.call(
        call('tf', {
          records: [
            { offset: 1, emit: 1, effects: [count(0), time(0, 50)] },
            { offset: 2, emit: 1, effects: [count(0), time(0, 30), count(100), time(100, 7)] },
            { offset: 3, emit: 1, effects: [fin(0), fin(0, 'time'), fin(0, 'time')] },
            { offset: 4, emit: 1, effects: [fin(0, 'time'), fin(0)] },
          ],
        }),
      );
      assert.deepEqual(got, [
        { verdict: 'APPLY', offset: 1, results: [b('1'), b('50')] },
        { verdict: 'APPLY', offset: 2, results: [b('2'), b('50'), b('1'), b('7')] },
        { verdict: 'APPLY', offset: 3, results: [b('2'), b('50'), null] },
        { verdict: 'APPLY', offset: 4, results: [null, null] },
      ]);
      const fence = twin.store.keys.fence('tf');
      const key = twin.store.keys.window(fence, 1, 0);
      assert.deepEqual(await redis.hgetall(key), { v: '2', t: '50', f: '1' }, 'one key: value, time, final');
      assert.equal(await redis.exists(twin.store.keys.window(fence, 2, 0)), 0, 'no second window key');
      await twin.checkStored('tf');
      // the value deleted: the time field stays (the key lives while it holds either), the marker goes
      const del = await twin.call(
        call('tf', {
          records: [
            {
              offset: 5,
              emit: 1,
              effects: [
                { store: 1, kind: 'window', start: 0, expireAt: at, op: { op: 'delete' } },
                fin(0, 'time'),
              ],
            },
          ],
        }),
      );
      assert.deepEqual(del, [{ verdict: 'APPLY', offset: 5, results: [null, null] }]);
      assert.deepEqual(await redis.hgetall(key), { t: '50' });
      await twin.checkStored('tf');
    });

    it('a key with braces is stored by its hash: every key of the call stays in one slot', async () => {
      const key = 'odd{key}';
      const got = await twin.call(
        call(key, { records: [{ offset: 1, emit: 1, effects: [count(0), count(10)] }] }),
      );
      assert.deepEqual(got, [{ verdict: 'APPLY', offset: 1, results: [b('1'), b('1')] }]);
      const enc = twin.store.encode(call(key, { records: [{ offset: 2, emit: 1, effects: [count(0)] }] }));
      assert.ok(!(enc.keys[0] as string).includes('odd'), 'the raw key is not in the key name');
      assert.ok((enc.keys[1] as string).startsWith(`${enc.keys[0]}:w:`));
      await twin.checkStored(key);
    });

    it('bad input is refused before anything is written', async () => {
      const store = twin.store;
      const base = call('bad', { records: [{ offset: 1, emit: 1, effects: [count(0)] }] });
      await assert.rejects(
        store.call({
          ...base,
          records: [
            { offset: 2, emit: 1, effects: [] },
            { offset: 2, emit: 1, effects: [] },
          ],
        }),
        { code: 'RF_INVALID_ARGUMENT', message: /records\[1\]\.offset must be larger/ },
      );
      await assert.rejects(
        store.call({
          ...base,
          records: [
            { offset: 1, emit: 1, effects: [{ store: 0, kind: 'kv', op: { op: 'mul', by: 2 } } as never] },
          ],
        }),
        { code: 'RF_INVALID_ARGUMENT', message: /records\[0\]\.effects\[0\]\.op\.op is unknown/ },
      );
      await assert.rejects(
        store.callMany([
          base,
          { ...base, key: 'bad2', records: [{ offset: 1, emit: 2 as never, effects: [] }] },
        ]),
        { code: 'RF_INVALID_ARGUMENT', message: /records\[0\]\.emit/ },
      );
      await assert.rejects(store.call({ ...base, epoch: -1 }), {
        code: 'RF_INVALID_ARGUMENT',
        message: /epoch/,
      });
      await assert.rejects(store.call({ ...base, records: [] }), {
        code: 'RF_INVALID_ARGUMENT',
        message: /records/,
      });
      await assert.rejects(store.call({ ...base, expect: { partition: -1, offset: 0 } }), {
        code: 'RF_INVALID_ARGUMENT',
        message: /expect\.partition/,
      });
      await assert.rejects(store.call({ ...base, expect: { partition: 0, offset: 1.5 } }), {
        code: 'RF_INVALID_ARGUMENT',
        message: /expect\.offset/,
      });
      await assert.rejects(store.call({ ...base, expect: 'p0:o1' as never }), {
        code: 'RF_INVALID_ARGUMENT',
        message: /expect must be a token/,
      });
      const session = {
        store: 2,
        kind: 'session',
        time: 10,
        lowEnd: 5,
        highStart: 15,
        closeTime: 0,
        dropBefore: 0,
        expireAt: EXPIRE,
        op: { op: 'add', by: 1 },
      };
      for (const [change, field] of [
        [{ op: { op: 'set', value: 5 } }, 'op'],
        [{ op: { op: 'mul', by: 2 } }, 'op'],
        [{ lowEnd: 1.5 }, 'lowEnd'],
        [{ closeTime: undefined }, 'closeTime'],
        [{ time: -1 }, 'time'],
        [{ expireAt: 0 }, 'expireAt'],
      ] as const)
        await assert.rejects(
          store.call({
            ...base,
            records: [{ offset: 1, emit: 1, effects: [{ ...session, ...change } as never] }],
          }),
          { code: 'RF_INVALID_ARGUMENT', message: new RegExp(`effects\\[0\\]\\.${field}`) },
        );

      // the script itself: a window key outside the fence key's slot, offsets not increasing, an unknown op
      const script = loadScripts(STORE_LUA_DIR).get('keyCall');
      assert.ok(script);
      const fence = store.keys.fence('bad');
      const enc = store.encode(base);
      const outside = `${fence.replace('{', '{x')}:w:1:0`;
      const keys = target.name.startsWith('cluster') ? [fence, `${fence}:x:1:0`] : [fence, outside];
      await assert.rejects(runScript(redis as never, script, keys, enc.args), {
        code: 'RF_SCRIPT_ERROR',
        message: /not a window key of KEYS\[1\]/,
      });
      const raw = (text: string) => ['s3', '0', '1', '-1', '', text];
      await assert.rejects(runScript(redis as never, script, [fence], raw('5,1,0;5,1,0;')), {
        code: 'RF_SCRIPT_ERROR',
        message: /offsets must increase/,
      });
      await assert.rejects(runScript(redis as never, script, [fence], raw('5,1,1;kq0,,;')), {
        code: 'RF_SCRIPT_ERROR',
        message: /effect 1 is malformed/,
      });
      // the window pair form: its target must be a window key of the call (KEYS[1] is the fence hash)
      await assert.rejects(runScript(redis as never, script, [fence], raw('5,1,Wax1,9,1,5;')), {
        code: 'RF_SCRIPT_ERROR',
        message: /record 1 effect 1 is malformed/,
      });
      await assert.rejects(runScript(redis as never, script, [fence], raw('5,1,Wqx2,9,1,5;')), {
        code: 'RF_SCRIPT_ERROR',
        message: /record 1 is malformed/,
      });
      await assert.rejects(runScript(redis as never, script, [fence], ['s2', '0', '1', '-1', '', '5,1,0;']), {
        code: 'RF_SCRIPT_ERROR',
        message: /expected protocol s3/,
      });
      assert.equal(await redis.exists(fence), 0, 'nothing written');
      assert.equal(await redis.exists(store.keys.window(fence, 1, 0)), 0, 'nothing written');
      assert.equal(await redis.exists(store.keys.fence('bad2')), 0, 'nothing written');
    });
  });
}
