import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { LUA_DIR, loadScripts } from '../../src/fence/index.js';

function tempLua(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'rf-lua-'));
  mkdirSync(join(dir, 'includes'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return `${dir}/`;
}

describe('script loader', () => {
  it('loads every script with its key count, a versioned id and a banner', () => {
    const scripts = loadScripts(LUA_DIR, '9.9.9');
    assert.deepEqual([...scripts.keys()].sort(), [
      'acquireEpoch',
      'applyMany',
      'applyManyStrict',
      'applyRecords',
      'applyRecordsStrict',
      'prunePendingMany',
      'sweepIndex',
    ]);
    const apply = scripts.get('applyRecordsStrict');
    assert.equal(apply?.numberOfKeys, 3);
    assert.equal(apply?.id, 'applyRecordsStrict@9.9.9');
    assert.ok(apply?.source.startsWith('-- redfence script applyRecordsStrict@9.9.9\n'));
    assert.ok(apply?.source.includes('local function rf_apply'), 'include resolved');
    assert.equal(scripts.get('applyManyStrict')?.numberOfKeys, -1, '-N: variadic');
    assert.ok(scripts.get('applyManyStrict')?.source.includes('local function rf_apply_many'));
    assert.notEqual(loadScripts(LUA_DIR, '1.0.0').get('applyRecords')?.sha, scripts.get('applyRecords')?.sha);
  });

  it('every script header names each of its KEYS and its return', () => {
    for (const file of readdirSync(LUA_DIR).filter((f) => f.endsWith('.lua'))) {
      const text = readFileSync(join(LUA_DIR, file), 'utf8');
      const header = text.slice(0, text.indexOf(']]'));
      const keys = Number(/-(\d+)\.lua$/.exec(file)?.[1]);
      for (let k = 1; k <= keys; k++)
        assert.match(header, new RegExp(`KEYS\\[${k}\\]`), `${file} header lacks KEYS[${k}]`);
      assert.match(header, /Returns/, `${file} header lacks Returns`);
    }
  });

  it('inlines an include once and rejects cycles and missing includes', () => {
    const ok = tempLua({
      'main-0.lua': '--@include "a"\n--@include "b"\nreturn f()',
      'includes/a.lua': 'local function g() return 1 end',
      'includes/b.lua': '--@include "a"\nlocal function f() return g() end',
    });
    const src = loadScripts(ok).get('main')?.source ?? '';
    assert.equal(src.split('local function g()').length - 1, 1);

    const cyc = tempLua({
      'main-0.lua': '--@include "a"',
      'includes/a.lua': '--@include "b"',
      'includes/b.lua': '--@include "a"',
    });
    assert.throws(() => loadScripts(cyc), {
      code: 'RF_SCRIPT_INCLUDE_CYCLE',
      message: /main -> a -> b -> a/,
    });

    const missing = tempLua({ 'main-0.lua': '--@include "nope"' });
    assert.throws(() => loadScripts(missing), { code: 'RF_SCRIPT_NOT_FOUND', message: /nope/ });
  });
});
