/**
 * The outbox table and enqueue against a real PostgreSQL: init is idempotent, a committed event is a
 * pending row with the Debezium columns, a rolled-back one leaves nothing, raw SQL gets the same
 * bookkeeping, and writers of one aggregate take their sequence numbers in commit order even when their
 * transactions overlap and the one that started first commits last.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RedfenceError } from '../../src/errors/index.js';
import { pollUntil } from '../../src/harness/poll.js';
import { enqueue, initOutbox, outboxSql } from '../../src/outbox/index.js';
import { inTransaction, rows, type TestSchema, testSchema } from './support.js';

describe('outbox table and enqueue', () => {
  let t: TestSchema;
  before(async () => {
    t = await testSchema();
  });
  after(async () => {
    await t.drop();
  });

  it('init runs twice without changing anything and renders other names', async () => {
    const c = await t.pool.connect();
    try {
      await initOutbox(c, { schema: t.schema });
    } finally {
      c.release();
    }
    const roles = await t.pool.query(`SELECT count(*)::int AS n FROM "${t.schema}".redfence_outbox_role`);
    assert.equal(roles.rows[0].n, 4);
    const sql = outboxSql({ table: 'orders_outbox', schema: 'app' });
    assert.match(sql, /CREATE TABLE IF NOT EXISTS orders_outbox \(/);
    assert.match(sql, /pg_notify\('orders_outbox'/);
    assert.doesNotMatch(sql, /redfence_outbox/);
    assert.throws(
      () => outboxSql({ table: 'Bad-Name' }),
      (e) => RedfenceError.is(e, 'RF_INVALID_OPTIONS'),
    );
  });

  it('a committed event is a pending row; a rolled-back one leaves nothing', async () => {
    const [id] = await inTransaction(t.pool, (c) =>
      enqueue(
        c,
        {
          aggregateType: 'order',
          aggregateId: 'o-1',
          type: 'created',
          payload: { total: 3 },
          headers: { a: 'b' },
        },
        { schema: t.schema },
      ),
    );
    await assert.rejects(
      inTransaction(t.pool, async (c) => {
        await enqueue(c, { aggregateType: 'order', aggregateId: 'o-1', type: 'gone' }, { schema: t.schema });
        throw new Error('rollback');
      }),
      /rollback/,
    );
    const r = await t.pool.query(
      `SELECT id, aggregatetype, aggregateid, type, payload, headers, state, seq::int FROM "${t.schema}".redfence_outbox`,
    );
    assert.equal(r.rows.length, 1);
    assert.deepEqual(r.rows[0], {
      id,
      aggregatetype: 'order',
      aggregateid: 'o-1',
      type: 'created',
      payload: { total: 3 },
      headers: { a: 'b' },
      state: 'pending',
      seq: 1,
    });
  });

  it('refuses bad events before touching the database', async () => {
    const c = { query: async () => assert.fail('no query expected') };
    for (const e of [
      { aggregateType: '', aggregateId: 'x', type: 't' },
      { aggregateType: 'a', aggregateId: 'x', type: 't', id: 'not-a-uuid' },
      { aggregateType: 'a', aggregateId: 'x', type: 't', headers: { n: 1 } },
    ])
      await assert.rejects(enqueue(c, e as never), (err) => RedfenceError.is(err, 'RF_INVALID_ARGUMENT'));
  });

  it('raw SQL inserts get the same bookkeeping (seq, pos, bucket)', async () => {
    await t.pool.query(
      `INSERT INTO "${t.schema}".redfence_outbox (aggregatetype, aggregateid, type, payload) VALUES ('order', 'o-1', 'paid', '{}')`,
    );
    const r = (await rows(t.pool, t.schema)).filter((x) => x.aggregateid === 'o-1');
    assert.deepEqual(
      r.map((x) => x.seq),
      ['1', '2'],
    );
  });

  it('overlapping writers of one aggregate are numbered in commit order', async () => {
    const s = { schema: t.schema };
    const first = await t.pool.connect();
    const second = await t.pool.connect();
    try {
      // `second` starts first and writes another aggregate (its pos comes first), then waits on `first`.
      const secondPid = (await second.query('SELECT pg_backend_pid() AS p')).rows[0].p as number;
      await second.query('BEGIN');
      await enqueue(second, { aggregateType: 'cart', aggregateId: 'other', type: 'x' }, s);
      await first.query('BEGIN');
      await enqueue(first, { aggregateType: 'cart', aggregateId: 'c-1', type: 'a' }, s);
      let secondDone = false;
      const blocked = enqueue(second, { aggregateType: 'cart', aggregateId: 'c-1', type: 'b' }, s).then(
        (v) => {
          secondDone = true;
          return v;
        },
      );
      // `second` cannot take a number for c-1 while `first` is open: it waits on a lock
      await pollUntil(
        'second writer waiting on a lock',
        async () => {
          const r = await t.pool.query(
            `SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`,
            [secondPid],
          );
          return r.rows[0].n === 1;
        },
        10_000,
        20,
      );
      assert.equal(secondDone, false);
      await first.query('COMMIT');
      await blocked;
      await second.query('COMMIT');
    } finally {
      first.release();
      second.release();
    }
    const r = (await rows(t.pool, t.schema)).filter((x) => x.aggregateid === 'c-1');
    const types = await t.pool.query(
      `SELECT type FROM "${t.schema}".redfence_outbox WHERE aggregateid = 'c-1' ORDER BY seq`,
    );
    assert.deepEqual(
      types.rows.map((x) => x.type),
      ['a', 'b'],
    );
    assert.ok(Number(r[0]?.pos) < Number(r[1]?.pos), 'pos follows commit order within the aggregate');
  });
});
