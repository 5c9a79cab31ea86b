/**
 * IdempotencyStore against real Redis (standalone, cluster) and PostgreSQL. Just over 400 lines: the
 * standalone x cluster x Redis-only x PostgreSQL matrix and the Redis-outage cases share its helpers.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import pg from 'pg';
import { RedfenceError } from '../../src/errors/index.js';
import { pollUntil, startRedisServer } from '../../src/harness/index.js';
import { KitRecordKeys } from '../../src/keys/kit.js';
import { fingerprint, IdempotencyStore } from '../../src/kit/index.js';
import { DATABASE_URL, uniqueName } from '../helpers/env.js';
import { KIT_TARGETS } from './support.js';

type Resp = { n: number; body: string };

/** A command that counts its runs and, when gated, waits for `open()`. */
function command(
  gated = false,
  body = 'created',
): { fn: () => Promise<Resp>; runs: () => number; open: () => void } {
  let runs = 0;
  let open: () => void = () => {};
  const gate = new Promise<void>((r) => {
    open = r;
  });
  if (!gated) open();
  return {
    fn: async () => {
      runs++;
      await gate;
      return { n: runs, body };
    },
    runs: () => runs,
    open: () => open(),
  };
}

/** The store's Redis record key (to simulate Redis losing it). */
function recordKey(name: string, tenant: string, key: string): string {
  return new KitRecordKeys('idempotency', name, tenant).part(key, 'r');
}

const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 });
const schema = `rf_idem_${Date.now().toString(36)}_${createHash('sha256').update(String(Math.random())).digest('hex').slice(0, 6)}`;
before(async () => {
  await pool.query(`CREATE SCHEMA ${schema}`);
});
after(async () => {
  await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await pool.end();
});

let tables = 0;
async function pgStore(
  redis: Redis | import('ioredis').Cluster,
  extra: { ttlMs?: number; inFlightTtlMs?: number } = {},
): Promise<IdempotencyStore<Resp>> {
  const s = new IdempotencyStore<Resp>({
    redis,
    pg: pool,
    table: `${schema}.idem_${++tables}`,
    name: uniqueName('i'),
    tenant: 'acme',
    ttlMs: extra.ttlMs ?? 60_000,
    inFlightTtlMs: extra.inFlightTtlMs ?? 30_000,
  });
  await s.init();
  return s;
}

function redisStore(
  redis: Redis | import('ioredis').Cluster,
  extra: { ttlMs?: number; inFlightTtlMs?: number } = {},
): IdempotencyStore<Resp> {
  return new IdempotencyStore<Resp>({
    redis,
    name: uniqueName('i'),
    tenant: 'acme',
    ttlMs: extra.ttlMs ?? 60_000,
    inFlightTtlMs: extra.inFlightTtlMs ?? 30_000,
  });
}

