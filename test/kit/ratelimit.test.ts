import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { RedfenceError } from '../../src/errors/index.js';
import { freePort } from '../../src/harness/index.js';
import { KitKeys } from '../../src/keys/kit.js';
import { RateLimiter } from '../../src/kit/index.js';
import { uniqueName } from '../helpers/env.js';
import { KIT_TARGETS, resultOf, startFixture, targetEnv } from './support.js';

for (const target of KIT_TARGETS) {
  describe(`rate limiter on ${target.name}`, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    it('admits the burst at once, then refuses with retryAfterMs; tenants are limited apart', async () => {
      const registry = new Registry();
      const limiter = new RateLimiter({
        redis,
        name: uniqueName('r'),
        rate: 1,
        periodMs: 10_000,
        burst: 5,
        metrics: { registry },
      });
      const key = { tenant: 'acme', id: 'api' };
      const remaining: number[] = [];
      for (let i = 0; i < 5; i++) {
        const r = await limiter.consume(key);
        assert.equal(r.allowed, true, `call ${i}`);
        remaining.push(r.remaining);
      }
      // One call per 10 s: the time between these calls never earns a whole call back.
      assert.deepEqual(remaining, [4, 3, 2, 1, 0]);
      const refused = await limiter.consume(key);
      assert.equal(refused.allowed, false);
      assert.ok(
        refused.retryAfterMs > 9000 && refused.retryAfterMs <= 10_000,
        `retryAfterMs ${refused.retryAfterMs}`,
      );
      assert.ok(
        refused.resetAfterMs > 49_000 && refused.resetAfterMs <= 50_000,
        `resetAfterMs ${refused.resetAfterMs}`,
      );
      await assert.rejects(
        limiter.take(key),
        (e) => RedfenceError.is(e, 'RF_KIT_RATE_LIMITED') && (e.details?.retryAfterMs as number) > 0,
      );
      assert.equal((await limiter.consume({ tenant: 'other', id: 'api' })).allowed, true);
      const look = await limiter.consume(key, { cost: 0 });
      assert.deepEqual(
        [look.allowed, look.remaining],
        [true, 0],
        'a look (cost 0) charges nothing and sees none left',
      );
      const limited = (await registry.getMetricsAsJSON()).find(
        (m) => m.name === 'redfence_kit_ratelimit_limited_total',
      );
      assert.equal(limited?.values[0]?.value, 2);
      const [tat] = new KitKeys('ratelimit', limiter.name).parts(key, 'tat');
      assert.ok((await redis.pttl(tat as string)) > 0, 'its key expires by itself');
    });

    it('a per-call limit (a tenant plan) and cost', async () => {
      const limiter = new RateLimiter({ redis, name: uniqueName('r'), rate: 1, burst: 1 });
      const key = { tenant: 'gold', id: 'api' };
      const r = await limiter.consume(key, { cost: 8, limit: { rate: 1, periodMs: 10_000, burst: 10 } });
      assert.deepEqual([r.allowed, r.remaining], [true, 2]);
      assert.equal(
        (await limiter.consume(key, { cost: 3, limit: { rate: 1, periodMs: 10_000, burst: 10 } })).allowed,
        false,
      );
      await assert.rejects(
        limiter.consume(key, { cost: 2 }),
        /cost must be an integer from 0 to the burst \(1\)/,
      );
    });

    it('at 2x the rate from 2 processes for 6 s, admits rate x time + burst within 1%', async (t) => {
      const name = uniqueName('r');
      const go = `rf-test:{${name}}:go`;
      const rate = 200;
      // A burst of 2 s at this rate: a pause of both offering processes (or of Redis) shorter than
      // that loses no capacity, so the count measures the limiter, not the machine's load.
      const burst = 400;
      const env = {
        ...targetEnv(target),
        LIMITER: name,
        RATE: String(rate),
        BURST: String(burst),
        ID: 'hot',
        SEND_RATE: String(rate), // each of the two: 2x together
        DURATION_MS: '6000',
        GO: go,
      };
      const children = await Promise.all([1, 2].map((i) => startFixture(`rl-${i}`, 'ratelimit-child', env)));
      after(() => Promise.all(children.map((c) => c.kill())));
      await redis.rpush(go, '1', '1');
      const results = await Promise.all(children.map((c) => resultOf(c, 60_000)));
      await redis.del(go);
      assert.ok(
        results.every((r) => r.errors === 0),
        JSON.stringify(results),
      );
      const admitted = results.reduce((s, r) => s + (r.allowed as number), 0);
      const sent = results.reduce((s, r) => s + (r.sent as number), 0);
      const span =
        Math.max(...results.map((r) => r.last as number)) -
        Math.min(...results.map((r) => r.first as number));
      const expected = (rate * span) / 1000 + burst;
      const error = Math.abs(admitted - expected) / expected;
      assert.equal(sent, (2 * rate * 6000) / 1000, 'offered at 2x the rate');
      t.diagnostic(
        `admitted ${admitted} of ${sent}, expected ${expected.toFixed(1)}, ${(error * 100).toFixed(3)}% off, longest tick gap ${Math.max(...results.map((r) => r.maxGapMs as number))} ms`,
      );
      // Never over the bound by more than 1%. Under it by more only as far as the senders stalled: a
      // sender that misses its ticks (a loaded machine) offers nothing meanwhile, and the limiter
      // cannot admit later what was not asked for beyond its burst.
      const stalledMs = Math.max(...results.map((r) => r.maxGapMs as number));
      const floor = expected * 0.99 - (rate * stalledMs) / 1000;
      assert.ok(
        admitted <= expected * 1.01 && admitted >= floor,
        `admitted ${admitted}, expected ${expected.toFixed(1)} (span ${span} ms, longest stall ${stalledMs} ms): ${(error * 100).toFixed(2)}% off`,
      );
    });
  });
}

describe('rate limiter with Redis down', () => {
  it('fail-closed throws RF_REDIS_UNAVAILABLE; fail-open admits with degraded: true', async () => {
    const port = await freePort();
    const dead = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 0, retryStrategy: () => 50 });
    dead.on('error', () => {});
    after(() => dead.disconnect());
    const policy = { timeoutMs: 300, retries: 1, retryDelayMs: 10 };
    const key = { tenant: 'acme', id: 'api' };
    const closed = new RateLimiter({ redis: dead, name: 'down', rate: 1, burst: 1, redisPolicy: policy });
    await assert.rejects(closed.consume(key), (e) => RedfenceError.is(e, 'RF_REDIS_UNAVAILABLE'));
    const open = new RateLimiter({
      redis: dead,
      name: 'down',
      rate: 1,
      burst: 1,
      redisPolicy: policy,
      onRedisDown: 'fail-open',
    });
    assert.deepEqual(await open.consume(key), {
      allowed: true,
      remaining: 0,
      retryAfterMs: 0,
      resetAfterMs: 0,
      degraded: true,
    });
  });

  it('options are checked before any Redis call', () => {
    const redis = { evalshaBuffer: async () => 0, evalBuffer: async () => 0 } as never;
    assert.throws(() => new RateLimiter({ redis, name: 'r', rate: 0, burst: 1 }), /"rate"/);
    assert.throws(() => new RateLimiter({ redis, name: 'r', rate: 1 } as never), /"burst" \(required\)/);
    assert.throws(
      () => new RateLimiter({ redis, name: 'r', rate: 1, burst: 1, window: 5 } as never),
      /unknown option "window"/,
    );
  });
});
