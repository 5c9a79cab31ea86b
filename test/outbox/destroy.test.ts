/**
 * The relay's destroy() on real PostgreSQL and Kafka. Relay A reaches the broker through a proxy that
 * holds back the broker's answers to produce requests (kafka-proxy.ts): a batch is written but A waits
 * for its acknowledgement, so a draining stop could not return. Under writers, A is destroyed while its
 * batches wait:
 * - destroy() returns at once (within 10 s, the hold still on), the relay is closed, its roles released,
 *   and rows of the batches in flight are still pending (at-least-once: already on the topic, not marked;
 *   exactly-once: once the hold ends, the commit A had in flight lands and its progress record names
 *   rows A never marked);
 * - relay B (straight to the broker) then publishes every committed row: per aggregate in commit order,
 *   exactly once in exactly-once mode (it marks A's last commit from the progress record), at least once
 *   in at-least-once mode with duplicates only among the rows pending when destroy() returned.
 * Then destroy() during close() (it cuts the held drain short; both resolve), destroy() idempotent and
 * before start(), and the lifecycle states.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { OutboxRelay, type RelayMode, type RelayOptions } from '../../src/outbox/index.js';
import { DATABASE_URL, KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil, type ReadRecord, readToEnd } from '../helpers/kafka.js';
import { KafkaProxy } from './kafka-proxy.js';
import {
  assertPublishedOnceInOrder,
  deleteTopics,
  rows,
  stateCounts,
  type TestSchema,
  testSchema,
  writers,
} from './support.js';

const [host, port] = (KAFKA_BROKERS.split(',')[0] as string).split(':') as [string, string];
const idOf = (r: ReadRecord) => String(r.headers.id ?? '');

/** `p`, or a rejection naming `what` after `ms`: a wait that a draining stop would not finish. */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

const pendingIds = async (t: TestSchema) =>
  new Set((await rows(t.pool, t.schema)).filter((r) => r.state === 'pending').map((r) => r.id));

/** Rows of the relay still leased to it, and its heartbeat row. */
async function heldBy(t: TestSchema, relayId: string): Promise<number> {
  const r = await t.pool.query(
    `SELECT (SELECT count(*) FROM "${t.schema}".redfence_outbox_role WHERE owner = $1)
          + (SELECT count(*) FROM "${t.schema}".redfence_outbox_relay WHERE owner = $1) AS n`,
    [relayId],
  );
  return Number(r.rows[0].n);
}

/**
 * At-least-once: every committed row on the topic, nothing else; duplicates only among `mayRepeat`;
 * per aggregate, the first appearance of each row in `seq` (commit) order.
 */
async function assertPublishedInOrder(
  t: TestSchema,
  topic: string,
  committed: readonly string[],
  mayRepeat: ReadonlySet<string>,
): Promise<void> {
  const out = await readToEnd(topic);
  const count = new Map<string, number>();
  for (const r of out) count.set(idOf(r), (count.get(idOf(r)) ?? 0) + 1);
  assert.deepEqual(
    committed.filter((id) => !count.has(id)),
    [],
    'every committed row published',
  );
  assert.equal(count.size, committed.length, 'nothing but the committed rows');
  const doubled = [...count].filter(([id, n]) => n > 1 && !mayRepeat.has(id));
  assert.deepEqual(doubled, [], 'duplicates only among the rows in flight when destroy() returned');
  const seq = new Map((await rows(t.pool, t.schema)).map((r) => [r.id, Number(r.seq)]));
  const last = new Map<string, number>();
  const seen = new Set<string>();
  for (const r of out) {
    if (seen.has(idOf(r))) continue;
    seen.add(idOf(r));
    const s = seq.get(idOf(r)) ?? -1;
    const key = r.key ?? '';
    assert.ok((last.get(key) ?? 0) < s, `aggregate ${key}: seq ${s} first appears after ${last.get(key)}`);
    last.set(key, s);
  }
}

