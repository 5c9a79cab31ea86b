/**
 * Two services, each with its own database and an outbox of the same table name, relayed with the
 * default names onto one Kafka cluster: the default progress topic and transactional ids carry only
 * the table name, so both would use the same ones. The second relay must refuse to start
 * (RF_OUTBOX_NAME_CLASH) before it fences the first or reads its progress; the first goes on publishing
 * each row once; with its own names the second runs. A restarted relay of the first outbox is no clash,
 * and a progress record written by an older relay (no outbox identity in it) is still honoured: its
 * rows are marked, not published again.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { RedfenceError } from '../../src/errors/index.js';
import { enqueue, initOutbox, OutboxRelay, type RelayOptions } from '../../src/outbox/index.js';
import { DATABASE_URL, KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil, produce, readToEnd } from '../helpers/kafka.js';
import { deleteTopics, inTransaction } from './support.js';

/** One service's database (made for this file, dropped after it) with an outbox of table `table`. */
interface ServiceDb {
  url: string;
  pool: pg.Pool;
}

const suffix = randomBytes(4).toString('hex');
/** The same table name in both databases: unique to this run, so the default topic names are too. */
const table = `rf_clash_${suffix}`;
const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
admin.on('error', () => undefined);

async function serviceDb(name: string): Promise<ServiceDb> {
  const db = `rf_outbox_test_${suffix}_${name}`;
  await admin.query(`CREATE DATABASE "${db}"`);
  const u = new URL(DATABASE_URL);
  u.pathname = `/${db}`;
  const pool = new pg.Pool({ connectionString: u.toString(), max: 5 });
  pool.on('error', () => undefined);
  const c = await pool.connect();
  try {
    // no schema: the connection's search_path, as a service with the default settings has it
    await initOutbox(c, { table });
  } finally {
    c.release();
  }
  return { url: u.toString(), pool };
}

async function dropDb(s: ServiceDb | undefined): Promise<void> {
  if (!s) return;
  await s.pool.end().catch(() => undefined);
  const db = new URL(s.url).pathname.slice(1);
  await admin.query(`DROP DATABASE IF EXISTS "${db}" WITH (FORCE)`).catch(() => undefined);
}

const pending = async (s: ServiceDb, t = table) =>
  (await s.pool.query(`SELECT count(*)::int AS n FROM "${t}" WHERE state = 'pending'`)).rows[0].n as number;

