/**
 * Relays share the roles: a second relay gets half of them (the first gives its surplus back), and when
 * it closes (giving its roles back at once) the first takes them all again; no role is ever held by two.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { OutboxRelay } from '../../src/outbox/index.js';
import { DATABASE_URL, KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { pollUntil } from '../helpers/kafka.js';
import { type TestSchema, testSchema } from './support.js';

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
    assert.deepEqual(a.roles, [0, 1, 2, 3, 4, 5, 6, 7]);
    const b = relay('b');
    await b.start();
    const owners = async () =>
      (await t.pool.query(`SELECT role, owner FROM "${t.schema}".redfence_outbox_role ORDER BY role`))
        .rows as Array<{
        role: number;
        owner: string | null;
      }>;
    await pollUntil('four roles each', () => a.roles.length === 4 && b.roles.length === 4, 20_000, 50);
    assert.deepEqual([...a.roles, ...b.roles].sort(), [0, 1, 2, 3, 4, 5, 6, 7], 'each role held once');
    const table = await owners();
    for (const r of table)
      assert.equal(r.owner, (a.roles.includes(r.role) ? a : b).options.relayId, `owner of role ${r.role}`);
    await b.close();
    await pollUntil('the first relay holds all again', () => a.roles.length === 8, 20_000, 50);
    const text = await registry.metrics();
    assert.match(text, /redfence_outbox_role_changes_total\{change="released"\} 4/);
    assert.match(text, /redfence_outbox_role_changes_total\{change="gained"\} 12/);
  });
});
