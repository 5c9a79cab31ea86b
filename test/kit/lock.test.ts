import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { RedfenceError } from '../../src/errors/index.js';
import { pollUntil, TcpProxy } from '../../src/harness/index.js';
import { KitKeys } from '../../src/keys/kit.js';
import { checkFencingToken, FencedStore, type LockLostReason, LockManager } from '../../src/kit/index.js';
import { REDIS_URL, uniqueName } from '../helpers/env.js';
import { KIT_TARGETS, resultOf, startFixture, targetEnv } from './support.js';

for (const target of KIT_TARGETS) {
  describe(`fenced lock on ${target.name}`, () => {
    const redis = target.connect();
    after(() => redis.disconnect());
    const key = { tenant: 'acme', id: 'order-1' };
    /** Fencing counters never expire: each test deletes the ones it made. */
    const forget = (name: string, id = key.id): void => {
      after(() => redis.del(...new KitKeys('lock', name).parts({ tenant: 'acme', id }, 'fence', 'data')));
    };

    it('one holder at a time; every acquisition a larger fencing number; release only by the token', async () => {
      const name = uniqueName('l');
      const locks = new LockManager({ redis, name, ttlMs: 10_000, autoExtend: false });
      forget(name);
      const a = await locks.acquire(key);
      assert.equal(await locks.tryAcquire(key), null);
      await assert.rejects(locks.acquire(key, { waitMs: 100 }), (e) =>
        RedfenceError.is(e, 'RF_KIT_LOCK_TIMEOUT'),
      );
      assert.equal(await a.release(), true);
      assert.equal(a.signal.aborted, true);
      const b = await locks.acquire(key);
      assert.ok(b.fencingToken > a.fencingToken, `${b.fencingToken} > ${a.fencingToken}`);
      assert.notEqual(b.token, a.token);
      assert.equal(await a.release(), true, 'a second release of a is a no-op, and does not free b');
      assert.equal(await locks.tryAcquire(key), null, 'b still holds it');
      await b.release();
    });

    it('a holder whose lock expired cannot release the new owner’s lock', async () => {
      const locks = new LockManager({ redis, name: uniqueName('l'), ttlMs: 100, autoExtend: false });
      forget(locks.name);
      const owner = new KitKeys('lock', locks.name).parts(key, 'owner')[0] as string;
      const a = await locks.acquire(key);
      await pollUntil('a expired', async () => (await redis.pttl(owner)) === -2, 5000, 10);
      const b = await locks.acquire(key);
      assert.equal(await a.release(), false, 'not a’s any more');
      assert.equal(await redis.get(owner), b.token);
      await assert.rejects(a.extend(), (e) => RedfenceError.is(e, 'RF_KIT_LOCK_LOST'));
      await b.release();
    });

    it('waits for a held lock and gets it when released', async () => {
      const locks = new LockManager({ redis, name: uniqueName('l'), ttlMs: 10_000 });
      forget(locks.name);
      const a = await locks.acquire(key);
      const waiting = locks.acquire(key, { waitMs: 10_000 });
      await a.release();
      const b = await waiting;
      assert.equal(b.fencingToken, a.fencingToken + 1);
      await b.release();
    });

    it('auto-extension keeps a lock past its ttl; a lock taken over is reported lost', async () => {
      const lost: LockLostReason[] = [];
      const locks = new LockManager({
        redis,
        name: uniqueName('l'),
        ttlMs: 150,
        onLockLost: (r) => lost.push(r),
      });
      forget(locks.name);
      const owner = new KitKeys('lock', locks.name).parts(key, 'owner')[0] as string;
      const a = await locks.acquire(key);
      const start = Date.now();
      await pollUntil('three ttls', () => Date.now() - start > 450, 5000, 20);
      assert.equal(await redis.get(owner), a.token, 'still held after 3 ttls');
      assert.equal(a.lost, undefined);
      await redis.set(owner, 'someone-else', 'PX', 10_000); // taken over behind its back
      await pollUntil('lost', () => a.lost !== undefined, 5000, 10);
      assert.deepEqual(lost, ['taken']);
      assert.equal(a.signal.aborted, true);
      const counted = (await locks.registry.getMetricsAsJSON()).find(
        (m) => m.name === 'redfence_kit_lock_lost_total',
      );
      assert.deepEqual(
        counted?.values.map((v) => [v.labels.reason, v.value]),
        [['taken', 1]],
      );
      assert.equal(await a.release(), false);
      assert.equal(await redis.get(owner), 'someone-else', 'release did not delete the other owner’s lock');
      await redis.del(owner);
    });

    it('a holder paused (SIGSTOP) past its ttl wakes to find its write refused by the fenced store', async () => {
      const name = uniqueName('l');
      const go = `rf-test:{${name}}:go`;
      const id = 'account-7';
      const child = await startFixture('holder', 'lock-holder', {
        ...targetEnv(target),
        LOCK_NAME: name,
        ID: id,
        TTL_MS: '300',
        GO: go,
      });
      after(() => child.kill());
      const acquired = await child.log.waitFor('acquired', (l) => l.msg === 'acquired', 30_000);
      child.signal('SIGSTOP');
      const owner = new KitKeys('lock', name).parts({ tenant: 'acme', id }, 'owner')[0] as string;
      await pollUntil(
        'the paused holder’s lock expired',
        async () => (await redis.pttl(owner)) === -2,
        10_000,
        20,
      );
      const locks = new LockManager({ redis, name, ttlMs: 10_000 });
      forget(name, id);
      const store = new FencedStore({ redis, name });
      const mine = await locks.acquire({ tenant: 'acme', id });
      assert.ok(mine.fencingToken > (acquired.fencingToken as number));
      await store.write({ tenant: 'acme', id }, mine.fencingToken, 'written by the new owner');
      await redis.rpush(go, '1');
      child.signal('SIGCONT');
      const result = await resultOf(child);
      assert.equal(result.outcome, 'RF_KIT_FENCED', JSON.stringify(result));
      assert.equal(result.released, false, 'its release did not free the new owner’s lock');
      const stored = await store.read({ tenant: 'acme', id });
      assert.equal(stored?.value.toString(), 'written by the new owner');
      assert.equal(stored?.fencingToken, mine.fencingToken);
      assert.equal(await redis.get(owner), mine.token);
      await mine.release();
      await redis.del(go);
    });
  });
}

