/**
 * Kafka away while writers enqueue (exactly-once): the relay reaches the shared broker through a proxy
 * that rewrites the broker's advertised address (kafka-proxy.ts), so cutting the proxy takes Kafka away
 * from this relay only. While cut, pending rows grow and none is parked (maxAttempts 1: a single
 * counted attempt would park its row); once restored, the relay catches up by itself and every
 * committed row is on the topic exactly once (read_committed), each aggregate in commit order.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { OutboxRelay } from '../../src/outbox/index.js';
import { DATABASE_URL, KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil } from '../helpers/kafka.js';
import { KafkaProxy } from './kafka-proxy.js';
import {
  assertPublishedOnceInOrder,
  deleteTopics,
  stateCounts,
  type TestSchema,
  testSchema,
  writers,
} from './support.js';

const [host, port] = (KAFKA_BROKERS.split(',')[0] as string).split(':') as [string, string];

describe('outbox relay: Kafka away and back', { timeout: 60_000 }, () => {
  let t: TestSchema;
  let prefix: string;
  let dropTopics: () => Promise<void>;
  let proxy: KafkaProxy;
  let relay: OutboxRelay | undefined;
  before(async () => {
    t = await testSchema();
    prefix = uniqueName('obxdown');
    dropTopics = await createTopics([{ topic: `${prefix}.order`, partitions: 3 }]);
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

  it('pending rows grow, none parked; after the restore every row published once, in order', async () => {
    relay = new OutboxRelay({
      databaseUrl: DATABASE_URL,
      brokers: [proxy.address],
      schema: t.schema,
      topicTemplate: `${prefix}.\${aggregatetype}`,
      progressTopic: `${prefix}.progress`,
      transactionalIdPrefix: prefix,
      pollIntervalMs: 200,
      leaseMs: 3000,
      maxAttempts: 1,
      transactionTimeoutMs: 3000,
      retentionMs: 0,
      // reconnect within a second of the restore (librdkafka's default backoff grows to 10 s)
      kafka: { config: { 'reconnect.backoff.max.ms': 500 } },
    });
    await relay.start();
    const w = writers(t.pool, t.schema, { writers: 2, aggregates: 12, pauseMs: 5 });
    let committed: string[] = [];
    try {
      await pollUntil(
        'rows published through the proxy',
        async () => {
          return (await stateCounts(t.pool, t.schema)).published >= 50;
        },
        20_000,
      );
      proxy.cut();
      const atCut = await stateCounts(t.pool, t.schema);
      await pollUntil(
        'pending rows grow while Kafka is away',
        async () => {
          const c = await stateCounts(t.pool, t.schema);
          assert.equal(c.parked, 0, 'nothing parked for a connectivity failure');
          return c.pending >= atCut.pending + 200;
        },
        20_000,
      );
      // the batches in flight at the cut have ended by now (failed or committed): from here on nothing
      // may be published until the restore
      const cut = await stateCounts(t.pool, t.schema);
      await pollUntil(
        'more rows pending, still cut',
        async () => {
          return (await stateCounts(t.pool, t.schema)).pending >= cut.pending + 200;
        },
        20_000,
      );
      const later = await stateCounts(t.pool, t.schema);
      assert.equal(later.published, cut.published, 'nothing published while Kafka is away');
      assert.equal(later.parked, 0);
      assert.ok(proxy.connections > 0, 'the relay went through the proxy');
      proxy.restore();
      await pollUntil(
        'rows published after the restore',
        async () => {
          return (await stateCounts(t.pool, t.schema)).published > cut.published + 50;
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
    await assertPublishedOnceInOrder(t.pool, t.schema, `${prefix}.order`, committed);
  });
});
