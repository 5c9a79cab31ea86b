/**
 * Wake-up by LISTEN/NOTIFY: with a poll interval of ten minutes, a committed row is published within
 * seconds (only the commit's NOTIFY can have woken the relay), several times in a row.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { enqueue, OutboxRelay } from '../../src/outbox/index.js';
import { DATABASE_URL, KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil } from '../helpers/kafka.js';
import { inTransaction, rows, type TestSchema, testSchema } from './support.js';

describe('outbox relay wake-up', () => {
  let t: TestSchema;
  let prefix: string;
  let dropTopics: () => Promise<void>;
  let relay: OutboxRelay | undefined;
  before(async () => {
    t = await testSchema();
    prefix = uniqueName('obxw');
    dropTopics = await createTopics([{ topic: `${prefix}.acct`, partitions: 1 }]);
  });
  after(async () => {
    await relay?.close();
    await dropTopics?.();
    await t?.drop();
  });

  it('publishes on NOTIFY without waiting for the poll interval', async () => {
    relay = new OutboxRelay({
      databaseUrl: DATABASE_URL,
      brokers: KAFKA_BROKERS.split(','),
      schema: t.schema,
      mode: 'at-least-once',
      topicTemplate: `${prefix}.$\{aggregatetype}`,
      pollIntervalMs: 600_000,
    });
    await relay.start();
    for (let i = 0; i < 3; i++) {
      const [id] = await inTransaction(t.pool, (c) =>
        enqueue(c, { aggregateType: 'acct', aggregateId: `w-${i}`, type: 'x' }, { schema: t.schema }),
      );
      const started = performance.now();
      await pollUntil(
        `row ${i} published`,
        async () => (await rows(t.pool, t.schema)).find((r) => r.id === id)?.state === 'published',
        20_000,
        20,
      );
      assert.ok(performance.now() - started < 20_000);
    }
  });
});
