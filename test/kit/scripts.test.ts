/** The kit's Lua files follow the fence's rules: headers naming every KEYS entry and the return; all load. */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadScripts } from '../../src/fence/script-loader.js';

const KIT = fileURLToPath(new URL('../../src/kit/', import.meta.url));
const DIRS = readdirSync(KIT)
  .map((c) => join(KIT, c, 'lua/'))
  .filter((d) => existsSync(d));

describe('kit scripts', () => {
  it('every component folder with Lua loads, and each header names its KEYS and its return', () => {
    assert.deepEqual(DIRS.map((d) => d.split('/').at(-3)).sort(), [
      'cache',
      'dedup',
      'idempotency',
      'invalidation',
      'lock',
      'projection',
      'ratelimit',
    ]);
    for (const dir of DIRS) {
      const scripts = loadScripts(dir);
      assert.ok(scripts.size > 0, dir);
      for (const file of readdirSync(dir).filter((f) => f.endsWith('.lua'))) {
        const text = readFileSync(join(dir, file), 'utf8');
        const header = text.slice(0, text.indexOf(']]'));
        const keys = Number(/-(\d+)\.lua$/.exec(file)?.[1]);
        for (let k = 1; k <= keys; k++)
          assert.match(header, new RegExp(`KEYS\\[${k}\\]`), `${file} lacks KEYS[${k}]`);
        assert.match(header, /Returns/, `${file} header lacks Returns`);
      }
    }
  });
});
