import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { RedfenceError } from '../../src/errors/index.js';
import { freePort } from '../../src/harness/index.js';
import { KitKeys } from '../../src/keys/kit.js';
import { Projection } from '../../src/kit/index.js';
import { uniqueName } from '../helpers/env.js';
import { KIT_TARGETS } from './support.js';

async function counter(registry: Registry, name: string, reason?: string): Promise<number> {
  const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name);
  return (m?.values ?? [])
    .filter((v) => reason === undefined || v.labels.reason === reason)
    .reduce((s, v) => s + v.value, 0);
}

for (const target of KIT_TARGETS) {
  describe(`projection on ${target.name}`, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    it('out-of-order, duplicate and replayed events never overwrite a newer version; stale ones are counted', async () => {
      const registry = new Registry();
      const p = new Projection<{ status: string; v: number }>({
        redis,
        name: uniqueName('p'),
        ttlMs: 60_000,
        metrics: { registry },
      });
      const key = { tenant: 'acme', id: 'quote-9' };
      const order = [3, 1, 2, 5, 4, 5];
      const results = [];
      for (const v of order) results.push(await p.update(key, v, { status: `s${v}`, v }));
      assert.deepEqual(
        results.map((r) => (r.written ? 'w' : r.reason)),
        ['w', 'older', 'older', 'w', 'older', 'equal'],
      );
      assert.deepEqual(await p.get(key), { version: 5n, value: { status: 's5', v: 5 } });
      assert.equal(await counter(registry, 'redfence_kit_projection_stale_total', 'older'), 3);
      assert.equal(await counter(registry, 'redfence_kit_projection_stale_total', 'equal'), 1);
      assert.equal(await counter(registry, 'redfence_kit_projection_writes_total'), 2);
      // A full replay from the start changes nothing.
      for (const v of [1, 2, 3, 4, 5])
        assert.equal((await p.update(key, v, { status: 'replay', v })).written, false);
      assert.equal((await p.get(key))?.value.status, 's5');
    });

    it('concurrent updates in any order leave the highest version', async () => {
      const p = new Projection<number>({ redis, name: uniqueName('p'), ttlMs: 60_000 });
      const key = { tenant: 'acme', id: 'hot' };
      const versions = Array.from({ length: 200 }, (_, i) => i + 1).sort(() => Math.random() - 0.5);
      await Promise.all(versions.map((v) => p.update(key, v, v)));
      assert.deepEqual(await p.get(key), { version: 200n, value: 200 });
    });

    it('remove leaves a tombstone: an older update cannot bring the entity back', async () => {
      const p = new Projection<string>({ redis, name: uniqueName('p'), ttlMs: 60_000 });
      const key = { tenant: 'acme', id: 'gone' };
      await p.update(key, 4, 'live');
      assert.equal((await p.remove(key, 6)).written, true);
      assert.equal(await p.get(key), undefined);
      assert.deepEqual(await p.update(key, 5, 'late'), {
        written: false,
        reason: 'older',
        storedVersion: 6n,
      });
      assert.equal(await p.get(key), undefined);
      assert.equal((await p.update(key, 7, 'recreated')).written, true);
      assert.equal((await p.get(key))?.value, 'recreated');
    });

    it('versions past 2^53 compare exactly; every entry has a TTL with jitter', async () => {
      const name = uniqueName('p');
      const p = new Projection<string>({ redis, name, ttlMs: 60_000, jitterMs: 5_000 });
      const key = { tenant: 'acme', id: 'big' };
      const big = 2n ** 60n;
      assert.equal((await p.update(key, big + 1n, 'b')).written, true);
      assert.deepEqual(await p.update(key, big, 'a'), {
        written: false,
        reason: 'older',
        storedVersion: big + 1n,
      });
      assert.deepEqual(await p.update(key, big + 1n, 'a'), {
        written: false,
        reason: 'equal',
        storedVersion: big + 1n,
      });
      const [entry] = new KitKeys('projection', name).parts(key, 'p');
      const pttl = await redis.pttl(entry as string);
      assert.ok(pttl > 55_000 && pttl <= 65_000, `pttl ${pttl}`);
    });

    it('an event without a version is refused before any Redis call', async () => {
      const p = new Projection<string>({ redis, name: uniqueName('p'), ttlMs: 60_000 });
      const key = { tenant: 'acme', id: 'x' };
      for (const bad of [undefined, -1, 1.5, Number.NaN, 2n ** 64n]) {
        await assert.rejects(p.update(key, bad as never, 'v'), (e) =>
          RedfenceError.is(e, 'RF_INVALID_ARGUMENT'),
        );
      }
      assert.equal(await p.get(key), undefined);
    });
  });
}

describe('projection with Redis down', () => {
  it('fail-closed throws RF_REDIS_UNAVAILABLE (do not commit); fail-open answers redis-down', async () => {
    const port = await freePort();
    const dead = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, retryStrategy: () => 50 });
    dead.on('error', () => {});
    after(() => dead.disconnect());
    const redisPolicy = { timeoutMs: 300, retries: 1, retryDelayMs: 10 };
    const key = { tenant: 'acme', id: 'k' };
    const closed = new Projection({ redis: dead, name: 'down', ttlMs: 1000, redisPolicy });
    await assert.rejects(closed.update(key, 1, 'v'), (e) => RedfenceError.is(e, 'RF_REDIS_UNAVAILABLE'));
    const open = new Projection({
      redis: dead,
      name: 'down',
      ttlMs: 1000,
      redisPolicy,
      onRedisDown: 'fail-open',
    });
    assert.deepEqual(await open.update(key, 1, 'v'), { written: false, reason: 'redis-down' });
  });

  it('options: a TTL is required; unknown options are named', () => {
    const redis = { evalshaBuffer: async () => 0, evalBuffer: async () => 0 } as never;
    assert.throws(() => new Projection({ redis, name: 'p' } as never), /"ttlMs" \(required\)/);
    assert.throws(
      () => new Projection({ redis, name: 'p', ttlMs: 5, ttl: 5 } as never),
      /unknown option "ttl"/,
    );
  });
});
