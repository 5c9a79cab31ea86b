/** The idempotency and dedup Lua scripts, run directly against a real Redis; their headers follow the kit's rules. */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadScripts } from '../../src/fence/script-loader.js';
import { runScript, type ScriptRedis } from '../../src/fence/script-runner.js';
import { standalone, uniqueName } from '../helpers/env.js';

const dir = (c: string) => fileURLToPath(new URL(`../../src/kit/${c}/lua/`, import.meta.url));
const idem = loadScripts(dir('idempotency'));
const dedup = loadScripts(dir('dedup'));

const str = (v: unknown): unknown => (Buffer.isBuffer(v) ? v.toString() : Array.isArray(v) ? v.map(str) : v);

describe('idempotency and dedup scripts', () => {
  const redis = standalone();
  after(() => redis.disconnect());
  const run = async (set: typeof idem, name: string, keys: string[], args: (string | number)[]) =>
    str(await runScript(redis as unknown as ScriptRedis, set.get(name) as never, keys, args));

  it('headers name every KEYS entry and the return', () => {
    for (const c of ['idempotency', 'dedup']) {
      for (const f of readdirSync(dir(c)).filter((x) => x.endsWith('.lua'))) {
        const text = readFileSync(join(dir(c), f), 'utf8');
        const header = text.slice(0, text.indexOf(']]'));
        assert.match(header, /KEYS\[1\]/, f);
        assert.match(header, /Returns/, f);
      }
    }
    assert.deepEqual([...idem.keys()].sort(), ['idemClaim', 'idemComplete', 'idemRelease']);
    assert.deepEqual([...dedup.keys()].sort(), ['dedupForget', 'dedupSeen']);
  });

  it('idemClaim / idemComplete / idemRelease: one claim, retry-safe, a stored response never replaced', async () => {
    const k = `rf:t=acme:{idempotency.${uniqueName('s')}:k}:r`;
    after(() => redis.del(k));
    assert.deepEqual(await run(idem, 'idemClaim', [k], ['fp', 10_000, 'A']), ['claimed']);
    assert.deepEqual(await run(idem, 'idemClaim', [k], ['fp', 10_000, 'A']), ['claimed'], 'a retry of A');
    assert.deepEqual(await run(idem, 'idemClaim', [k], ['fp', 10_000, 'B']), ['inflight']);
    assert.deepEqual(await run(idem, 'idemClaim', [k], ['other', 10_000, 'B']), ['mismatch']);
    assert.ok((await redis.pttl(k)) > 0 && (await redis.pttl(k)) <= 10_000);
    assert.equal(await run(idem, 'idemComplete', [k], ['fp', 'resp-B', 60_000, 'B', '0']), 0, 'not B claim');
    assert.equal(await run(idem, 'idemRelease', [k], ['B']), 0);
    assert.equal(await run(idem, 'idemComplete', [k], ['fp', 'resp-A', 60_000, 'A', '0']), 1);
    assert.equal(await run(idem, 'idemComplete', [k], ['fp', 'resp-X', 60_000, 'A', '1']), 0, 'done stays');
    assert.deepEqual(await run(idem, 'idemClaim', [k], ['fp', 10_000, 'C']), ['done', 'resp-A']);
    assert.equal(await run(idem, 'idemRelease', [k], ['A']), 0, 'a done record is not released');
    assert.ok((await redis.pttl(k)) > 10_000);

    const k2 = `${k}2`;
    after(() => redis.del(k2));
    await run(idem, 'idemClaim', [k2], ['fp', 10_000, 'A']);
    assert.equal(await run(idem, 'idemComplete', [k2], ['fp', 'from-pg', 60_000, 'Z', '1']), 1, 'forced');
    await redis.del(k2);
    await run(idem, 'idemClaim', [k2], ['fp', 10_000, 'A']);
    assert.equal(await run(idem, 'idemRelease', [k2], ['A']), 1);
    assert.equal(await redis.exists(k2), 0);
  });

  it('dedupSeen is retry-safe per token; dedupForget removes the mark', async () => {
    const k = `rf:t=acme:{dedup.${uniqueName('s')}:e}:m`;
    after(() => redis.del(k));
    assert.equal(await run(dedup, 'dedupSeen', [k], [60_000, 't1']), 0);
    assert.equal(await run(dedup, 'dedupSeen', [k], [60_000, 't1']), 0, 'the same sighting retried');
    assert.equal(await run(dedup, 'dedupSeen', [k], [60_000, 't2']), 1);
    assert.equal(await run(dedup, 'dedupForget', [k], []), 1);
    assert.equal(await run(dedup, 'dedupSeen', [k], [60_000, 't3']), 0);
  });
});
