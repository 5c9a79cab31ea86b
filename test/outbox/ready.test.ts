/**
 * start() resolves only once the roles it took can publish: in exactly-once mode, a relay that died
 * after its transactions committed and before it marked the rows left them pending; the next relay's
 * start() has marked them (from the progress records) by the time it resolves, and publishes none again.
 * A recovery that fails (the progress partitions' offsets cannot be read: a proxy, kafka-proxy.ts, turns
 * the broker's answers into errors) is tried again, and the role publishes nothing until it succeeded.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { enqueue, OutboxRelay, type RelayOptions } from '../../src/outbox/index.js';
import { DATABASE_URL, KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil, readToEnd } from '../helpers/kafka.js';
import { KafkaProxy } from './kafka-proxy.js';
import {
  assertPublishedOnceInOrder,
  deleteTopics,
  inTransaction,
  stateCounts,
  type TestSchema,
  testSchema,
} from './support.js';

const [host, port] = (KAFKA_BROKERS.split(',')[0] as string).split(':') as [string, string];
const UNKNOWN_SERVER_ERROR = -1;

describe('outbox relay start()', { timeout: 60_000 }, () => {
  let t: TestSchema;
  let prefix: string;
  let dropTopics: () => Promise<void>;
  const relays: OutboxRelay[] = [];
  before(async () => {
    t = await testSchema();
    prefix = uniqueName('obxready');
    dropTopics = await createTopics([{ topic: `${prefix}.order`, partitions: 3 }]);
  });
  after(async () => {
    for (const r of relays) await r.close();
    await dropTopics?.();
    if (t) await deleteTopics([`${prefix}.progress`]);
    await t?.drop();
  });

  it('exactly-once: resolves after the recovery marked what the last holder committed', async () => {
    const options: RelayOptions = {
      databaseUrl: DATABASE_URL,
      brokers: KAFKA_BROKERS.split(','),
      schema: t.schema,
      topicTemplate: `${prefix}.\${aggregatetype}`,
      progressTopic: `${prefix}.progress`,
      transactionalIdPrefix: prefix,
      leaseMs: 3000,
      retentionMs: 0,
    };
    // committed before the first relay starts: each role publishes its rows in one transaction
    const ids = await inTransaction(t.pool, (c) =>
      enqueue(
        c,
        Array.from({ length: 64 }, (_, i) => ({
          aggregateType: 'order',
          aggregateId: `o-${i % 16}`,
          type: 'Placed',
          payload: { i },
        })),
        { schema: t.schema },
      ),
    );
    const first = new OutboxRelay(options);
    relays.push(first);
    await first.start();
    await pollUntil('the first relay published every row', async () => {
      return (await stateCounts(t.pool, t.schema)).published === ids.length;
    });
    await first.close();
    // as if it had died after its commits and before its marks
    await t.pool.query(`UPDATE "${t.schema}".redfence_outbox SET state = 'pending', published_at = NULL`);
    const second = new OutboxRelay(options);
    relays.push(second);
    await second.start();
    assert.equal(second.roles.length, 4, 'the only relay holds every role');
    const c = await stateCounts(t.pool, t.schema);
    assert.deepEqual(c, { pending: 0, published: ids.length, parked: 0 }, 'marked before start() resolved');
    await assertPublishedOnceInOrder(t.pool, t.schema, `${prefix}.order`, ids);
    await second.close();
  });

  it('exactly-once: a failed recovery is tried again, and nothing is published before it succeeds', async () => {
    const proxy = new KafkaProxy({ host, port: Number(port) });
    await proxy.listen();
    const topic = `${prefix}.order`;
    const options: RelayOptions = {
      databaseUrl: DATABASE_URL,
      brokers: [proxy.address],
      schema: t.schema,
      topicTemplate: `${prefix}.\${aggregatetype}`,
      progressTopic: `${prefix}.progress`,
      transactionalIdPrefix: prefix,
      leaseMs: 3000,
      retentionMs: 0,
    };
    try {
      const before = (await stateCounts(t.pool, t.schema)).published;
      const ids = await inTransaction(t.pool, (c) =>
        enqueue(
          c,
          Array.from({ length: 32 }, (_, i) => ({
            aggregateType: 'order',
            aggregateId: `o-${i % 16}`,
            type: 'Shipped',
            payload: { i },
          })),
          { schema: t.schema },
        ),
      );
      const first = new OutboxRelay(options);
      relays.push(first);
      await first.start();
      await pollUntil('the first relay published the new rows', async () => {
        return (await stateCounts(t.pool, t.schema)).published === before + ids.length;
      });
      await first.close();
      await t.pool.query(
        `UPDATE "${t.schema}".redfence_outbox SET state = 'pending', published_at = NULL WHERE id = ANY($1::uuid[])`,
        [ids],
      );
      // the progress partitions' watermarks cannot be read: every role's recovery fails
      proxy.failListOffsets(`${prefix}.progress`, UNKNOWN_SERVER_ERROR);
      const second = new OutboxRelay(options);
      relays.push(second);
      let resolved = false;
      const started = second.start().then(() => {
        resolved = true;
      });
      await pollUntil('recoveries failed and were tried again', () => proxy.replacedOffsets >= 24, 30_000);
      assert.equal(resolved, false, 'start() waits for the recovery');
      assert.equal(second.roles.length, 4, 'the only relay holds every role');
      assert.equal((await stateCounts(t.pool, t.schema)).pending, ids.length, 'nothing published meanwhile');
      proxy.failListOffsets(`${prefix}.progress`, undefined);
      await started;
      const c = await stateCounts(t.pool, t.schema);
      assert.equal(c.pending, 0, 'marked by the recovery');
      const out = (await readToEnd(topic)).map((r) => String(r.headers.id ?? ''));
      for (const id of ids) assert.equal(out.filter((x) => x === id).length, 1, 'published once');
    } finally {
      for (const r of relays) await r.close();
      await proxy.close();
    }
  });
});
