/** IdempotencyStore.runInTransaction: the command's writes and its idempotency row commit together. */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { type Cluster, Redis } from 'ioredis';
import pg from 'pg';
import { RedfenceError } from '../../src/errors/index.js';
import { pollUntil, startRedisServer } from '../../src/harness/index.js';
import { IdempotencyStore } from '../../src/kit/index.js';
import { DATABASE_URL, standalone, uniqueName } from '../helpers/env.js';
import { KIT_TARGETS } from './support.js';

const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 12 });
const schema = `rf_idemtx_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
before(async () => {
  await pool.query(`CREATE SCHEMA ${schema}`);
  await pool.query(`CREATE TABLE ${schema}.orders (id serial PRIMARY KEY, idem text NOT NULL)`);
});
after(async () => {
  await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await pool.end();
});

type Reply = { orderId: number };
const orders = async (idem: string): Promise<number> =>
  (
    (await pool.query(`SELECT count(*)::int AS n FROM ${schema}.orders WHERE idem = $1`, [idem])).rows[0] as {
      n: number;
    }
  ).n;

async function store(redis: Redis | Cluster, inFlightTtlMs = 30_000): Promise<IdempotencyStore<Reply>> {
  const s = new IdempotencyStore<Reply>({
    redis,
    pg: pool,
    table: `${schema}.idem`,
    name: uniqueName('tx'),
    tenant: 'acme',
    ttlMs: 60_000,
    inFlightTtlMs,
    redisPolicy: { timeoutMs: 300, retries: 0 },
  });
  await s.init();
  return s;
}

/** A command writing one order on the transaction's client; `gate` holds it open. */
function placeOrder(idem: string, gate?: Promise<void>, fail = false) {
  let runs = 0;
  const fn = async (client: pg.PoolClient): Promise<Reply> => {
    runs++;
    const r = await client.query(`INSERT INTO ${schema}.orders (idem) VALUES ($1) RETURNING id`, [idem]);
    await gate;
    if (fail) throw new Error('payment declined');
    return { orderId: (r.rows[0] as { id: number }).id };
  };
  return { fn, runs: () => runs };
}

for (const target of KIT_TARGETS) {
  describe(`idempotency store on ${target.name}, command inside the PostgreSQL transaction`, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    it('the first request commits its order and its record together; a duplicate replays', async () => {
      const s = await store(redis);
      const c = placeOrder(`a-${target.name}`);
      const first = await s.runInTransaction('a', 'fp', c.fn);
      assert.equal(first.replayed, false);
      const again = await s.runInTransaction('a', 'fp', c.fn);
      assert.deepEqual(again, { status: 'done', response: first.response, replayed: true });
      assert.equal(c.runs(), 1);
      assert.equal(await orders(`a-${target.name}`), 1);
      await assert.rejects(s.runInTransaction('a', 'other', c.fn), (e) =>
        RedfenceError.is(e, 'RF_KIT_IDEMPOTENCY_MISMATCH'),
      );
    });

    it('a command that throws rolls back its writes and its claim: the retry runs once more', async () => {
      const s = await store(redis);
      const bad = placeOrder(`b-${target.name}`, undefined, true);
      await assert.rejects(s.runInTransaction('b', 'fp', bad.fn), /payment declined/);
      assert.equal(await orders(`b-${target.name}`), 0);
      const good = placeOrder(`b-${target.name}`);
      assert.equal((await s.runInTransaction('b', 'fp', good.fn)).replayed, false);
      assert.equal(await orders(`b-${target.name}`), 1);
    });
  });
}

describe('idempotency store, command inside the PostgreSQL transaction, Redis down', () => {
  const redis = standalone();
  after(() => redis.disconnect());

  it('Redis down: a duplicate during an open transaction waits, past inFlightTtlMs, and never runs', async () => {
    const server = await startRedisServer();
    after(() => server.stop());
    const down = new Redis({
      host: '127.0.0.1',
      port: server.port,
      maxRetriesPerRequest: 0,
      retryStrategy: () => 50,
    });
    down.on('error', () => {}); // it is stopped on purpose
    after(() => down.disconnect());
    const s = await store(down, 400);
    await server.kill();
    let open: () => void = () => {};
    const gate = new Promise<void>((r) => {
      open = r;
    });
    const c = placeOrder('c', gate);
    const first = s.runInTransaction('c', 'fp', c.fn);
    await pollUntil('first inside its transaction', () => c.runs() === 1, 10_000, 5);
    // The duplicate's INSERT waits on the open claim for inFlightTtlMs, then gives 409: with the
    // command inside the transaction an expired claim cannot be taken over while it is open.
    await assert.rejects(
      s.runInTransaction('c', 'fp', c.fn),
      (e) => RedfenceError.is(e, 'RF_KIT_IDEMPOTENCY_IN_FLIGHT') && e.details?.status === 409,
    );
    // Later duplicates (waiting on the row or arriving after the commit) replay the committed response.
    const waiting = Promise.allSettled(Array.from({ length: 5 }, () => s.runInTransaction('c', 'fp', c.fn)));
    open();
    assert.equal((await first).replayed, false);
    for (const w of await waiting) {
      assert.equal(w.status, 'fulfilled', String((w as PromiseRejectedResult).reason));
      assert.equal((w as PromiseFulfilledResult<{ replayed: boolean }>).value.replayed, true);
    }
    assert.equal(c.runs(), 1);
    assert.equal(await orders('c'), 1);
  });

  it('needs a pool', async () => {
    const s = new IdempotencyStore<Reply>({
      redis,
      pg: { query: async () => ({ rows: [], rowCount: 0 }) },
      table: 'x',
      tenant: 'acme',
      ttlMs: 1000,
      inFlightTtlMs: 100,
    });
    await assert.rejects(
      s.runInTransaction('k', 'fp', async () => ({ orderId: 1 })),
      (e) => RedfenceError.is(e, 'RF_INVALID_ARGUMENT'),
    );
  });
});