for (const target of KIT_TARGETS) {
  for (const mode of ['redis only', 'redis + postgres'] as const) {
    describe(`idempotency store on ${target.name}, ${mode}`, () => {
      const redis = target.connect();
      after(() => redis.disconnect());
      const make = (extra: { ttlMs?: number; inFlightTtlMs?: number } = {}) =>
        mode === 'redis only' ? Promise.resolve(redisStore(redis, extra)) : pgStore(redis, extra);
      const fp = fingerprint('POST', '/orders', '{"sku":"a"}');

      it('the first request runs; the second replays its stored response without running', async () => {
        const s = await make();
        const c = command();
        const first = await s.run('k-1', fp, c.fn);
        assert.deepEqual(first, { status: 'done', response: { n: 1, body: 'created' }, replayed: false });
        const second = await s.run('k-1', fp, c.fn);
        assert.deepEqual(second, { status: 'done', response: { n: 1, body: 'created' }, replayed: true });
        assert.equal(c.runs(), 1);
        // Another key is another request.
        assert.equal((await s.run('k-2', fp, c.fn)).replayed, false);
        assert.equal(c.runs(), 2);
      });

      it('a concurrent duplicate is refused as in flight (409), then replays once the first finished', async () => {
        const s = await make();
        const c = command(true);
        const first = s.run('k', fp, c.fn);
        await pollUntil('first claimed', () => c.runs() === 1, 10_000, 5);
        const dups = await Promise.allSettled(Array.from({ length: 10 }, () => s.run('k', fp, c.fn)));
        for (const d of dups) {
          assert.equal(d.status, 'rejected');
          const err = (d as PromiseRejectedResult).reason;
          assert.ok(RedfenceError.is(err, 'RF_KIT_IDEMPOTENCY_IN_FLIGHT'), String(err));
          assert.equal(err.details?.status, 409);
          assert.doesNotMatch(err.message, /\bk\b/);
        }
        c.open();
        assert.equal((await first).replayed, false);
        assert.equal((await s.run('k', fp, c.fn)).replayed, true);
        assert.equal(c.runs(), 1);
      });

      it('the same key with another fingerprint is refused (422), while running and after', async () => {
        const s = await make();
        const c = command(true);
        const first = s.run('k', fp, c.fn);
        await pollUntil('first claimed', () => c.runs() === 1, 10_000, 5);
        const other = fingerprint('POST', '/orders', '{"sku":"b"}');
        await assert.rejects(s.run('k', other, c.fn), (e) =>
          RedfenceError.is(e, 'RF_KIT_IDEMPOTENCY_MISMATCH'),
        );
        c.open();
        await first;
        await assert.rejects(
          s.run('k', other, c.fn),
          (e) => RedfenceError.is(e, 'RF_KIT_IDEMPOTENCY_MISMATCH') && e.details?.status === 422,
        );
        assert.equal(c.runs(), 1);
      });

      it('a failed command gives up its claim: a retry runs it', async () => {
        const s = await make();
        let runs = 0;
        const failing = async (): Promise<Resp> => {
          runs++;
          throw new Error('boom');
        };
        await assert.rejects(s.run('k', fp, failing), /boom/);
        const c = command();
        assert.equal((await s.run('k', fp, c.fn)).replayed, false);
        assert.equal(runs + c.runs(), 2);
      });

      it('a stored response expires after ttlMs; a crashed claim after inFlightTtlMs', async () => {
        const s = await make({ ttlMs: 400, inFlightTtlMs: 300 });
        const c = command();
        await s.run('k', fp, c.fn);
        assert.equal((await s.run('k', fp, c.fn)).replayed, true);
        await pollUntil(
          'the response expired',
          async () => !(await s.run('k', fp, c.fn)).replayed,
          10_000,
          50,
        );
        assert.equal(c.runs(), 2);

        // A claim whose request never finishes (a crash): 409 until inFlightTtlMs, then the key runs again.
        const hung = command(true, 'late');
        const hungRun = s.run('crash', fp, hung.fn);
        await pollUntil('claimed', () => hung.runs() === 1, 10_000, 5);
        await assert.rejects(s.run('crash', fp, hung.fn), (e) =>
          RedfenceError.is(e, 'RF_KIT_IDEMPOTENCY_IN_FLIGHT'),
        );
        const next = command(false, 'second');
        await pollUntil(
          'the crashed claim expired',
          async () => {
            try {
              return !(await s.run('crash', fp, next.fn)).replayed;
            } catch (e) {
              if (RedfenceError.is(e, 'RF_KIT_IDEMPOTENCY_IN_FLIGHT')) return false;
              throw e;
            }
          },
          10_000,
          50,
        );
        assert.equal(next.runs(), 1);
        // The late first request finishing does not replace the second's stored response.
        hung.open();
        assert.deepEqual((await hungRun).response, { n: 1, body: 'late' });
        const r = await s.run('crash', fp, next.fn);
        assert.deepEqual(r, { status: 'done', response: { n: 1, body: 'second' }, replayed: true });
        assert.equal(next.runs(), 1);
      });

      if (mode === 'redis + postgres') {
        it('Redis losing the key replays from PostgreSQL without running again', async () => {
          const s = await pgStore(redis);
          const c = command();
          await s.run('lost', fp, c.fn);
          assert.equal(await redis.del(recordKey(s.name, 'acme', 'lost')), 1);
          const r = await s.run('lost', fp, c.fn);
          assert.deepEqual(r, { status: 'done', response: { n: 1, body: 'created' }, replayed: true });
          assert.equal(c.runs(), 1);
          // and it is back on the fast path
          assert.equal(await redis.exists(recordKey(s.name, 'acme', 'lost')), 1);
          // A claim lost from Redis while its command runs: the PostgreSQL row still says in flight.
          const slow = command(true);
          const first = s.run('lost-2', fp, slow.fn);
          await pollUntil('claimed', () => slow.runs() === 1, 10_000, 5);
          await redis.del(recordKey(s.name, 'acme', 'lost-2'));
          await assert.rejects(s.run('lost-2', fp, slow.fn), (e) =>
            RedfenceError.is(e, 'RF_KIT_IDEMPOTENCY_IN_FLIGHT'),
          );
          slow.open();
          await first;
          assert.equal((await s.run('lost-2', fp, slow.fn)).replayed, true);
          assert.equal(slow.runs(), 1);
          // A leftover in-flight claim in Redis (a claim that arrived late, a response Redis missed)
          // over a done row: the row answers, the response is copied back.
          const rk = recordKey(s.name, 'acme', 'lost');
          await redis.del(rk);
          const fpHash = createHash('sha256').update(fp).digest('hex');
          await redis.hset(rk, 's', 'f', 'h', fpHash, 'o', 'stale-token');
          assert.deepEqual(await s.run('lost', fp, c.fn), {
            status: 'done',
            response: { n: 1, body: 'created' },
            replayed: true,
          });
          assert.equal(await redis.hget(rk, 's'), 'd');
          assert.equal(c.runs(), 1);
        });
      }
    });
  }
}