describe('fenced lock with Redis down', () => {
  it('acquire fails closed; a holder cut off from Redis past its ttl is told it lost the lock', async () => {
    const url = new URL(REDIS_URL);
    const proxy = new TcpProxy({ host: url.hostname, port: Number(url.port) });
    const port = await proxy.listen();
    after(() => proxy.close());
    const redis = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, retryStrategy: () => 20 });
    redis.on('error', () => {});
    after(() => redis.disconnect());
    const lost: LockLostReason[] = [];
    const locks = new LockManager({
      redis,
      name: uniqueName('l'),
      ttlMs: 300,
      redisPolicy: { timeoutMs: 100, retries: 0 },
      onLockLost: (r) => lost.push(r),
    });
    const key = { tenant: 'acme', id: 'x' };
    const a = await locks.acquire(key);
    proxy.holdFrom(/./); // Redis stops answering
    await pollUntil('lost', () => a.lost !== undefined, 5000, 10);
    assert.deepEqual(lost, ['expired']);
    await assert.rejects(locks.acquire(key), (e) => RedfenceError.is(e, 'RF_REDIS_UNAVAILABLE'));
    proxy.release();
  });

  it('options are checked before any Redis call; checkFencingToken refuses older numbers', () => {
    const redis = { evalshaBuffer: async () => 0, evalBuffer: async () => 0 } as never;
    assert.throws(() => new LockManager({ redis, name: 'l' } as never), /"ttlMs" \(required\)/);
    assert.throws(
      () => new LockManager({ redis, name: 'l', ttlMs: 100, ttl: 1 } as never),
      /unknown option "ttl"/,
    );
    assert.throws(() => new LockManager({ redis: {} as never, name: 'l', ttlMs: 100 }), /"redis"/);
    assert.throws(
      () => checkFencingToken(5, 4),
      (e) => RedfenceError.is(e, 'RF_KIT_FENCED'),
    );
    checkFencingToken(5, 5);
    checkFencingToken(undefined, 1);
  });
});
