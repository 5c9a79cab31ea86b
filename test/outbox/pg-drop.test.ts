/**
 * PostgreSQL connections dropped under a running relay (exactly-once), in a database of its own: while
 * writers enqueue, every backend of the relay (found by its application_name) is terminated, three
 * times. The relay recovers by itself (its pool reconnects, LISTEN is taken up again, lease rounds and
 * marks are retried) and every committed row is on the topic exactly once (read_committed), each
 * aggregate in commit order.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { OutboxRelay } from '../../src/outbox/index.js';
import { DATABASE_URL, KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil } from '../helpers/kafka.js';
import {
  assertPublishedOnceInOrder,
  deleteTopics,
  stateCounts,
  type TestSchema,
  testSchema,
  writers,
} from './support.js';

const database = `rf_outbox_pgdrop_${randomBytes(4).toString('hex')}`;
const url = new URL(DATABASE_URL);
url.pathname = `/${database}`;
const databaseUrl = url.toString();

describe('outbox relay: PostgreSQL connections dropped', { timeout: 60_000 }, () => {
  let admin: pg.Pool;
  let t: TestSchema;
  let prefix: string;
  let dropTopics: () => Promise<void>;
  let relay: OutboxRelay | undefined;
  before(async () => {
    admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
    admin.on('error', () => undefined);
    await admin.query(`CREATE DATABASE ${database}`);
    t = await testSchema(databaseUrl);
    prefix = uniqueName('obxpg');
    dropTopics = await createTopics([{ topic: `${prefix}.order`, partitions: 3 }]);
  });
  after(async () => {
    await relay?.close();
    await dropTopics?.();
    await deleteTopics([`${prefix}.progress`]);
    await t?.drop();
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => undefined);
    await admin.end();
  });

  it("recovers from its backends' termination; every committed row published once, in order", async () => {
    const relayId = uniqueName('pgdrop');
    relay = new OutboxRelay({
      databaseUrl,
      brokers: KAFKA_BROKERS.split(','),
      schema: t.schema,
      relayId,
      topicTemplate: `${prefix}.\${aggregatetype}`,
      progressTopic: `${prefix}.progress`,
      transactionalIdPrefix: prefix,
      pollIntervalMs: 200,
      leaseMs: 3000,
      retentionMs: 0,
    });
    await relay.start();
    const terminate = async (): Promise<number> => {
      const r = await admin.query(
        `SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
         WHERE datname = $1 AND application_name = $2`,
        [database, `redfence-outbox ${relayId}`],
      );
      return r.rows[0].n;
    };
    const w = writers(t.pool, t.schema, { writers: 2, aggregates: 12, pauseMs: 5 });
    let committed: string[] = [];
    try {
      for (let round = 0; round < 3; round++) {
        const before = (await stateCounts(t.pool, t.schema)).published;
        await pollUntil(
          `round ${round}: the relay publishes`,
          async () => {
            return (await stateCounts(t.pool, t.schema)).published >= before + 100;
          },
          30_000,
        );
        assert.ok((await terminate()) > 0, "the relay's backends were found and terminated");
      }
      const last = (await stateCounts(t.pool, t.schema)).published;
      await pollUntil(
        'the relay publishes after the last termination',
        async () => {
          return (await stateCounts(t.pool, t.schema)).published >= last + 100;
        },
        30_000,
      );
    } finally {
      committed = await w.stop();
    }
    await pollUntil(
      'everything published',
      async () => {
        const c = await stateCounts(t.pool, t.schema);
        assert.equal(c.parked, 0, 'nothing parked');
        return c.pending === 0;
      },
      30_000,
    );
    assert.ok(relay.roles.length > 0, 'the relay still holds its roles');
    await pollUntil(
      'the relay listens again',
      async () => {
        const r = await admin.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity
         WHERE datname = $1 AND application_name = $2 AND query LIKE 'LISTEN %'`,
          [database, `redfence-outbox ${relayId}`],
        );
        return r.rows[0].n === 1;
      },
      10_000,
    );
    await assertPublishedOnceInOrder(t.pool, t.schema, `${prefix}.order`, committed);
  });
});