describe('idempotency store with Redis stopped', () => {
  it('with PostgreSQL: the row decides, no command runs twice, before, during and after the outage', async () => {
    const server = await startRedisServer();
    after(() => server.stop());
    const redis = new Redis({
      host: '127.0.0.1',
      port: server.port,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 50,
    });
    redis.on('error', () => {}); // it is stopped on purpose
    after(() => redis.disconnect());
    const s = new IdempotencyStore<Resp>({
      redis,
      pg: pool,
      table: `${schema}.idem_down`,
      name: 'down',
      tenant: 'acme',
      ttlMs: 60_000,
      inFlightTtlMs: 30_000,
      redisPolicy: { timeoutMs: 300, retries: 1, retryDelayMs: 10 },
    });
    await s.init();
    const fp = fingerprint('POST', '/pay', 'x');
    const c = command();
    await s.run('before', fp, c.fn);

    await server.kill(); // not persistent: a restart starts empty
    assert.equal((await s.run('before', fp, c.fn)).replayed, true);
    assert.equal((await s.run('during', fp, c.fn)).replayed, false);
    assert.equal((await s.run('during', fp, c.fn)).replayed, true);
    await assert.rejects(s.run('during', 'another', c.fn), (e) =>
      RedfenceError.is(e, 'RF_KIT_IDEMPOTENCY_MISMATCH'),
    );
    // Concurrent duplicates while Redis is down: the PostgreSQL insert lets exactly one run.
    const gated = command(true);
    const all = Promise.allSettled(Array.from({ length: 8 }, () => s.run('race', fp, gated.fn)));
    await pollUntil('one claimed', () => gated.runs() === 1, 10_000, 5);
    gated.open();
    const settled = await all;
    assert.equal(gated.runs(), 1);
    assert.equal(settled.filter((x) => x.status === 'fulfilled' && !x.value.replayed).length, 1);
    for (const x of settled) {
      if (x.status === 'rejected') assert.ok(RedfenceError.is(x.reason, 'RF_KIT_IDEMPOTENCY_IN_FLIGHT'));
    }
    assert.equal(c.runs(), 2);

    // A crashed claim taken over while Redis is down: of concurrent requests after its expiry, one runs.
    const short = new IdempotencyStore<Resp>({
      redis,
      pg: pool,
      table: `${schema}.idem_down`,
      name: 'down-short',
      tenant: 'acme',
      ttlMs: 60_000,
      inFlightTtlMs: 200,
      redisPolicy: { timeoutMs: 300, retries: 0 },
    });
    const hung = command(true);
    const hungRun = short.run('crash', fp, hung.fn);
    await pollUntil('claimed', () => hung.runs() === 1, 10_000, 5);
    const rows = async () =>
      (
        await pool.query(
          `SELECT count(*)::int AS n FROM ${schema}.idem_down WHERE store = 'down-short' AND claimed_until <= now()`,
        )
      ).rows[0] as { n: number };
    await pollUntil('the claim expired', async () => (await rows()).n === 1, 10_000, 20);
    const takers = command(true);
    const race = Promise.allSettled(Array.from({ length: 8 }, () => short.run('crash', fp, takers.fn)));
    await pollUntil('one took over', () => takers.runs() === 1, 10_000, 5);
    takers.open();
    const raced = await race;
    assert.equal(takers.runs(), 1);
    assert.equal(raced.filter((x) => x.status === 'fulfilled' && !x.value.replayed).length, 1);
    hung.open();
    await hungRun;

    await server.start(); // empty
    await pollUntil('redis back', async () => (await redis.ping().catch(() => '')) === 'PONG', 10_000, 50);
    assert.equal((await s.run('before', fp, c.fn)).replayed, true);
    assert.equal((await s.run('during', fp, c.fn)).replayed, true);
    assert.equal(c.runs(), 2);
    const metric = (await s.registry.getMetricsAsJSON()).find(
      (m) => m.name === 'redfence_kit_redis_errors_total',
    );
    assert.ok((metric?.values ?? []).some((v) => v.labels.policy === 'open' && v.value > 0));
  });

  it('without PostgreSQL it fails closed (RF_REDIS_UNAVAILABLE) and runs nothing', async () => {
    const server = await startRedisServer();
    after(() => server.stop());
    const redis = new Redis({
      host: '127.0.0.1',
      port: server.port,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 50,
    });
    redis.on('error', () => {}); // it is stopped on purpose
    after(() => redis.disconnect());
    const s = new IdempotencyStore<Resp>({
      redis,
      name: 'down',
      tenant: 'acme',
      ttlMs: 60_000,
      inFlightTtlMs: 30_000,
      redisPolicy: { timeoutMs: 300, retries: 0 },
    });
    await server.kill();
    const c = command();
    await assert.rejects(s.run('k', 'fp', c.fn), (e) => RedfenceError.is(e, 'RF_REDIS_UNAVAILABLE'));
    assert.equal(c.runs(), 0);
  });
});

