/**
 * Relays share the roles: a second relay gets half of them (the first gives its surplus back), and when
 * it closes (giving its roles back at once) the first takes them all again; no role is ever held by two.
 * An outbox made with another role count (init's `roles`) keeps it: its relays share that many, every row
 * is published once in order in exactly-once mode, and an init naming another count is refused.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { RedfenceError } from '../../src/errors/index.js';
import { enqueue, initOutbox, OutboxRelay, outboxSql } from '../../src/outbox/index.js';
import { DATABASE_URL, KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil } from '../helpers/kafka.js';
import {
  assertPublishedOnceInOrder,
  deleteTopics,
  inTransaction,
  type TestSchema,
  testSchema,
} from './support.js';

describe('outbox relay roles', () => {
  let t: TestSchema;
  const relays: OutboxRelay[] = [];
  before(async () => {
    t = await testSchema();
  });
  after(async () => {
    await Promise.all(relays.map((r) => r.close()));
    await t?.drop();
  });

  const relay = (name: string, registry?: Registry) => {
    const r = new OutboxRelay({
      databaseUrl: DATABASE_URL,
      brokers: KAFKA_BROKERS.split(','),
      schema: t.schema,
      mode: 'at-least-once',
      relayId: `${name}-${uniqueName('r')}`,
      leaseMs: 900,
      ...(registry ? { metrics: registry } : {}),
    });
    relays.push(r);
    return r;
  };

  it('splits the roles between two relays and gives them back on close', async () => {
    const registry = new Registry();
    const a = relay('a', registry);
    await a.start();
    assert.deepEqual(a.roles, [0, 1, 2, 3]);
    const b = relay('b');
    await b.start();
    const owners = async () =>
      (await t.pool.query(`SELECT role, owner FROM "${t.schema}".redfence_outbox_role ORDER BY role`))
        .rows as Array<{
        role: number;
        owner: string | null;
      }>;
    await pollUntil('two roles each', () => a.roles.length === 2 && b.roles.length === 2, 20_000, 50);
    assert.deepEqual([...a.roles, ...b.roles].sort(), [0, 1, 2, 3], 'each role held once');
    const table = await owners();
    for (const r of table)
      assert.equal(r.owner, (a.roles.includes(r.role) ? a : b).relayId, `owner of role ${r.role}`);
    await b.close();
    await pollUntil('the first relay holds all again', () => a.roles.length === 4, 20_000, 50);
    const text = await registry.metrics();
    assert.match(text, /redfence_outbox_role_changes_total\{change="released"\} 2/);
    assert.match(text, /redfence_outbox_role_changes_total\{change="gained"\} 6/);
  });
});

describe('an outbox made with 3 roles', () => {
  let t: TestSchema;
  let prefix: string;
  let dropTopics: (() => Promise<void>) | undefined;
  const relays: OutboxRelay[] = [];
  before(async () => {
    t = await testSchema(DATABASE_URL, 3);
    prefix = uniqueName('obx-roles');
    dropTopics = await createTopics([{ topic: `${prefix}.order`, partitions: 2 }]);
  });
  after(async () => {
    await Promise.all(relays.map((r) => r.close()));
    await dropTopics?.();
    if (t) await deleteTopics([`${prefix}.progress`]);
    await t?.drop();
  });

  const roleRows = async () =>
    (await t.pool.query(`SELECT role FROM "${t.schema}".redfence_outbox_role ORDER BY role`)).rows.map(
      (r: { role: number }) => r.role,
    );

  it('keeps its count: a second init with another count is refused and changes nothing', async () => {
    assert.deepEqual(await roleRows(), [0, 1, 2]);
    const c = await t.pool.connect();
    try {
      await assert.rejects(
        initOutbox(c, { schema: t.schema, roles: 4 }),
        (e) => RedfenceError.is(e, 'RF_INVALID_OPTIONS') && /already has 3 roles, not 4/.test(e.message),
      );
      await initOutbox(c, { schema: t.schema, roles: 3 });
      await initOutbox(c, { schema: t.schema });
    } finally {
      c.release();
    }
    assert.deepEqual(await roleRows(), [0, 1, 2]);
    for (const bad of [0, 65, 2.5, Number.NaN])
      assert.throws(
        () => outboxSql({ roles: bad }),
        (e) =>
          RedfenceError.is(e, 'RF_INVALID_OPTIONS') &&
          /roles must be an integer from 1 to 64/.test(e.message),
        String(bad),
      );
    assert.match(outboxSql({ roles: 5 }), /generate_series\(0, 5 - 1\)/);
  });

  it('two exactly-once relays share its 3 roles and publish every row once, in order', async () => {
    const relay = (name: string) => {
      const r = new OutboxRelay({
        databaseUrl: DATABASE_URL,
        brokers: KAFKA_BROKERS.split(','),
        schema: t.schema,
        mode: 'exactly-once',
        topicTemplate: `${prefix}.\${aggregatetype}`,
        progressTopic: `${prefix}.progress`,
        transactionalIdPrefix: prefix,
        relayId: `${name}-${uniqueName('r')}`,
        pollIntervalMs: 200,
        leaseMs: 3000,
      });
      relays.push(r);
      return r;
    };
    const a = relay('a');
    await a.start();
    assert.deepEqual(a.roles, [0, 1, 2]);
    const b = relay('b');
    await b.start();
    await pollUntil(
      'the roles split 2 + 1',
      () => a.roles.length + b.roles.length === 3 && b.roles.length > 0,
      20_000,
      50,
    );
    const committed: string[] = [];
    for (let i = 0; i < 30; i++) {
      const events = Array.from({ length: 5 }, (_, j) => ({
        aggregateType: 'order',
        aggregateId: `a-${(i * 5 + j) % 17}`,
        type: 'Changed',
        payload: { i, j },
      }));
      committed.push(...(await inTransaction(t.pool, (c) => enqueue(c, events, { schema: t.schema }))));
    }
    await pollUntil(
      'every row published',
      async () =>
        (
          await t.pool.query(
            `SELECT count(*)::int AS n FROM "${t.schema}".redfence_outbox WHERE state = 'published'`,
          )
        ).rows[0].n === committed.length,
      60_000,
      100,
    );
    await assertPublishedOnceInOrder(t.pool, t.schema, `${prefix}.order`, committed);
  });
});
