import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { RedfenceError } from '../../src/errors/index.js';
import { freePort, pollUntil } from '../../src/harness/index.js';
import { keySlot } from '../../src/keys/index.js';
import { KitKeys } from '../../src/keys/kit.js';
import { Cache } from '../../src/kit/index.js';
import { uniqueName } from '../helpers/env.js';
import { KIT_TARGETS, resultOf, startFixture, targetEnv } from './support.js';

async function metric(
  registry: Registry,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name);
  return (m?.values ?? [])
    .filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))
    .reduce((s, v) => s + v.value, 0);
}

/** A loader whose calls are counted and that returns when released. */
function gatedLoader<V>(value: V) {
  let release!: () => void;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  let calls = 0;
  let started!: () => void;
  const startedP = new Promise<void>((r) => {
    started = r;
  });
  return {
    load: async () => {
      calls++;
      started();
      await gate;
      return value;
    },
    release,
    started: startedP,
    get calls() {
      return calls;
    },
  };
}

for (const target of KIT_TARGETS) {
  describe(`cache on ${target.name}`, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    it('loads on a miss, serves hits from Redis, and counts both', async () => {
      const registry = new Registry();
      const cache = new Cache<{ n: number }>({
        redis,
        name: uniqueName('c'),
        ttlMs: 60_000,
        metrics: { registry },
      });
      after(() => cache.close());
      const key = { tenant: 'acme', id: 'quote-1' };
      let loads = 0;
      const load = async () => ({ n: ++loads });
      assert.deepEqual(await cache.get(key, load), { n: 1 });
      assert.deepEqual(await cache.get(key, load), { n: 1 });
      assert.deepEqual(
        await cache.get({ tenant: 'other', id: 'quote-1' }, load),
        { n: 2 },
        'tenants do not share',
      );
      assert.equal(loads, 2);
      assert.equal(await metric(registry, 'redfence_kit_cache_hits_total'), 1);
      assert.equal(await metric(registry, 'redfence_kit_cache_misses_total'), 2);
      await cache.invalidate(key);
      assert.deepEqual(await cache.get(key, load), { n: 3 });
    });

    it('keys: tenant-scoped, rf:-prefixed, one slot per entry, hashed ids under keyEncoding hash', async () => {
      const name = uniqueName('c');
      const cache = new Cache<string>({ redis, name, ttlMs: 60_000, keyEncoding: 'hash' });
      after(() => cache.close());
      const key = { tenant: 'acme', id: 'jane@example.com' };
      await cache.get(key, () => 'x');
      const base = new KitKeys('cache', name, { keyEncoding: 'hash' }).base(key);
      assert.ok(!base.includes('jane'), 'the personal id is hashed');
      assert.match(base, /^rf:t=acme:\{cache\.[^}]+:#[A-Za-z0-9_-]{43}\}$/);
      assert.equal(await redis.exists(`${base}:v`), 1, 'the entry is under the built key');
      assert.ok((await redis.pttl(`${base}:v`)) > 0, 'with a TTL');
      const slots = ['v', 'g', 'lease'].map((p) => keySlot(`${base}:${p}`));
      assert.ok(
        slots.every((s) => s === slots[0]),
        'one slot',
      );
    });

    it('spreads expiry: each entry gets ttlMs plus a random 0..jitterMs', async () => {
      const name = uniqueName('c');
      const cache = new Cache<number>({ redis, name, ttlMs: 60_000, jitterMs: 30_000 });
      after(() => cache.close());
      const keys = new KitKeys('cache', name);
      const ttls: number[] = [];
      for (let i = 0; i < 20; i++) {
        const key = { tenant: 'acme', id: `k${i}` };
        await cache.get(key, () => i);
        ttls.push(await redis.pttl(`${keys.base(key)}:v`));
      }
      assert.ok(
        ttls.every((t) => t > 59_000 && t <= 90_000),
        JSON.stringify(ttls),
      );
      assert.ok(Math.max(...ttls) - Math.min(...ttls) > 5_000, `spread ${JSON.stringify(ttls)}`);
    });

    it('a failed load gives its lease back at once; a dead loader’s lease is taken over when it runs out', async () => {
      const registry = new Registry();
      const name = uniqueName('c');
      const cache = new Cache<string>({ redis, name, ttlMs: 60_000, metrics: { registry } });
      after(() => cache.close());
      const key = { tenant: 'acme', id: 'f' };
      const base = new KitKeys('cache', name).base(key);
      await assert.rejects(
        cache.get(key, () => {
          throw new Error('source down');
        }),
        /source down/,
      );
      assert.equal(await redis.exists(`${base}:lease`), 0, 'lease released');
      assert.equal(await metric(registry, 'redfence_kit_cache_loads_total', { outcome: 'error' }), 1);
      // A loader elsewhere took the lease and died: this get waits for the lease, then loads itself.
      await redis.set(`${base}:lease`, 'a-dead-process', 'PX', 300);
      assert.equal(await cache.get(key, () => 'mine'), 'mine');
      assert.ok((await metric(registry, 'redfence_kit_cache_waits_total')) >= 1);
    });

    it('a load begun before an invalidation does not write its older value afterwards', async () => {
      const cache = new Cache<string>({ redis, name: uniqueName('c'), ttlMs: 60_000 });
      after(() => cache.close());
      const key = { tenant: 'acme', id: 'q' };
      const old = gatedLoader('v1');
      const reading = cache.get(key, old.load); // reads the source before the update ...
      await old.started;
      await cache.invalidate(key); // ... the update commits and its invalidation runs ...
      old.release(); // ... then the old read finishes and tries to write v1.
      assert.equal(await reading, 'v1', 'the caller itself gets what it loaded');
      assert.equal(await cache.get(key, () => 'v2'), 'v2', 'the next read loads again: v1 was not cached');
    });

    it('without the generation check the same race caches the old value (the check is what closes it)', async () => {
      const cache = new Cache<string>({
        redis,
        name: uniqueName('c'),
        ttlMs: 60_000,
        unsafeSkipGenerationCheck: true,
      });
      after(() => cache.close());
      const key = { tenant: 'acme', id: 'q' };
      const old = gatedLoader('v1');
      const reading = cache.get(key, old.load);
      await old.started;
      await cache.invalidate(key);
      old.release();
      await reading;
      assert.equal(
        await cache.get(key, () => 'v2'),
        'v1',
        'the stale v1 was re-populated after the invalidation',
      );
    });

    it('serves stale within staleWhileRevalidateMs while one caller refreshes it', async () => {
      const registry = new Registry();
      const cache = new Cache<number>({
        redis,
        name: uniqueName('c'),
        ttlMs: 60_000,
        staleWhileRevalidateMs: 60_000,
        earlyRefreshBeta: 0,
        metrics: { registry },
      });
      after(() => cache.close());
      const key = { tenant: 'acme', id: 's' };
      assert.equal(await cache.get(key, () => 1, { ttlMs: 50 }), 1); // this entry is fresh for 50 ms only
      const next = gatedLoader(2);
      // Past the fresh window the old value keeps coming back at once while one refresh runs.
      await pollUntil(
        'a stale answer',
        async () => (await cache.get(key, next.load)) === 1 && next.calls === 1,
        10_000,
        20,
      );
      for (let i = 0; i < 10; i++) assert.equal(await cache.get(key, next.load), 1);
      assert.equal(next.calls, 1, 'one refresh for all the stale reads');
      assert.ok((await metric(registry, 'redfence_kit_cache_stale_served_total')) >= 11);
      next.release();
      await pollUntil('the refreshed value', async () => (await cache.get(key, next.load)) === 2, 10_000, 20);
      assert.equal(next.calls, 1);
    });

    it('refreshes early, before expiry, when the load is slow relative to the ttl (XFetch)', async () => {
      const registry = new Registry();
      const cache = new Cache<number>({
        redis,
        name: uniqueName('c'),
        ttlMs: 400,
        earlyRefreshBeta: 50,
        metrics: { registry },
      });
      after(() => cache.close());
      const key = { tenant: 'acme', id: 'e' };
      let n = 0;
      const slow = async () => {
        await new Promise((r) => setTimeout(r, 30)); // the load takes 30 ms: part of the workload
        return ++n;
      };
      await cache.get(key, slow);
      await pollUntil(
        'an early refresh',
        async () => {
          await cache.get(key, slow);
          return (await metric(registry, 'redfence_kit_cache_early_refreshes_total')) >= 1;
        },
        10_000,
        10,
      );
      assert.equal(
        await metric(registry, 'redfence_kit_cache_misses_total'),
        1,
        'never a miss: refreshed while fresh',
      );
    });

    it('1,000 concurrent misses across 4 processes make exactly 1 loader call', async () => {
      const name = uniqueName('c');
      const go = `rf-test:{${name}}:go`;
      const loads = `rf-test:{${name}}:loads`;
      const env = {
        ...targetEnv(target),
        CACHE_NAME: name,
        ID: 'hot',
        GETS: '250',
        GO: go,
        LOADS: loads,
        LOAD_MS: '500',
      };
      const children = await Promise.all(
        [1, 2, 3, 4].map((i) => startFixture(`cache-${i}`, 'cache-child', env)),
      );
      after(() => Promise.all(children.map((c) => c.kill())));
      await redis.rpush(go, '1', '1', '1', '1');
      const results = await Promise.all(children.map((c) => resultOf(c)));
      await redis.del(go, loads);
      assert.equal(
        results.reduce((s, r) => s + (r.loads as number), 0),
        1,
        JSON.stringify(results),
      );
      assert.ok(results.every((r) => r.gets === 250 && r.allLoaded === true));
      // The 3 processes that did not load waited for a message, not by polling Redis.
      for (const r of results) {
        const m = r.metrics as Record<string, number>;
        assert.ok((m.redfence_kit_cache_waits_total ?? 0) <= 3, `waits ${JSON.stringify(m)}`);
        assert.equal(m.redfence_kit_cache_coalesced_total, 249);
      }
    });
  });
}