describe('idempotency store key names', () => {
  it("keyEncoding 'hash' keeps the idempotency key out of Redis key names; tenants are apart", async () => {
    const redis = KIT_TARGETS[0]?.connect() as Redis;
    after(() => redis.disconnect());
    const name = uniqueName('h');
    const mk = (tenant: string) =>
      new IdempotencyStore<Resp>({
        redis,
        name,
        tenant,
        ttlMs: 60_000,
        inFlightTtlMs: 1000,
        keyEncoding: 'hash',
      });
    const c = command();
    await mk('acme').run('alice@example.com', 'fp', c.fn);
    assert.equal((await mk('globex').run('alice@example.com', 'fp', c.fn)).replayed, false);
    assert.equal(c.runs(), 2);
    const keys = await redis.keys(`rf:t=*:{idempotency.${name}:*`);
    assert.equal(keys.length, 2);
    for (const k of keys) assert.doesNotMatch(k, /alice/);
  });
});

describe('idempotency store options', () => {
  const untouchable = {
    evalshaBuffer: () => assert.fail('Redis called'),
    evalBuffer: () => assert.fail('Redis called'),
  } as unknown as Redis;
  const base = { redis: untouchable, tenant: 'acme', ttlMs: 1000, inFlightTtlMs: 500 };

  it('bad options fail before any Redis call, naming the option', async () => {
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ ttlMs: undefined }, /"ttlMs" \(required\)/],
      [{ inFlightTtlMs: 5000 }, /"inFlightTtlMs" \(5000\) must not exceed "ttlMs"/],
      [{ tenant: '' }, /"tenant"/],
      [{ table: 'x' }, /"table" needs option "pg"/],
      [{ pg: pool, table: 'Robert"; DROP' }, /"table"/],
      [{ pg: {} }, /"pg".*query\(\)/],
      [{ name: 'x'.repeat(53) }, /"name"/],
      [{ bogus: 1 }, /unknown option "bogus"/],
    ];
    for (const [o, msg] of bad) {
      assert.throws(
        () => new IdempotencyStore({ ...base, ...o } as never),
        (e) => RedfenceError.is(e, 'RF_INVALID_OPTIONS') && msg.test(e.message),
        JSON.stringify(Object.keys(o)),
      );
    }
    const s = new IdempotencyStore(base);
    await assert.rejects(
      s.run('', 'fp', async () => 1),
      (e) => RedfenceError.is(e, 'RF_INVALID_ARGUMENT'),
    );
    await assert.rejects(
      s.run('k', '', async () => 1),
      (e) => RedfenceError.is(e, 'RF_INVALID_ARGUMENT'),
    );
  });

  it('fingerprint covers the method, the path and the body', () => {
    const a = fingerprint('post', '/o', 'b');
    assert.equal(a, fingerprint('POST', '/o', Buffer.from('b')));
    assert.match(a, /^[0-9a-f]{64}$/);
    assert.notEqual(a, fingerprint('PUT', '/o', 'b'));
    assert.notEqual(a, fingerprint('POST', '/p', 'b'));
    assert.notEqual(a, fingerprint('POST', '/o', 'c'));
  });
});
