/**
 * A row parked because its topic does not exist (real PostgreSQL and broker): the relay's log line says
 * why and what to do (`outbox rows parked: topic "<prefix>.nosuchtopic" does not exist; create the topic
 * ..., then redfence outbox retry --all`), and redfence_outbox_parked_total carries the reason as a
 * bounded class (`reason="topic-missing"`), never the reason's text. Before, the line was only
 * `outbox rows parked` with the role and the count, and the counter had no label.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { enqueue, OutboxRelay } from '../../src/outbox/index.js';
import { DATABASE_URL, KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil } from '../helpers/kafka.js';
import { deleteTopics, inTransaction, rows, testSchema } from './support.js';

describe('a parked row says why, in the log and the metric', { timeout: 90_000 }, () => {
  it('topic missing: the reason and the fix in the log line, reason="topic-missing" on the counter', async () => {
    const t = await testSchema();
    after(() => t.drop());
    const prefix = uniqueName('obxpark');
    after(await createTopics([{ topic: `${prefix}.order`, partitions: 1 }]));
    after(() => deleteTopics([`${prefix}.progress`]));
    const warnings: Array<{ obj: Record<string, unknown>; msg: string }> = [];
    const noop = () => undefined;
    const registry = new Registry();
    const relay = new OutboxRelay({
      databaseUrl: DATABASE_URL,
      brokers: KAFKA_BROKERS.split(','),
      schema: t.schema,
      topicTemplate: `${prefix}.\${aggregatetype}`,
      progressTopic: `${prefix}.progress`,
      transactionalIdPrefix: prefix,
      maxAttempts: 1,
      pollIntervalMs: 200,
      leaseMs: 3000,
      metrics: registry,
      logger: {
        debug: noop,
        info: noop,
        error: noop,
        warn: (obj, msg) => warnings.push({ obj: obj as Record<string, unknown>, msg: msg ?? '' }),
      },
    });
    after(() => relay.close());
    await relay.start();
    const [missing] = await inTransaction(t.pool, (c) =>
      enqueue(
        c,
        { aggregateType: 'nosuchtopic', aggregateId: 'p-1', type: 'first', payload: { secret: 'v-9' } },
        { schema: t.schema },
      ),
    );
    await pollUntil(
      'the row parked',
      async () => (await rows(t.pool, t.schema)).find((r) => r.id === missing)?.state === 'parked',
      30_000,
    );
    await pollUntil(
      'the parked line logged',
      () => warnings.some((w) => w.msg.startsWith('outbox rows parked')),
      10_000,
      20,
    );
    const line = warnings.find((w) => w.msg.startsWith('outbox rows parked'));
    assert.equal(
      line?.msg,
      `outbox rows parked: topic "${prefix}.nosuchtopic" does not exist; create the topic (or fix --topic-template), then redfence outbox retry --all`,
    );
    assert.equal(line?.obj.reason, 'topic-missing');
    assert.equal(line?.obj.parked, 1);
    const text = await registry.metrics();
    assert.match(text, /^redfence_outbox_parked_total\{reason="topic-missing"\} 1$/m);
    assert.doesNotMatch(text, /nosuchtopic|v-9/, 'no free text in labels');
  });
});
