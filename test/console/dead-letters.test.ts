/**
 * The console's dead-letter pages against the real broker: paged (50 a page, a next link with the
 * offset to go on from, the end said), each page reading a bounded number of records; filters by
 * reason and source topic. The partition list of a topic of many partitions costs one batched
 * watermarks call (not one per partition), and says what each partition holds; a missing topic is
 * named.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startConsole } from '../../src/console/server.js';
import { KafkaAdmin } from '../../src/kafka/admin.js';
import { LogReader } from '../../src/kafka/log-reader.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { createTopics, produce } from '../helpers/kafka.js';
import { plant, world } from './fixture.js';

const get = async (base: string, path: string) => {
  const r = await fetch(new URL(path, base));
  assert.equal(r.status, 200, path);
  return r.text();
};
const rows = (page: string) => (page.match(/<td class="num">0<\/td><td class="num">\d+<\/td>/g) ?? []).length;

describe('console dead letters (real broker)', () => {
  it('pages through a partition and filters', async (t) => {
    const w = await world(t, { letters: 1 });
    await plant(w.dlt, w.source, 119, 1);
    const first = await get(w.console.url, `/dead-letters?topic=${w.dlt}`);
    assert.equal(rows(first), 50);
    assert.match(first, /offsets 0 to 120; this page read 50 records/);
    const next = /href="(\/dead-letters\?[^"]*from=50[^"]*)">next page/.exec(first.replaceAll('&amp;', '&'));
    assert.ok(next, 'a next link from offset 50');
    const second = await get(w.console.url, next[1] as string);
    assert.equal(rows(second), 50);
    const third = await get(w.console.url, `/dead-letters?topic=${w.dlt}&partition=0&from=100`);
    assert.equal(rows(third), 20);
    assert.match(third, /end of partition/);
    const none = await get(w.console.url, `/dead-letters?topic=${w.dlt}&reason=processing-error`);
    assert.equal(rows(none), 0);
    assert.match(none, /this page read 120 records from 0 and shows 0 matching/);
    const bySource = await get(w.console.url, `/dead-letters?topic=${w.dlt}&source=${w.source}&from=110`);
    assert.equal(rows(bySource), 10);
    const bad = await get(w.console.url, `/dead-letters?topic=${w.dlt}&reason=%3Cscript%3E`);
    assert.match(bad, /Ignored: reason: one of/);
    assert.ok(!bad.includes('<script>'), 'a refused value is not echoed raw');
  });

  it('lists the partitions of a 60-partition topic with one watermarks call; a missing topic is named', async (t) => {
    const topic = uniqueName('console-dlt-wide');
    const missing = uniqueName('console-dlt-missing');
    t.after(await createTopics([{ topic, partitions: 60 }]));
    // partition p holds p % 4 records
    await produce(
      topic,
      Array.from({ length: 60 }, (_, p) =>
        Array.from({ length: p % 4 }, (_, i) => ({ key: `k${i}`, value: 'v', partition: p })),
      ).flat(),
    );
    const redis = standalone();
    t.after(() => redis.disconnect());
    const c = await startConsole({
      redis,
      kafka: { brokers: KAFKA_BROKERS.split(','), clientId: 'console-dlt-wide-test' },
      dlqTopics: [topic, missing],
      port: 0,
      timeoutMs: 15_000,
    });
    t.after(() => c.close());
    // the calls made while the page loads, counted on the real clients
    const counted = { admin: 0, reader: 0 };
    const admin = KafkaAdmin.prototype as unknown as { watermarks: (...a: unknown[]) => Promise<unknown> };
    const reader = LogReader.prototype as unknown as { watermarks: (...a: unknown[]) => Promise<unknown> };
    const [adminCall, readerCall] = [admin.watermarks, reader.watermarks];
    admin.watermarks = function (this: unknown, ...a: unknown[]) {
      counted.admin++;
      return adminCall.apply(this, a);
    };
    reader.watermarks = function (this: unknown, ...a: unknown[]) {
      counted.reader++;
      return readerCall.apply(this, a);
    };
    t.after(() => {
      admin.watermarks = adminCall;
      reader.watermarks = readerCall;
    });
    const page = await get(c.url, `/dead-letters?topic=${topic}&partition=7`);
    assert.deepEqual(counted, { admin: 1, reader: 1 }, 'the list: one batched call; the page: its partition');
    const listed = [
      ...page.matchAll(/partition (\d+)(?:<\/strong>|<\/a>) <span class="muted">\((\d+) records\)/g),
    ];
    assert.deepEqual(
      listed.map((m) => [Number(m[1]), Number(m[2])]),
      Array.from({ length: 60 }, (_, p) => [p, p % 4]),
    );
    assert.match(page, /Partition 7: offsets 0 to 3;/);
    const gone = await fetch(new URL(`/dead-letters?topic=${missing}`, c.url));
    assert.equal(gone.status, 500);
    assert.match(
      await gone.text(),
      new RegExp(`dead-letter topic ${missing} does not exist \\[RF_TOPIC_MISSING\\]`),
    );
  });
});
