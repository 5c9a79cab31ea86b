/**
 * The key call's codec without Redis: the store's script headers name every KEYS and ARGV entry and the
 * reply (as test/fence checks the fence's), the encoding of a call, and replies of an unknown shape
 * refused as RF_BAD_REPLY.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { encodeKeyCall } from '../../src/store/codec.js';
import { StoreKeys } from '../../src/store/keys.js';
import { decodeKeyCall } from '../../src/store/reply.js';
import { STORE_LUA_DIR } from '../../src/store/store.js';

describe('key call codec', () => {
  it('every store script header names KEYS, ARGV and its return', () => {
    const files = readdirSync(STORE_LUA_DIR).filter((f) => f.endsWith('.lua'));
    const parts: Record<string, string[]> = {
      'keyCall-N.lua': ['ARGV[2]', 'ARGV[3]', 'ARGV[4]', 'ARGV[5]', 'ARGV[6]', 'ARGV[7..]'],
      'keyCallMany-N.lua': ['ARGV[2]', 'ARGV[3]', 'ARGV[4]', 'ARGV[5]', 'ARGV[6..]'],
      'layout-1.lua': ['ARGV[2]'],
      'readKey-N.lua': ['KEYS[2..]', 'ARGV[2..]'],
    };
    for (const f of ['keyCall-N.lua', 'keyCallMany-N.lua']) parts[f]?.unshift('KEYS[2..]');
    assert.deepEqual(files, Object.keys(parts));
    for (const file of files) {
      const text = readFileSync(join(STORE_LUA_DIR, file), 'utf8');
      const header = text.slice(0, text.indexOf(']]'));
      for (const part of ['KEYS[1]', 'ARGV[1]', ...(parts[file] ?? []), 'Returns'])
        assert.ok(header.includes(part), `${file} header lacks ${part}`);
    }
  });

  const names = new StoreKeys({ app: 'app' });
  const call = {
    partition: 2,
    epoch: 7,
    committedOffset: 40,
    key: 'c1',
    records: [
      {
        offset: 41,
        emit: 1 as const,
        effects: [
          { store: 0, kind: 'kv' as const, op: { op: 'set' as const, value: 'v' } },
          { store: 1, kind: 'window' as const, start: 60, expireAt: 999, op: { op: 'add' as const, by: 3n } },
        ],
      },
      { offset: 44, emit: 0 as const, effects: [{ store: 1, kind: 'final' as const, start: 60 }] },
    ],
  };

  it('encodes the keys of one slot, one record text and the set values', () => {
    const e = encodeKeyCall(names, call);
    assert.deepEqual(e.keys, ['rf:{app:c1}', 'rf:{app:c1}:w:1:60']);
    assert.deepEqual(e.args, ['s3', '2', '7', '40', '', '41,1,2;ks0,,;wa2,999,3;44,0,1;f-2,,;', 'v']);
    assert.deepEqual(e.offsets, [41, 44]);
  });

  it("encodes a window's time field in the value's key: kind t, a final's operand t", () => {
    const e = encodeKeyCall(names, {
      ...call,
      records: [
        {
          offset: 41,
          emit: 1 as const,
          effects: [
            {
              store: 1,
              kind: 'window' as const,
              start: 60,
              expireAt: 999,
              op: { op: 'add' as const, by: 1 },
            },
            {
              store: 1,
              kind: 'window' as const,
              field: 'time' as const,
              start: 60,
              expireAt: 999,
              op: { op: 'max' as const, value: 5 },
            },
            { store: 1, kind: 'final' as const, start: 60, field: 'time' as const },
          ],
        },
      ],
    });
    assert.deepEqual(e.keys, ['rf:{app:c1}', 'rf:{app:c1}:w:1:60'], 'one window key');
    assert.equal(e.args[5], '41,1,3;wa2,999,1;tx2,999,5;f-2,,t;');
    const field = (f: unknown) => ({
      ...call,
      records: [{ offset: 1, emit: 0 as const, effects: [{ store: 1, kind: 'final', start: 0, field: f }] }],
    });
    assert.throws(() => encodeKeyCall(names, field('t') as never), {
      code: 'RF_INVALID_ARGUMENT',
      message: /records\[0\]\.effects\[0\]\.field/,
    });
  });

  it("sends a record of exactly one window's value and time with one expireAt as one W text", () => {
    const pair = (timeExpireAt: number, value: unknown = 'v') => ({
      ...call,
      records: [
        {
          offset: 41,
          emit: 1 as const,
          effects: [
            {
              store: 1,
              kind: 'window' as const,
              start: 60,
              expireAt: 999,
              op: { op: 'set' as const, value },
            },
            {
              store: 1,
              kind: 'window' as const,
              field: 'time' as const,
              start: 60,
              expireAt: timeExpireAt,
              op: { op: 'max' as const, value: 5 },
            },
          ],
        },
      ],
    });
    const e = encodeKeyCall(names, pair(999) as never);
    assert.deepEqual(e.keys, ['rf:{app:c1}', 'rf:{app:c1}:w:1:60']);
    assert.deepEqual(e.args.slice(5), ['41,1,Wsx2,999,,5;', 'v']);
    assert.deepEqual(e.effects, [2], 'two effects, two results');
    // another expireAt: the general form
    assert.equal(encodeKeyCall(names, pair(1000) as never).args[5], '41,1,2;ws2,999,;tx2,1000,5;');
    // checked as two effects: the error names the first one's op
    assert.throws(() => encodeKeyCall(names, pair(999, 7) as never), {
      code: 'RF_INVALID_ARGUMENT',
      message: /records\[0\]\.effects\[0\]\.op\.value/,
    });
  });

  it('refuses replies of an unknown shape', () => {
    const e = encodeKeyCall(names, call);
    const bad = [
      null,
      ['A'],
      ['AA', -1, -1],
      ['AQ', -1, -1, 'r-1:x'],
      ['AA', -1, -1, 'r-', 'x'],
      ['AA', -1, -1, 'r9:x'],
    ];
    for (const reply of bad)
      assert.throws(() => decodeKeyCall(e, reply), { code: 'RF_BAD_REPLY' }, JSON.stringify(reply));
    assert.deepEqual(decodeKeyCall(e, [Buffer.from('AA'), -1, -1, Buffer.from('r1:v1:3')]), [
      { verdict: 'APPLY', offset: 41, results: [Buffer.from('v'), Buffer.from('3')] },
      { verdict: 'APPLY', offset: 44 },
    ]);
  });
});