describe('cache with Redis down', () => {
  it('fail-closed throws RF_REDIS_UNAVAILABLE; fail-open calls the loader; invalidate always throws', async () => {
    const port = await freePort(); // nothing listens there
    const dead = new Redis({
      port,
      host: '127.0.0.1',
      maxRetriesPerRequest: 0,
      retryStrategy: () => 50,
      lazyConnect: false,
    });
    dead.on('error', () => {});
    after(() => dead.disconnect());
    const policy = { timeoutMs: 500, retries: 1, retryDelayMs: 10 };
    const closed = new Cache<string>({ redis: dead, name: 'down', ttlMs: 1000, redisPolicy: policy });
    const open = new Cache<string>({
      redis: dead,
      name: 'down',
      ttlMs: 1000,
      redisPolicy: policy,
      onRedisDown: 'fail-open',
    });
    after(() => Promise.all([closed.close(), open.close()]));
    const key = { tenant: 'acme', id: 'k' };
    await assert.rejects(
      closed.get(key, () => 'x'),
      (e) => RedfenceError.is(e, 'RF_REDIS_UNAVAILABLE'),
    );
    assert.equal(await open.get(key, () => 'from-source'), 'from-source');
    await assert.rejects(open.invalidate(key), (e) => RedfenceError.is(e, 'RF_REDIS_UNAVAILABLE'));
    assert.equal(
      await metric(open.registry as Registry, 'redfence_kit_redis_errors_total', {
        component: 'cache',
        policy: 'open',
      }),
      1,
    );
  });
});

