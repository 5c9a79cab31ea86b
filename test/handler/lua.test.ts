/** The handler's Lua scripts: headers name every KEYS entry, and each script run directly against the real Redis. */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { OnceStore } from '../../src/handler/once.js';
import { KeySpace } from '../../src/index.js';
import { REDIS_URL, uniqueName } from '../helpers/env.js';

const LUA = fileURLToPath(new URL('../../src/handler/lua/', import.meta.url));

describe('handler Lua scripts', () => {
  it('every header names each of its KEYS and its return', () => {
    const files = readdirSync(LUA).filter((f) => f.endsWith('.lua'));
    assert.deepEqual(files.sort(), [
      'onceCheck-2.lua',
      'onceMark-2.lua',
      'retryKeyBlock-2.lua',
      'retryKeyCheck-2.lua',
      'retryKeyDone-2.lua',
    ]);
    for (const file of files) {
      const text = readFileSync(join(LUA, file), 'utf8');
      const header = text.slice(0, text.indexOf(']]'));
      for (let k = 1; k <= 2; k++) assert.match(header, new RegExp(`KEYS\\[${k}\\]`), file);
      assert.match(header, /Returns/, file);
    }
  });

  it('onceCheck / onceMark: new, marked, done; a newer epoch refuses both and writes nothing', async (t) => {
    const name = uniqueName('lua').replace(/-/g, '_');
    const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 2 });
    t.after(async () => {
      const keys = await redis.keys(`rf:{${name}:*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    });
    const keys = new KeySpace({ store: name });
    const once = new OnceStore(redis, keys, 60_000);
    await redis.set(keys.epoch('t', 0), '3');
    assert.equal(await once.check('t', 0, 3, 'a'), 'new');
    assert.equal(await once.mark('t', 0, 3, 'a'), true);
    assert.equal(await once.check('t', 0, 3, 'a'), 'done');
    assert.equal(await redis.get(keys.once('t', 0, 'a')), '3', 'the marker holds the marking epoch');
    const ttl = await redis.pttl(keys.once('t', 0, 'a'));
    assert.ok(ttl > 0 && ttl <= 60_000);
    // a zombie with epoch 2: fenced before and instead of the mark
    assert.equal(await once.check('t', 0, 2, 'b'), 'fenced');
    assert.equal(await once.mark('t', 0, 2, 'b'), false);
    assert.equal(await redis.exists(keys.once('t', 0, 'b')), 0);
    // an id that is not safe raw (braces) is stored hashed, in the partition's slot
    const odd = keys.once('t', 0, '{x}');
    assert.match(odd, /^rf:\{[^}]+:t:0\}:once:#/);
  });
});
