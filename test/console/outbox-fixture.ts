/**
 * An outbox for the console's tests, in real PostgreSQL (a schema of its own, as test/outbox/ makes
 * them) and the real broker: one row parked by a real relay (its topic does not exist, one attempt),
 * then the relay closed so the row stays as the relay left it; one pending row of another aggregate
 * type, written after. The schema, the topics and the pool go when the test ends.
 */
import type { TestContext } from 'node:test';
import { outboxSource } from '../../src/console/outbox-source.js';
import type { OutboxSource } from '../../src/console/view.js';
import { enqueue, OutboxRelay } from '../../src/outbox/index.js';
import { outboxNames } from '../../src/outbox/schema.js';
import { DATABASE_URL, KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil } from '../helpers/kafka.js';
import { deleteTopics, inTransaction, type Row, rows, testSchema } from '../outbox/support.js';

export const AGGREGATE_ID = 'customer-aggregate-5150';
export const PAYLOAD_SECRET = 'payload-secret-2718';

export interface OutboxWorld {
  source: OutboxSource;
  schema: string;
  parkedId: string;
  pendingId: string;
  row(id: string): Promise<Row | undefined>;
}

export async function parkedOutbox(t: TestContext): Promise<OutboxWorld> {
  const s = await testSchema();
  t.after(() => s.drop());
  const prefix = uniqueName('console-obx');
  t.after(await createTopics([{ topic: `${prefix}.order`, partitions: 1 }]));
  t.after(() => deleteTopics([`${prefix}.progress`]));
  const noop = () => undefined;
  const relay = new OutboxRelay({
    databaseUrl: DATABASE_URL,
    brokers: KAFKA_BROKERS.split(','),
    schema: s.schema,
    topicTemplate: `${prefix}.\${aggregatetype}`,
    progressTopic: `${prefix}.progress`,
    transactionalIdPrefix: prefix,
    maxAttempts: 1,
    pollIntervalMs: 200,
    leaseMs: 3000,
    logger: { debug: noop, info: noop, warn: noop, error: noop },
  });
  t.after(() => relay.close());
  await relay.start();
  const event = (aggregateType: string) => ({
    aggregateType,
    aggregateId: AGGREGATE_ID,
    type: 'created',
    payload: { secret: PAYLOAD_SECRET },
  });
  const [parkedId] = await inTransaction(s.pool, (c) =>
    enqueue(c, event('nosuchtopic'), { schema: s.schema }),
  );
  const row = async (id: string) => (await rows(s.pool, s.schema)).find((r) => r.id === id);
  await pollUntil('the row parked', async () => (await row(parkedId as string))?.state === 'parked', 30_000);
  await relay.close();
  const [pendingId] = await inTransaction(s.pool, (c) => enqueue(c, event('order'), { schema: s.schema }));
  return {
    source: outboxSource(s.pool, outboxNames({ schema: s.schema })),
    schema: s.schema,
    parkedId: parkedId as string,
    pendingId: pendingId as string,
    row,
  };
}
