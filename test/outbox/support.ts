/**
 * Outbox tests: one schema per test file (rf_outbox_test_<random>), dropped when it ends; writers that
 * enqueue until stopped; the check that every committed row was published once and in order.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { enqueue, initOutbox } from '../../src/outbox/index.js';
import { DATABASE_URL } from '../helpers/env.js';
import { kafka, readToEnd } from '../helpers/kafka.js';

export interface TestSchema {
  schema: string;
  pool: pg.Pool;
  drop(): Promise<void>;
}

export async function testSchema(databaseUrl = DATABASE_URL, roles?: number): Promise<TestSchema> {
  const schema = `rf_outbox_test_${randomBytes(4).toString('hex')}`;
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 20 });
  pool.on('error', () => undefined);
  const client = await pool.connect();
  try {
    await initOutbox(client, { schema, ...(roles === undefined ? {} : { roles }) });
  } finally {
    client.release();
  }
  return {
    schema,
    pool,
    drop: async () => {
      await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
      await pool.end();
    },
  };
}

/** Runs `fn` in a transaction on its own client: committed if it returns, rolled back if it throws. */
export async function inTransaction<T>(pool: pg.Pool, fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
  const c = await pool.connect();
  try {
    await c.query('BEGIN');
    const v = await fn(c);
    await c.query('COMMIT');
    return v;
  } catch (err) {
    await c.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    c.release();
  }
}

export interface Row {
  id: string;
  aggregatetype: string;
  aggregateid: string;
  seq: string;
  pos: string;
  state: string;
  attempts: number;
  last_error: string | null;
}

export async function rows(pool: pg.Pool, schema: string): Promise<Row[]> {
  const r = await pool.query<Row>(
    `SELECT id, aggregatetype, aggregateid, seq::text, pos::text, state, attempts, last_error FROM "${schema}".redfence_outbox ORDER BY pos`,
  );
  return r.rows;
}

/** Deletes topics the relay created (its exactly-once progress topic); missing ones are no error. */
export async function deleteTopics(topics: string[]): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.deleteTopics({ topics }).catch(() => undefined);
  } finally {
    await admin.disconnect();
  }
}

/** Counts of the outbox's rows by state. */
export async function stateCounts(
  pool: pg.Pool,
  schema: string,
): Promise<{ pending: number; published: number; parked: number }> {
  const r = await pool.query<{ state: string; n: number }>(
    `SELECT state, count(*)::int AS n FROM "${schema}".redfence_outbox GROUP BY state`,
  );
  const c = { pending: 0, published: 0, parked: 0 };
  for (const x of r.rows) c[x.state as keyof typeof c] = x.n;
  return c;
}

/**
 * Writers enqueueing without pause until `stop()`: each transaction one event of each of two aggregates
 * (of `aggregates`), payload its writer and number. `stop()` resolves with the ids committed.
 */
export function writers(
  pool: pg.Pool,
  schema: string,
  o: { writers: number; aggregates: number; pauseMs?: number },
): { committed: () => number; stop(): Promise<string[]> } {
  const ids: string[] = [];
  let stopped = false;
  const loops = Array.from({ length: o.writers }, async (_, w) => {
    for (let i = 0; !stopped; i++) {
      const events = [0, 1].map((k) => ({
        aggregateType: 'order',
        aggregateId: `a-${(w * 7 + i * 3 + k) % o.aggregates}`,
        type: 'Changed',
        payload: { w, i, k },
      }));
      ids.push(...(await inTransaction(pool, (c) => enqueue(c, events, { schema }))));
      // pacing of the workload (how fast the writers commit), not a wait for anything
      if (o.pauseMs) await new Promise((r) => setTimeout(r, o.pauseMs));
    }
  });
  return {
    committed: () => ids.length,
    stop: async () => {
      stopped = true;
      await Promise.all(loops);
      return ids;
    },
  };
}

/**
 * Every committed row is on the topic exactly once (read_committed), and each aggregate's records come
 * in its `seq` order (commit order).
 */
export async function assertPublishedOnceInOrder(
  pool: pg.Pool,
  schema: string,
  topic: string,
  committed: readonly string[],
): Promise<void> {
  const out = await readToEnd(topic);
  const seen = new Map<string, number>();
  for (const r of out) {
    const id = String(r.headers.id ?? '');
    seen.set(id, (seen.get(id) ?? 0) + 1);
  }
  const missing = committed.filter((id) => !seen.has(id));
  const doubled = [...seen].filter(([, n]) => n > 1);
  assert.deepEqual(missing, [], `${missing.length} committed rows never published`);
  assert.deepEqual(doubled, [], `${doubled.length} rows published more than once`);
  assert.equal(out.length, committed.length);
  const seq = new Map(
    (await rows(pool, schema)).map((r) => [r.id, { agg: r.aggregateid, seq: Number(r.seq) }] as const),
  );
  const last = new Map<string, number>();
  for (const r of out) {
    const s = seq.get(String(r.headers.id ?? ''));
    assert.ok(s, 'every published record is a row');
    assert.equal(s.agg, r.key, 'keyed by its aggregate');
    assert.ok((last.get(s.agg) ?? 0) < s.seq, `aggregate ${s.agg}: seq ${s.seq} after ${last.get(s.agg)}`);
    last.set(s.agg, s.seq);
  }
}
