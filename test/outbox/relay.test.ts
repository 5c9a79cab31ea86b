/**
 * The relay against real PostgreSQL and Kafka, in both modes: every committed row is published (once,
 * read_committed, in exactly-once mode), no rolled-back row is, each aggregate's events arrive in commit
 * order with the Debezium routing (topic from aggregatetype, key aggregateid, headers id and type); a row
 * that commits after a higher-numbered one is published, not skipped; poison rows are parked while other
 * aggregates flow, and their aggregate waits behind them until retried; retention deletes published rows.
 * The topic is read back with the test helpers, which share no code with the relay.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { enqueue, OutboxRelay, type RelayMode, retry } from '../../src/outbox/index.js';
import { outboxNames } from '../../src/outbox/schema.js';
import { DATABASE_URL, KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, kafka, pollUntil, type ReadRecord, readToEnd } from '../helpers/kafka.js';
import { deleteTopics, inTransaction, rows, type TestSchema, testSchema } from './support.js';

const header = (r: ReadRecord, k: string) => String(r.headers[k] ?? '');

async function pendingCount(t: TestSchema): Promise<number> {
  const r = await t.pool.query(
    `SELECT count(*)::int AS n FROM "${t.schema}".redfence_outbox WHERE state = 'pending'`,
  );
  return r.rows[0].n;
}

for (const mode of ['exactly-once', 'at-least-once'] as RelayMode[]) {
  describe(`outbox relay (${mode})`, () => {
    let t: TestSchema;
    let prefix: string;
    let dropTopics: () => Promise<void>;
    let relay: OutboxRelay;
    const registry = new Registry();
    before(async () => {
      t = await testSchema();
      prefix = uniqueName('obx');
      dropTopics = await createTopics([
        { topic: `${prefix}.order`, partitions: 3 },
        { topic: `${prefix}.cart`, partitions: 2 },
      ]);
      relay = new OutboxRelay({
        databaseUrl: DATABASE_URL,
        brokers: KAFKA_BROKERS.split(','),
        schema: t.schema,
        mode,
        topicTemplate: `${prefix}.\${aggregatetype}`,
        progressTopic: `${prefix}.progress`,
        transactionalIdPrefix: prefix,
        maxAttempts: 3,
        maxMessageBytes: 10_000,
        pollIntervalMs: 200,
        leaseMs: 3000,
        retentionMs: 0,
        metrics: registry,
      });
      await relay.start();
    });
    after(async () => {
      await relay?.close();
      await dropTopics?.();
      if (t) await deleteTopics([`${prefix}.progress`]);
      await t?.drop();
    });

    it('publishes every committed row once, in commit order per aggregate, none rolled back', async () => {
      const s = { schema: t.schema };
      const committed: string[] = [];
      for (let i = 0; i < 40; i++) {
        const events = Array.from({ length: 10 }, (_, j) => ({
          aggregateType: j % 3 === 0 ? 'cart' : 'order',
          aggregateId: `a-${(i * 7 + j) % 13}`,
          type: `t-${i}-${j}`,
          payload: { i, j },
          headers: { trace: `tr-${i}` },
        }));
        const rollback = i % 5 === 4;
        const ids = await inTransaction(t.pool, async (c) => {
          const ids = await enqueue(c, events, s);
          if (rollback) throw new Error('rolled back');
          return ids;
        }).catch(() => []);
        committed.push(...ids);
      }
      await pollUntil('all rows published', async () => (await pendingCount(t)) === 0, 60_000);
      const topics = { order: await readToEnd(`${prefix}.order`), cart: await readToEnd(`${prefix}.cart`) };
      const out = [...topics.order, ...topics.cart];
      const ids = out.map((r) => header(r, 'id'));
      if (mode === 'exactly-once') assert.equal(ids.length, new Set(ids).size, 'no duplicates');
      assert.deepEqual([...new Set(ids)].sort(), [...committed].sort(), 'exactly the committed rows');
      // per aggregate (topic, key), the first appearance of each row follows the rows' sequence (commit order)
      const table = await rows(t.pool, t.schema);
      const seqOf = new Map(table.map((r) => [r.id, Number(r.seq)]));
      for (const [type, records] of Object.entries(topics)) {
        const byKey = new Map<string, number[]>();
        for (const r of records) {
          const row = table.find((x) => x.id === header(r, 'id'));
          assert.equal(row?.aggregatetype, type, 'topic from aggregatetype');
          assert.equal(r.key, row?.aggregateid, 'key is aggregateid');
          byKey.set(r.key ?? '', [...(byKey.get(r.key ?? '') ?? []), seqOf.get(header(r, 'id')) ?? -1]);
        }
        for (const [key, seqs] of byKey) {
          const firsts = seqs.filter((x, i) => seqs.indexOf(x) === i);
          assert.deepEqual(
            firsts,
            [...firsts].sort((a, b) => a - b),
            `order of ${type}/${key}`,
          );
        }
      }
      const sample = out.find((r) => header(r, 'trace') !== '');
      assert.ok(sample);
      assert.match(header(sample, 'type'), /^t-/);
      assert.deepEqual(Object.keys(JSON.parse(sample.value ?? '{}')).sort(), ['i', 'j']);
      const metrics = await registry.getSingleMetricAsString('redfence_outbox_published_total');
      assert.match(metrics, /redfence_outbox_published_total \d+/);
    });

    it('a row committed after a higher-numbered one is published, not skipped', async () => {
      const s = { schema: t.schema };
      const early = await t.pool.connect();
      try {
        await early.query('BEGIN');
        const [low] = await enqueue(early, { aggregateType: 'order', aggregateId: 'late-1', type: 'low' }, s);
        const [high] = await inTransaction(t.pool, (c) =>
          enqueue(c, { aggregateType: 'order', aggregateId: 'late-2', type: 'high' }, s),
        );
        const state = async (id: string | undefined) =>
          (await rows(t.pool, t.schema)).find((r) => r.id === id)?.state;
        await pollUntil('the higher row published', async () => (await state(high)) === 'published', 30_000);
        await early.query('COMMIT');
        await pollUntil('the lower row published', async () => (await state(low)) === 'published', 30_000);
        const table = await rows(t.pool, t.schema);
        const pos = (id: string | undefined) => Number(table.find((r) => r.id === id)?.pos);
        assert.ok(pos(low) < pos(high), 'the late row has the lower number');
        const out = await readToEnd(`${prefix}.order`);
        assert.ok(out.some((r) => header(r, 'id') === low));
      } finally {
        early.release();
      }
    });

    it('one aggregate: the transaction that started first and committed last is published last', async () => {
      const s = { schema: t.schema };
      const slow = await t.pool.connect();
      try {
        // `slow` starts first and takes the lower number (another aggregate), then writes cart/k-1 after
        // `fast` committed its own cart/k-1 event: commit order is fast, slow.
        await slow.query('BEGIN');
        const [slowFirst] = await enqueue(
          slow,
          { aggregateType: 'cart', aggregateId: 'k-0', type: 'slow-0' },
          s,
        );
        const [fastId] = await inTransaction(t.pool, (c) =>
          enqueue(c, { aggregateType: 'cart', aggregateId: 'k-1', type: 'fast' }, s),
        );
        const [slowId] = await enqueue(slow, { aggregateType: 'cart', aggregateId: 'k-1', type: 'slow' }, s);
        await slow.query('COMMIT');
        const pos = new Map((await rows(t.pool, t.schema)).map((r) => [r.id, Number(r.pos)]));
        assert.ok(
          (pos.get(slowFirst as string) ?? 0) < (pos.get(fastId as string) ?? 0),
          'slow started first',
        );
        await pollUntil('all published', async () => (await pendingCount(t)) === 0, 30_000);
        const out = (await readToEnd(`${prefix}.cart`))
          .filter((r) => r.key === 'k-1')
          .map((r) => header(r, 'id'));
        assert.deepEqual(
          out.filter((x, i) => out.indexOf(x) === i),
          [fastId, slowId],
        );
      } finally {
        slow.release();
      }
    });

    it("parks a row the broker refuses (the topic's own size limit) while others flow", async () => {
      const s = { schema: t.schema };
      const admin = kafka.admin();
      await admin.connect();
      await admin.createTopics({
        topics: [
          {
            topic: `${prefix}.small`,
            numPartitions: 1,
            replicationFactor: 1,
            configEntries: [{ name: 'max.message.bytes', value: '2000' }],
          },
        ],
      });
      try {
        const [big] = await inTransaction(t.pool, (c) =>
          enqueue(
            c,
            { aggregateType: 'small', aggregateId: 's-1', type: 'big', payload: 'y'.repeat(5000) },
            s,
          ),
        );
        const [ok] = await inTransaction(t.pool, (c) =>
          enqueue(c, { aggregateType: 'small', aggregateId: 's-2', type: 'ok' }, s),
        );
        const byId = async () => new Map((await rows(t.pool, t.schema)).map((r) => [r.id, r]));
        await pollUntil(
          'the refused row parked, the other published',
          async () => {
            const m = await byId();
            return m.get(big as string)?.state === 'parked' && m.get(ok as string)?.state === 'published';
          },
          60_000,
        );
        assert.match(
          (await byId()).get(big as string)?.last_error ?? '',
          /Kafka refused the record \(MESSAGE_TOO_LARGE\)/,
        );
      } finally {
        await admin.deleteTopics({ topics: [`${prefix}.small`] }).catch(() => undefined);
        await admin.disconnect();
      }
    });

    it('parks poison rows while other aggregates flow; their aggregate waits until retried', async () => {
      const s = { schema: t.schema };
      const [missing, behind] = await inTransaction(t.pool, (c) =>
        enqueue(
          c,
          [
            { aggregateType: 'nosuchtopic', aggregateId: 'p-1', type: 'first' },
            { aggregateType: 'nosuchtopic', aggregateId: 'p-1', type: 'second' },
          ],
          s,
        ),
      );
      const [big] = await inTransaction(t.pool, (c) =>
        enqueue(
          c,
          { aggregateType: 'order', aggregateId: 'big-1', type: 'big', payload: 'x'.repeat(20_000) },
          s,
        ),
      );
      const [fine] = await inTransaction(t.pool, (c) =>
        enqueue(c, { aggregateType: 'order', aggregateId: 'fine-1', type: 'fine' }, s),
      );
      const byId = async () => new Map((await rows(t.pool, t.schema)).map((r) => [r.id, r]));
      await pollUntil(
        'poison rows parked, the other row published',
        async () => {
          const m = await byId();
          return (
            m.get(missing as string)?.state === 'parked' &&
            m.get(big as string)?.state === 'parked' &&
            m.get(fine as string)?.state === 'published'
          );
        },
        30_000,
      );
      const m = await byId();
      assert.equal(m.get(missing as string)?.attempts, 3);
      assert.match(m.get(missing as string)?.last_error ?? '', /does not exist/);
      assert.match(m.get(big as string)?.last_error ?? '', /over the limit/);
      assert.equal(m.get(behind as string)?.state, 'pending', 'the aggregate waits behind its parked row');
      // the topic appears: retry publishes the parked row, then the one behind it, in order
      const drop = await createTopics([{ topic: `${prefix}.nosuchtopic`, partitions: 1 }]);
      try {
        assert.equal(await retry(t.pool, outboxNames(s), [missing as string]), 1);
        await pollUntil('retried rows published', async () => {
          const m = await byId();
          return (
            m.get(missing as string)?.state === 'published' && m.get(behind as string)?.state === 'published'
          );
        });
        const out = await readToEnd(`${prefix}.nosuchtopic`);
        assert.deepEqual(
          out.map((r) => header(r, 'type')).filter((x, i, a) => a.indexOf(x) === i),
          ['first', 'second'],
        );
      } finally {
        await drop();
      }
    });
  });
}
