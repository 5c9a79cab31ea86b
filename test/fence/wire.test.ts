/**
 * The apply scripts' own argument checks (protocol 6, see src/fence/lua/includes/applyCore.lua):
 * malformed arguments that bypass the codec are an RF_ARGS / RF_PROTOCOL error reply and nothing is
 * written, for the one-key and the many-key scripts alike.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { asFenceRedis, encodeApply, Fence, type FenceRedis, loadScripts } from '../../src/fence/index.js';
import { runScript } from '../../src/fence/script-runner.js';
import { standalone, uniqueName } from '../helpers/env.js';

const scripts = loadScripts();
const script = (name: string) => {
  const s = scripts.get(name);
  assert.ok(s, name);
  return s;
};

describe('apply script argument checks', () => {
  const redis = standalone();
  after(() => redis.disconnect());
  const port = asFenceRedis(redis) as FenceRedis;
  const fence = new Fence({ redis, store: uniqueName('wire').replace(/-/g, '_'), mode: 'cluster' });
  const key = fence.keys.state('k');
  const good = encodeApply(
    {
      topic: 't',
      partition: 0,
      epoch: 1,
      committedOffset: -1,
      key: 'k',
      records: [
        { offset: 5, operation: { op: 'set', value: 'a,b;c' }, output: { value: 'x' } },
        { offset: 6, operation: { op: 'set', value: '1;2,' }, output: 'state' },
      ],
    },
    0,
  );
  const header = good.slice(0, 6);
  const cases: Array<[string, unknown[]]> = [
    ['protocol', ['3', ...good.slice(1)]],
    ['protocol 5 (a record count first)', ['5', ...header.slice(1), '1', '5,a0,1;']],
    ['empty record text', [...header, '']],
    ['missing record text', header],
    ['non-digit offset', [...header, 'x5,s0,;', 'v']],
    ['unknown op letter', [...header, '5,q0,1;', 'v']],
    ['output mode', [...header, '5,a4,1;']],
    ['missing set value', [...header, '5,s0,;']],
    ['missing output bytes', [...header, '5,a1,1;']],
    ['text after the last record', [...header, '5,a0,1;6,a0,1']],
    ['text without its last separator', [...header, '5,a0,1']],
    ['extra argument', [...header, '5,a0,1;', 'stray']],
  ];
  for (const [what, args] of cases) {
    it(`rejects a malformed ${what} and writes nothing`, async () => {
      for (const name of ['applyRecords', 'applyMany'])
        await assert.rejects(
          runScript(port, script(name), [key], args as string[]),
          { code: 'RF_SCRIPT_ERROR', message: /RF_(ARGS|PROTOCOL)/ },
          `${name}: ${what}`,
        );
      assert.equal(await redis.exists(key), 0);
    });
  }

  it('accepts the codec form, with separators inside binary values', async () => {
    const reply = await runScript(port, script('applyRecords'), [key], good);
    assert.equal(String((reply as unknown[])[0]), 'AA');
    const state = await fence.read('k');
    assert.equal(state?.value?.toString(), '1;2,');
    assert.deepEqual(
      state?.pending.map((p) => [p.offset, p.kind === 'output' ? p.output.value?.toString() : p.reason]),
      [
        [5, 'x'],
        [6, '1;2,'],
      ],
    );
    await redis.del(key);
  });
});
