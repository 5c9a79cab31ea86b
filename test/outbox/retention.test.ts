/**
 * Retention and metrics of a running relay: published rows older than retentionMs are deleted in
 * bounded batches (pending and parked rows never), and the relay's metrics (all redfence_outbox_*) show
 * what it published, parked, deleted and the roles it gained.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { enqueue, OutboxRelay, purgePublished } from '../../src/outbox/index.js';
import { outboxNames } from '../../src/outbox/schema.js';
import { DATABASE_URL, KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil } from '../helpers/kafka.js';
import { inTransaction, rows, type TestSchema, testSchema } from './support.js';

describe('outbox retention and metrics', () => {
  let t: TestSchema;
  let prefix: string;
  let dropTopics: () => Promise<void>;
  let relay: OutboxRelay | undefined;
  const registry = new Registry();
  before(async () => {
    t = await testSchema();
    prefix = uniqueName('obxr');
    dropTopics = await createTopics([{ topic: `${prefix}.acct`, partitions: 2 }]);
  });
  after(async () => {
    await relay?.close();
    await dropTopics?.();
    await t?.drop();
  });

  it('one purge round deletes at most batch x rounds rows, only published ones past the age', async () => {
    const s = { schema: t.schema };
    await inTransaction(t.pool, (c) =>
      enqueue(
        c,
        Array.from({ length: 30 }, (_, i) => ({ aggregateType: 'old', aggregateId: `o-${i}`, type: 'x' })),
        s,
      ),
    );
    await t.pool.query(
      `UPDATE "${t.schema}".redfence_outbox SET state = 'published', published_at = now() - interval '1 hour'
       WHERE aggregatetype = 'old' AND aggregateid <> 'o-0'`,
    );
    const n = outboxNames(s);
    assert.equal(await purgePublished(t.pool, n, 60_000, 4, 3), 12, 'three statements of four');
    assert.equal(await purgePublished(t.pool, n, 7_200_000, 4, 3), 0, 'none older than two hours');
    assert.equal(await purgePublished(t.pool, n, 60_000, 100, 3), 17);
    const left = await rows(t.pool, t.schema);
    assert.deepEqual(
      left.map((r) => [r.aggregateid, r.state]),
      [['o-0', 'pending']],
    );
    await t.pool.query(`DELETE FROM "${t.schema}".redfence_outbox`);
  });

  it('deletes published rows by age in bounded batches; keeps parked ones', async () => {
    const s = { schema: t.schema };
    await inTransaction(t.pool, (c) =>
      enqueue(
        c,
        Array.from({ length: 150 }, (_, i) => ({
          aggregateType: 'acct',
          aggregateId: `r-${i % 10}`,
          type: 'x',
        })),
        s,
      ),
    );
    const [poison] = await inTransaction(t.pool, (c) =>
      enqueue(c, { aggregateType: 'missing', aggregateId: 'p', type: 'x' }, s),
    );
    relay = new OutboxRelay({
      databaseUrl: DATABASE_URL,
      brokers: KAFKA_BROKERS.split(','),
      schema: t.schema,
      mode: 'at-least-once',
      topicTemplate: `${prefix}.$\{aggregatetype}`,
      retentionMs: 300,
      retentionBatch: 4,
      maxAttempts: 2,
      leaseMs: 600,
      pollIntervalMs: 100,
      metrics: registry,
    });
    await relay.start();
    await pollUntil(
      'published rows deleted, the parked row kept',
      async () => {
        const r = await rows(t.pool, t.schema);
        return r.length === 1 && r[0]?.id === poison && r[0]?.state === 'parked';
      },
      60_000,
      100,
    );
    const text = await registry.metrics();
    const value = (name: string) =>
      Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text)?.[1]);
    assert.equal(value('redfence_outbox_published_total'), 150);
    assert.equal(value('redfence_outbox_retention_deleted_total'), 150);
    assert.equal(value('redfence_outbox_parked_total'), 1);
    assert.equal(value('redfence_outbox_roles_held'), 4);
    assert.match(text, /redfence_outbox_role_changes_total\{change="gained"\} 4/);
    for (const line of text.split('\n').filter((l) => l && !l.startsWith('#')))
      assert.match(line, /^redfence_outbox_/, 'every metric is redfence_outbox_*');
    await pollUntil('the parked row sampled', async () => {
      const m = await registry.metrics();
      return /^redfence_outbox_parked_rows 1$/m.test(m) && /^redfence_outbox_pending_rows 0$/m.test(m);
    });
  });
});