for (const mode of ['exactly-once', 'at-least-once'] as RelayMode[]) {
  describe(`outbox relay destroy() (${mode})`, { timeout: 120_000 }, () => {
    let t: TestSchema;
    let prefix: string;
    let dropTopics: () => Promise<void>;
    let proxy: KafkaProxy;
    const relays: OutboxRelay[] = [];
    const stops: Array<() => Promise<unknown>> = [];
    before(async () => {
      t = await testSchema();
      prefix = uniqueName(mode === 'exactly-once' ? 'obxdx' : 'obxda');
      dropTopics = await createTopics([{ topic: `${prefix}.order`, partitions: 3 }]);
      proxy = new KafkaProxy({ host, port: Number(port) });
      await proxy.listen();
    });
    after(async () => {
      await Promise.all(stops.map((s) => s()));
      proxy?.releaseProduce();
      await Promise.all(relays.map((r) => r.close()));
      await proxy?.close();
      await dropTopics?.();
      if (t) await deleteTopics([`${prefix}.progress`]);
      await t?.drop();
    });

    const relay = (o: Partial<RelayOptions> = {}) => {
      const r = new OutboxRelay({
        databaseUrl: DATABASE_URL,
        brokers: KAFKA_BROKERS.split(','),
        schema: t.schema,
        mode,
        topicTemplate: `${prefix}.\${aggregatetype}`,
        progressTopic: `${prefix}.progress`,
        transactionalIdPrefix: prefix,
        batchSize: 50,
        pollIntervalMs: 200,
        leaseMs: 3000,
        // longer than any hold here: the commit held back lands once the hold ends
        transactionTimeoutMs: 30_000,
        retentionMs: 0,
        ...o,
      });
      relays.push(r);
      return r;
    };

    it('destroy() under writers returns at once; the next relay publishes every row', async () => {
      const w = writers(t.pool, t.schema, { writers: 2, aggregates: 12, pauseMs: 5 });
      stops.push(w.stop);
      const a = relay({ brokers: [proxy.address], relayId: uniqueName('a') });
      await a.start();
      await pollUntil(
        'relay A publishes',
        async () => (await stateCounts(t.pool, t.schema)).published >= 100,
      );
      proxy.holdProduce();
      await pollUntil('a batch waits for its acknowledgement', () => proxy.heldProduce > 0, 30_000);
      await within(a.destroy(), 10_000, 'destroy() while a batch waits');
      const pendingAtDestroy = await pendingIds(t);
      assert.equal(a.state, 'closed');
      assert.deepEqual(a.roles, []);
      assert.equal(await heldBy(t, a.relayId), 0, 'roles released, heartbeat gone');
      assert.ok(proxy.heldProduce > 0, 'the acknowledgements are still held: destroy() did not wait');
      const committed = await w.stop();
      if (mode === 'at-least-once') {
        // the batches in flight were written, and their rows not marked
        const onTopic = new Set((await readToEnd(`${prefix}.order`)).map(idOf));
        const cut = [...pendingAtDestroy].filter((id) => onTopic.has(id));
        assert.ok(cut.length > 0, 'rows on the topic were still pending when destroy() returned');
      }
      proxy.releaseProduce();
      if (mode === 'exactly-once') {
        // the commit A had in flight lands: its progress record names rows A never marked
        await pollUntil('A’s last commit is readable and names pending rows', async () => {
          const progress = await readToEnd(`${prefix}.progress`, 2000).catch(() => undefined);
          if (progress === undefined) return false;
          const ids = progress.flatMap((r) => (JSON.parse(r.value ?? '{}') as { ids?: string[] }).ids ?? []);
          const pending = await pendingIds(t);
          return ids.some((id) => pending.has(id));
        });
      }
      const b = relay({ relayId: uniqueName('b') });
      await b.start();
      await pollUntil('relay B publishes every row', async () => (await pendingIds(t)).size === 0);
      if (mode === 'exactly-once')
        await assertPublishedOnceInOrder(t.pool, t.schema, `${prefix}.order`, committed);
      else await assertPublishedInOrder(t, `${prefix}.order`, committed, pendingAtDestroy);
      await b.close();
    });
  });
}