describe('outbox relays of two databases with the same table name', () => {
  let a: ServiceDb;
  let b: ServiceDb;
  const aggregateType = uniqueName('clash');
  const topic = `outbox.event.${aggregateType}`;
  const defaultProgress = `redfence-outbox-progress.${table}`;
  const own = uniqueName('obx-own');
  const extraTopics = [defaultProgress, `${own}.progress`];
  let dropTopics: () => Promise<void>;
  const relays: OutboxRelay[] = [];

  before(async () => {
    a = await serviceDb('a');
    b = await serviceDb('b');
    dropTopics = await createTopics([{ topic, partitions: 3 }]);
  });
  after(async () => {
    await Promise.all(relays.map((r) => r.close()));
    await dropTopics?.();
    await deleteTopics(extraTopics);
    await dropDb(a);
    await dropDb(b);
    await admin.end();
  });

  /** A relay with the default names (only the table is given), exactly-once. */
  const relay = (s: ServiceDb, extra: Partial<RelayOptions> = {}, t = table) => {
    const r = new OutboxRelay({
      databaseUrl: s.url,
      brokers: KAFKA_BROKERS.split(','),
      table: t,
      pollIntervalMs: 200,
      leaseMs: 3000,
      retentionMs: 0,
      ...extra,
    });
    relays.push(r);
    return r;
  };
  const write = (s: ServiceDb, n: number, tag: string, t = table) =>
    inTransaction(s.pool, (c) =>
      enqueue(
        c,
        Array.from({ length: n }, (_, i) => ({
          aggregateType,
          aggregateId: `${tag}-${i}`,
          type: 'Changed',
          payload: { tag, i },
        })),
        { table: t },
      ),
    );

  it('refuses the second outbox on the first one’s default names, before it can fence it', async () => {
    const first = relay(a);
    await first.start();
    const aIds = await write(a, 8, 'a');
    await pollUntil('the first outbox published', async () => (await pending(a)) === 0);

    const bIds = await write(b, 5, 'b');
    const second = relay(b);
    await assert.rejects(second.start(), (err: unknown) => {
      assert.ok(RedfenceError.is(err, 'RF_OUTBOX_NAME_CLASH'), `got ${String(err)}`);
      assert.match(err.message, new RegExp(defaultProgress.replace(/\./g, '\\.')));
      assert.match(err.message, /progressTopic/);
      assert.match(err.message, /transactionalIdPrefix/);
      return true;
    });
    assert.equal(second.state, 'closed');
    assert.equal(await pending(b), bIds.length, 'the refused relay published nothing');

    // the first relay was not fenced: it still holds every role and publishes
    assert.deepEqual(first.roles, [0, 1, 2, 3]);
    aIds.push(...(await write(a, 6, 'a2')));
    await pollUntil('the first outbox published again', async () => (await pending(a)) === 0);
    assert.deepEqual(first.roles, [0, 1, 2, 3]);

    // a restart of the first outbox's relay with the same default names is no clash
    await first.close();
    const again = relay(a);
    await again.start();
    aIds.push(...(await write(a, 4, 'a3')));
    await pollUntil('the restarted relay published', async () => (await pending(a)) === 0);

    // with names of its own, the second outbox runs
    const named = relay(b, { progressTopic: `${own}.progress`, transactionalIdPrefix: own });
    await named.start();
    await pollUntil('the second outbox published', async () => (await pending(b)) === 0);

    const out = await readToEnd(topic);
    const seen = out.map((r) => String(r.headers.id ?? ''));
    assert.deepEqual([...seen].sort(), [...aIds, ...bIds].sort(), 'every row of both outboxes, once');
  });

  it('a relay that started first on the empty topic refuses the roles the other outbox wrote, without fencing it', async () => {
    const t = `${table}_w`;
    for (const s of [a, b]) {
      const c = await s.pool.connect();
      try {
        await initOutbox(c, { table: t });
      } finally {
        c.release();
      }
    }
    extraTopics.push(`redfence-outbox-progress.${t}`);
    const errors: Array<{ code?: unknown; msg?: string }> = [];
    const noop = () => undefined;
    const logger = {
      debug: noop,
      info: noop,
      warn: noop,
      error: (o: object, msg?: string) => errors.push({ ...o, msg }),
    };
    // b's relay first, with nothing to publish: it writes no progress, so a's relay cannot see it
    const early = relay(b, { logger }, t);
    await early.start();
    const first = relay(a, {}, t);
    await first.start();
    const aIds = await write(a, 40, 'w', t);
    const roles = await a.pool.query(`SELECT DISTINCT bucket % 4 AS r FROM "${t}"`);
    assert.equal(roles.rows.length, 4, 'a has progress on every role');
    await pollUntil('a published', async () => (await pending(a, t)) === 0);

    // now b has rows: its old producers were fenced by a's; the roles it takes again are checked first
    const bIds = await write(b, 5, 'wb', t);
    await pollUntil('b refused a role', () => errors.some((e) => e.code === 'RF_OUTBOX_NAME_CLASH'));
    assert.match(String(errors[0]?.msg), /progressTopic and transactionalIdPrefix/);
    aIds.push(...(await write(a, 12, 'w2', t)));
    await pollUntil('a published again', async () => (await pending(a, t)) === 0);
    assert.deepEqual(first.roles, [0, 1, 2, 3], 'a was not fenced');
    assert.equal(await pending(b, t), bIds.length, 'b published nothing');
    const out = (await readToEnd(topic)).map((x) => String(x.headers.id ?? ''));
    for (const id of aIds) assert.equal(out.filter((x) => x === id).length, 1, 'each of a’s rows once');
    await early.close();
  });

  it('honours a progress record an older relay wrote (no outbox identity): its rows are not published again', async (t) => {
    const legacy = `${table}_l`;
    const c = await a.pool.connect();
    try {
      await initOutbox(c, { table: legacy });
    } finally {
      c.release();
    }
    const legacyProgress = `redfence-outbox-progress.${legacy}`;
    extraTopics.push(legacyProgress);
    const ids = await write(a, 10, 'legacy', legacy);
    // as an older relay left it: these rows committed to Kafka with their progress record, then it
    // died before marking them in PostgreSQL
    const { rows } = await a.pool.query<{ id: string; role: number }>(
      `SELECT id, bucket % 4 AS role FROM "${legacy}" WHERE id = ANY($1::uuid[])`,
      [ids.slice(0, 3)],
    );
    // the helper's admin client stays connected until its clean-up runs (it would keep the file alive)
    const dropLegacy = await createTopics([{ topic: legacyProgress, partitions: 4 }]);
    t.after(dropLegacy);
    const byRole = new Map<number, string[]>();
    for (const r of rows) byRole.set(r.role, [...(byRole.get(r.role) ?? []), r.id]);
    await produce(
      legacyProgress,
      [...byRole].map(([role, roleIds]) => ({
        key: `role-${role}`,
        partition: role,
        value: JSON.stringify({ epoch: 1, ids: roleIds }),
      })),
    );

    const r = relay(a, {}, legacy);
    await r.start();
    await pollUntil('the legacy outbox published', async () => (await pending(a, legacy)) === 0);
    const out = (await readToEnd(topic)).map((x) => String(x.headers.id ?? ''));
    for (const id of ids.slice(0, 3))
      assert.ok(!out.includes(id), 'a row in the old progress record is not re-published');
    for (const id of ids.slice(3)) assert.equal(out.filter((x) => x === id).length, 1, 'the others once');
  });
});
