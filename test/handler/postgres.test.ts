/**
 * ctx.transaction on the real PostgreSQL and the real broker: a handler process killed (SIGKILL)
 * between a record's business write and the offset commit, then replayed by a new instance of the
 * same group, leaves exactly one business row per record; the same crash with a plain INSERT leaves
 * duplicates (the failure the pattern prevents). Also: the processed-ids table SQL, a custom table
 * name, and a skipped id rolling back the business write.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createHandler, createProcessedTable, defineHandler, processedTableSql } from '../../src/index.js';
import { DATABASE_URL, KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, pollUntil, produce } from '../helpers/kafka.js';

const CHILD = fileURLToPath(new URL('./fixtures/pg-child.ts', import.meta.url));
const SCHEMA = 'redfence_handlers';

function runChild(env: Record<string, string>, timeoutMs = 60_000): Promise<NodeJS.Signals | number | null> {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error('the handler child did not crash in time'));
    }, timeoutMs);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve(signal ?? code);
    });
  });
}

async function scenario(t: { after(fn: () => unknown): void }, pool: pg.Pool, mode: 'tx' | 'naive') {
  const ns = uniqueName(`pg${mode}`).replace(/-/g, '_');
  const topic = `${ns}-in`;
  const groupId = `${ns}-g`;
  const business = `${SCHEMA}.${ns}_orders`;
  const processed = `${SCHEMA}.${ns}_processed`;
  const N = 200;
  t.after(
    await createTopics([
      { topic, partitions: 2 },
      { topic: `${topic}.DLT`, partitions: 1 },
    ]),
  );
  await pool.query(`CREATE TABLE ${business} (seq int NOT NULL)`);
  await createProcessedTable(pool, processed);
  t.after(() => pool.query(`DROP TABLE IF EXISTS ${business}, ${processed}`));
  await produce(
    topic,
    Array.from({ length: N }, (_, seq) => ({ key: `k${seq % 20}`, value: JSON.stringify({ seq }) })),
  );
  const env = {
    TOPIC: topic,
    GROUP: groupId,
    BUSINESS_TABLE: business,
    PROCESSED_TABLE: processed,
    MODE: mode,
    DATABASE_URL,
    KAFKA_BROKERS,
  };
  const exit = await runChild({ ...env, CRASH_AT: '120' });
  assert.equal(exit, 'SIGKILL');
  const before = Number((await pool.query(`SELECT count(*) AS n FROM ${business}`)).rows[0].n);
  assert.ok(before > 0 && before < N + 50, `rows written before the crash: ${before}`);
  const committedBefore = [...(await committedOffsets(groupId, topic)).values()].reduce(
    (s, o) => s + Math.max(0, o),
    0,
  );
  assert.equal(committedBefore, 0, 'the crash came before any offset commit');

  // the replay: a new instance of the same group, in this process
  const handler = createHandler(
    defineHandler<{ seq: number }>({
      input: topic,
      name: 'pgreplay',
      handle: async (r, ctx) => {
        if (mode === 'tx')
          await ctx.transaction(async (db) =>
            db.query(`INSERT INTO ${business} (seq) VALUES ($1)`, [r.value.seq]),
          );
        else await pool.query(`INSERT INTO ${business} (seq) VALUES ($1)`, [r.value.seq]);
      },
    }),
    {
      kafka: { brokers: KAFKA_BROKERS.split(',') },
      groupId,
      postgres: { pool, table: processed },
      commitIntervalMs: 100,
    },
  );
  t.after(() => handler.close());
  await handler.start();
  await pollUntil(
    'replay committed',
    async () =>
      [...(await committedOffsets(groupId, topic)).values()].reduce((s, o) => s + Math.max(0, o), 0) === N,
    60_000,
    100,
  );
  await handler.close();
  const { rows } = await pool.query(`SELECT count(*) AS n, count(DISTINCT seq) AS d FROM ${business}`);
  return { before, rows: Number(rows[0].n), distinct: Number(rows[0].d), N };
}

describe('ctx.transaction on PostgreSQL (real broker, real PostgreSQL)', () => {
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 10 });
  after(() => pool.end());

  it('a crash between the business write and the offset commit leaves no duplicate row after the replay', async (t) => {
    await pool.query(`CREATE SCHEMA IF NOT EXISTS ${SCHEMA}`);
    const r = await scenario(t, pool, 'tx');
    assert.equal(r.distinct, r.N);
    assert.equal(r.rows, r.N, 'one business row per record');
  });

  it('the same crash with a plain INSERT duplicates the rows written before it (what the pattern prevents)', async (t) => {
    const r = await scenario(t, pool, 'naive');
    assert.equal(r.distinct, r.N);
    // at least those: a rebalance during the replay (the killed member's session ending) may hand a few
    // records over again, which a plain INSERT also duplicates
    assert.ok(
      r.rows >= r.N + r.before,
      `every row written before the crash is written again: ${r.rows} rows, ${r.N} records, ${r.before} before`,
    );
  });

  it('the documented table SQL; a skipped id rolls back the business write', async (t) => {
    assert.equal(
      processedTableSql(),
      'CREATE TABLE IF NOT EXISTS "redfence_processed" (id text PRIMARY KEY, processed_at timestamptz NOT NULL DEFAULT now())',
    );
    assert.throws(() => processedTableSql('x; drop table y'), /postgres.table/);
    const ns = uniqueName('pgskip').replace(/-/g, '_');
    const processed = `${SCHEMA}.${ns}_p`;
    await createProcessedTable(pool, processed);
    t.after(() => pool.query(`DROP TABLE IF EXISTS ${processed}`));
    await pool.query(`INSERT INTO ${processed} (id) VALUES ('in/0/0')`);
    const { SqlOnce } = await import('../../src/handler/postgres.js');
    const once = new SqlOnce(pool, processed);
    let ran = false;
    const skipped = await once.run(
      'in/0/0',
      async () => {
        ran = true;
      },
      new AbortController().signal,
    );
    assert.deepEqual(skipped, { ran: false });
    assert.equal(ran, false);
    const fresh = await once.run(
      'in/0/1',
      async (db) => (await db.query('SELECT 41 + 1 AS n')).rows[0],
      new AbortController().signal,
    );
    assert.deepEqual(fresh, { ran: true, value: { n: 42 } });
    // a failing write rolls back the processed id too: the record can be tried again
    await assert.rejects(
      once.run('in/0/2', async (db) => db.query('SELECT 1/0'), new AbortController().signal),
      /division by zero/,
    );
    const ids = (await pool.query(`SELECT id FROM ${processed} ORDER BY id`)).rows.map((r) => r.id);
    assert.deepEqual(ids, ['in/0/0', 'in/0/1']);
  });
});