describe('outbox relay destroy(): lifecycle', { timeout: 120_000 }, () => {
  let t: TestSchema;
  let prefix: string;
  let dropTopics: () => Promise<void>;
  let proxy: KafkaProxy;
  const relays: OutboxRelay[] = [];
  const stops: Array<() => Promise<unknown>> = [];
  before(async () => {
    t = await testSchema();
    prefix = uniqueName('obxdl');
    dropTopics = await createTopics([{ topic: `${prefix}.order`, partitions: 2 }]);
    proxy = new KafkaProxy({ host, port: Number(port) });
    await proxy.listen();
  });
  after(async () => {
    await Promise.all(stops.map((s) => s()));
    proxy?.releaseProduce();
    await Promise.all(relays.map((r) => r.close()));
    await proxy?.close();
    await dropTopics?.();
    if (t) await deleteTopics([`${prefix}.progress`]);
    await t?.drop();
  });
  const relay = (brokers: string[]) => {
    const r = new OutboxRelay({
      databaseUrl: DATABASE_URL,
      brokers,
      schema: t.schema,
      topicTemplate: `${prefix}.\${aggregatetype}`,
      progressTopic: `${prefix}.progress`,
      transactionalIdPrefix: prefix,
      pollIntervalMs: 200,
      leaseMs: 3000,
      transactionTimeoutMs: 30_000,
      retentionMs: 0,
    });
    relays.push(r);
    return r;
  };

  it('before start(): closed at once, start() then refused; idempotent', async () => {
    const r = relay(KAFKA_BROKERS.split(','));
    assert.equal(r.state, 'idle');
    const d = r.destroy(new Error('not needed'));
    assert.equal(r.destroy(), d, 'every call returns the same promise');
    await d;
    assert.equal(r.state, 'closed');
    await assert.rejects(r.start(), { code: 'RF_INVALID_STATE' });
    await r.close();
    assert.equal(r.state, 'closed');
  });

  it('states; destroy() during close() cuts the drain short; every row published once after', async () => {
    const w = writers(t.pool, t.schema, { writers: 2, aggregates: 8, pauseMs: 5 });
    stops.push(w.stop);
    const a = relay([proxy.address]);
    const starting = a.start();
    assert.equal(a.state, 'starting');
    await starting;
    assert.equal(a.state, 'running');
    await pollUntil('relay A publishes', async () => (await stateCounts(t.pool, t.schema)).published >= 20);
    proxy.holdProduce();
    await pollUntil('a batch waits for its acknowledgement', () => proxy.heldProduce > 0, 30_000);
    let closed = false;
    const closing = a.close().then(() => {
      closed = true;
    });
    assert.equal(a.state, 'closing');
    // the drain waits for the held batch: a round trip to PostgreSQL later it has not ended
    await stateCounts(t.pool, t.schema);
    assert.equal(closed, false, 'close() waits for the batch in flight');
    const destroying = a.destroy(new Error('shutdown deadline'));
    assert.equal(a.destroy(), destroying, 'idempotent');
    await within(Promise.all([destroying, closing]), 10_000, 'destroy() during close()');
    assert.equal(a.state, 'closed');
    assert.ok(proxy.heldProduce > 0, 'the acknowledgements are still held');
    await assert.rejects(a.start(), { code: 'RF_INVALID_STATE' });
    const committed = await w.stop();
    proxy.releaseProduce();
    const b = relay(KAFKA_BROKERS.split(','));
    await b.start();
    await pollUntil('relay B publishes every row', async () => (await pendingIds(t)).size === 0);
    await assertPublishedOnceInOrder(t.pool, t.schema, `${prefix}.order`, committed);
    await b.close();
  });
});
