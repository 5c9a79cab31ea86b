/** Outbox tests: one schema per test file (rf_outbox_test_<random>), dropped when it ends. */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { initOutbox } from '../../src/outbox/index.js';
import { DATABASE_URL } from '../helpers/env.js';
import { kafka } from '../helpers/kafka.js';

export interface TestSchema {
  schema: string;
  pool: pg.Pool;
  drop(): Promise<void>;
}

export async function testSchema(): Promise<TestSchema> {
  const schema = `rf_outbox_test_${randomBytes(4).toString('hex')}`;
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 20 });
  pool.on('error', () => undefined);
  const client = await pool.connect();
  try {
    await initOutbox(client, { schema });
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