describe('cache options', () => {
  const redis = { evalshaBuffer: async () => 0, evalBuffer: async () => 0, duplicate: () => ({}) } as never;
  it('are checked before any Redis call, naming the option', () => {
    const bad: Array<[Record<string, unknown>, RegExp]> = [
      [{ name: 'c', ttlMs: 10, ttl: 5 }, /unknown option "ttl"/],
      [{ name: 'c', ttlMs: -1 }, /"ttlMs"/],
      [{ name: 'c', ttlMs: 10, jitterMs: 'x' }, /"jitterMs"/],
      [{ name: 'c b', ttlMs: 10 }, /"name"/],
      [{ name: 'c', ttlMs: 10, onRedisDown: 'maybe' }, /"onRedisDown"/],
      [{ name: 'c', ttlMs: 10, redisPolicy: { retries: -1 } }, /"redisPolicy.retries"/],
    ];
    for (const [o, re] of bad) {
      assert.throws(
        () => new Cache({ redis, ...o } as never),
        (e) => RedfenceError.is(e, 'RF_INVALID_OPTIONS') && re.test((e as Error).message),
        JSON.stringify(o),
      );
    }
  });
  it('a ttl is required, here or per call', async () => {
    const cache = new Cache({ redis, name: 'c' });
    await assert.rejects(
      cache.get({ tenant: 't', id: 'k' }, () => 1),
      (e) => RedfenceError.is(e, 'RF_INVALID_OPTIONS') && /"ttlMs" \(required\)/.test((e as Error).message),
    );
    await assert.rejects(
      cache.get({ tenant: '', id: 'k' }, () => 1, { ttlMs: 5 }),
      /tenant/,
    );
  });
});
