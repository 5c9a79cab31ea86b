/**
 * The fenced lock's eviction-policy check, on private Redis servers: one with allkeys-lru refuses the
 * first acquisition (and every later one) with RF_KIT_EVICTION_POLICY and writes no counter; one with
 * volatile-lru (evicts only keys with a TTL, the counters have none) and one changed to noeviction at
 * run time take locks.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { RedfenceError } from '../../src/errors/index.js';
import { RedisServer } from '../../src/harness/index.js';
import { LockManager } from '../../src/kit/index.js';

async function server(policy: string): Promise<Redis> {
  const s = new RedisServer({ args: ['--maxmemory', '64mb', '--maxmemory-policy', policy] });
  await s.start();
  after(() => s.stop());
  const redis = new Redis(s.url, { maxRetriesPerRequest: 1 });
  after(() => redis.disconnect());
  return redis;
}

describe('fenced lock: the eviction policy of its Redis', { timeout: 30_000 }, () => {
  it('refuses a Redis that may evict the fencing counters (allkeys-lru), before writing any', async () => {
    const redis = await server('allkeys-lru');
    const locks = new LockManager({ redis, name: 'evict', ttlMs: 5000, autoExtend: false });
    const refused = (e: unknown) => {
      assert.ok(RedfenceError.is(e, 'RF_KIT_EVICTION_POLICY'), String(e));
      assert.match((e as Error).message, /allkeys-lru/);
      assert.equal((e as RedfenceError).details?.policy, 'allkeys-lru');
      return true;
    };
    await assert.rejects(locks.acquire({ tenant: 'acme', id: 'a' }), refused);
    await assert.rejects(locks.tryAcquire({ tenant: 'acme', id: 'b' }), refused, 'refused again');
    await assert.rejects(locks.check(), refused);
    assert.equal(await redis.dbsize(), 0, 'no counter or owner key written');
  });

  it('takes locks on volatile-lru and on noeviction (set after the server started)', async () => {
    const volatile = await server('volatile-lru');
    const a = new LockManager({ redis: volatile, name: 'evict', ttlMs: 5000, autoExtend: false });
    await a.check();
    const la = await a.acquire({ tenant: 'acme', id: 'a' });
    assert.ok(la.fencingToken >= 1);
    await la.release();

    const other = await server('allkeys-lfu');
    await other.config('SET', 'maxmemory-policy', 'noeviction');
    const b = new LockManager({ redis: other, name: 'evict', ttlMs: 5000, autoExtend: false });
    const lb = await b.acquire({ tenant: 'acme', id: 'a' });
    assert.ok(lb.fencingToken >= 1);
    await lb.release();
  });
});
