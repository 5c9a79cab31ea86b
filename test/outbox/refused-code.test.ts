/**
 * A broker error code the relay does not know, from a real broker: a proxy (kafka-proxy.ts) turns the
 * broker's answers to produce requests for one topic into UNKNOWN_SERVER_ERROR (-1). The row counts
 * attempts and is parked after maxAttempts (not retried for ever), its aggregate waits behind it, other
 * aggregates flow; once the broker answers again, a retried row and the one behind it are published
 * (exactly-once: once each, in order, read_committed).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { enqueue, OutboxRelay, type RelayMode, retry } from '../../src/outbox/index.js';
import { outboxNames } from '../../src/outbox/schema.js';
import { DATABASE_URL, KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil, readToEnd } from '../helpers/kafka.js';
import { KafkaProxy } from './kafka-proxy.js';
import { deleteTopics, inTransaction, rows, type TestSchema, testSchema } from './support.js';

const [host, port] = (KAFKA_BROKERS.split(',')[0] as string).split(':') as [string, string];
const UNKNOWN_SERVER_ERROR = -1;

for (const mode of ['exactly-once', 'at-least-once'] as RelayMode[]) {
  describe(`outbox relay (${mode}): an error code it does not know`, { timeout: 60_000 }, () => {
    let t: TestSchema;
    let prefix: string;
    let dropTopics: () => Promise<void>;
    let proxy: KafkaProxy;
    let relay: OutboxRelay | undefined;
    before(async () => {
      t = await testSchema();
      prefix = uniqueName('obxcode');
      dropTopics = await createTopics([
        { topic: `${prefix}.order`, partitions: 2 },
        { topic: `${prefix}.poison`, partitions: 1 },
      ]);
      proxy = new KafkaProxy({ host, port: Number(port) });
      await proxy.listen();
    });
    after(async () => {
      await relay?.close();
      await proxy?.close();
      await dropTopics?.();
      if (t) await deleteTopics([`${prefix}.progress`]);
      await t?.drop();
    });

    it('parks the row after maxAttempts; others flow; retried, it and its follower are published', async () => {
      const s = { schema: t.schema };
      proxy.failProduce(`${prefix}.poison`, UNKNOWN_SERVER_ERROR);
      relay = new OutboxRelay({
        databaseUrl: DATABASE_URL,
        brokers: [proxy.address],
        schema: t.schema,
        mode,
        topicTemplate: `${prefix}.\${aggregatetype}`,
        progressTopic: `${prefix}.progress`,
        transactionalIdPrefix: prefix,
        pollIntervalMs: 200,
        leaseMs: 3000,
        maxAttempts: 3,
        retentionMs: 0,
      });
      await relay.start();
      const [poison, behind] = await inTransaction(t.pool, (c) =>
        enqueue(
          c,
          [
            { aggregateType: 'poison', aggregateId: 'p-1', type: 'first', payload: { n: 1 } },
            { aggregateType: 'poison', aggregateId: 'p-1', type: 'second', payload: { n: 2 } },
          ],
          s,
        ),
      );
      const others = await inTransaction(t.pool, (c) =>
        enqueue(
          c,
          Array.from({ length: 6 }, (_, i) => ({
            aggregateType: 'order',
            aggregateId: `o-${i}`,
            type: 'Placed',
            payload: { i },
          })),
          s,
        ),
      );
      const byId = async () => new Map((await rows(t.pool, t.schema)).map((r) => [r.id, r]));
      await pollUntil(
        'the row parked, the other aggregates published',
        async () => {
          const m = await byId();
          return (
            m.get(poison as string)?.state === 'parked' &&
            others.every((id) => m.get(id)?.state === 'published')
          );
        },
        40_000,
      );
      const m = await byId();
      const parked = m.get(poison as string);
      assert.equal(parked?.attempts, 3, 'parked after maxAttempts attempts');
      assert.match(parked?.last_error ?? '', /code -1, an error code the relay does not know/);
      assert.equal(m.get(behind as string)?.state, 'pending', 'its aggregate waits behind it');
      assert.equal(m.get(behind as string)?.attempts, 0);

      proxy.failProduce(`${prefix}.poison`, undefined);
      assert.equal(await retry(t.pool, outboxNames(s), [poison as string]), 1);
      await pollUntil(
        'both rows of the aggregate published',
        async () => {
          const m = await byId();
          return (
            m.get(poison as string)?.state === 'published' && m.get(behind as string)?.state === 'published'
          );
        },
        30_000,
      );
      const ids = (await readToEnd(`${prefix}.poison`)).map((r) => String(r.headers.id ?? ''));
      if (mode === 'exactly-once') assert.deepEqual(ids, [poison, behind], 'once each, in order');
      else {
        // at-least-once: the records the broker wrote before its answers were turned into errors are
        // there too (consumers drop them by id); first appearances keep the order, and the retry
        // published the row and then its follower
        assert.ok(ids.indexOf(poison as string) < ids.indexOf(behind as string));
        assert.deepEqual(ids.slice(-2), [poison, behind]);
      }
    });
  });
}
