/**
 * The console's Processing view against real metrics servers and the real Redis registry: an instance's
 * verdict rates over two scrapes (the counts between them over the time between them), its Redis p99,
 * batch sizes, handler records in flight, retry-topic backlog and outbox backlog as its /metrics says;
 * an instance whose metrics server never answers is a row saying so, and the page still comes within
 * the scrape timeout.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startConsole } from '../../src/console/server.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { pollUntil } from '../helpers/kafka.js';
import { hungInstance, metricsInstance } from './metrics-fixture.js';

const cell = (page: string, id: string, attr: string) => {
  const row = new RegExp(`<section data-instance="${id}"(.*?)</section>`, 's').exec(page)?.[1] ?? '';
  return new RegExp(`${attr}">([^<]*)<`).exec(row)?.[1];
};

describe('console processing view (real metrics servers and Redis)', () => {
  it('rates between two scrapes, latencies and backlogs; a silent instance shown, never waited for', async (t) => {
    const redis = standalone();
    const p = await metricsInstance(t, redis, uniqueName('processing-group'));
    const hung = await hungInstance(t, redis);
    const c = await startConsole({
      redis,
      kafka: { brokers: KAFKA_BROKERS.split(','), clientId: 'console-processing-test' },
      port: 0,
      scrapeTimeoutMs: 500,
    });
    t.after(() => c.close());
    t.after(() => redis.disconnect()); // after hooks run in order: the fixtures' clean-ups use it first
    p.metrics.verdict('orders', 0, 'APPLY', 100);
    for (let i = 0; i < 99; i++) p.metrics.redisCommand('fence-apply', 0.0004);
    p.metrics.redisCommand('fence-apply', 0.2);
    p.metrics.batch(40);
    p.metrics.batch(60);
    p.metrics.handlerInFlight('orders', 0, 7);
    p.retry.waiting('orders', 0, 3, Date.now() + 30_000);
    p.outbox.sample(12, 4.5, 2);
    await pollUntil('both instances registered', async () => {
      const page = await (await fetch(`${c.url}instances`)).text();
      return page.includes(p.id) && page.includes(hung.id);
    });

    const started = Date.now();
    const first = await (await fetch(`${c.url}processing`)).text();
    assert.ok(Date.now() - started < 2000, 'the silent instance held the page up');
    assert.ok(hung.accepted() >= 1, 'the silent instance was asked');
    assert.equal(cell(first, hung.id, 'data-field="problem'), 'no answer within 500 ms');
    assert.equal(cell(first, p.id, 'data-rate="APPLY'), '…', 'no rate from one scrape');
    assert.equal(cell(first, p.id, 'data-field="batch-mean'), '50.0');
    assert.equal(cell(first, p.id, 'data-field="in-flight'), '7');
    assert.equal(cell(first, p.id, 'data-field="retry-waiting'), '3');
    const due = Number(cell(first, p.id, 'data-field="retry-due'));
    assert.ok(due > 25 && due <= 30, `retry head due in ${due} s`);
    assert.equal(cell(first, p.id, 'data-field="outbox-pending'), '12');
    assert.equal(cell(first, p.id, 'data-field="outbox-parked'), '2');
    assert.equal(cell(first, p.id, 'data-field="outbox-oldest'), '4.5');
    // 99 of 100 calls in the 0.25-0.5 ms bucket: the p99 is that bucket's upper bound
    assert.equal(cell(first, p.id, 'data-field="redis-p99'), '0.50');

    p.metrics.verdict('orders', 0, 'APPLY', 50);
    p.metrics.verdict('orders', 1, 'SKIP', 10);
    p.metrics.deadLetter('rejected', 2);
    for (let i = 0; i < 100; i++) p.metrics.redisCommand('fence-apply', 0.03);
    p.metrics.batch(10);
    // a rate is over at least the console's least gap between two scrapes (1 s): reads before that keep
    // the first scrape as the anchor, so the rates, once there, are over the first page's scrape
    let reads = 0;
    let second = '';
    await pollUntil('rates over two scrapes', async () => {
      reads++;
      second = await (await fetch(`${c.url}processing`)).text();
      return cell(second, p.id, 'data-field="interval') !== undefined;
    });
    assert.ok(reads >= 2, 'a read within the least gap showed no rates');
    const seconds = Number(cell(second, p.id, 'data-field="interval'));
    assert.ok(seconds >= 1, `interval ${seconds}`);
    const counted = (v: string) => Number(cell(second, p.id, `data-rate="${v}`)) * seconds;
    assert.ok(Math.abs(counted('APPLY') - 50) < 0.2, `APPLY ${counted('APPLY')}`);
    assert.ok(Math.abs(counted('SKIP') - 10) < 0.2, `SKIP ${counted('SKIP')}`);
    assert.ok(Math.abs(counted('DLQ') - 2) < 0.2, `DLQ ${counted('DLQ')}`);
    assert.equal(cell(second, p.id, 'data-rate="FENCE'), '0.0');
    // over the interval only: the 100 calls of 30 ms (bucket 25-50 ms), the batch of 10
    const p99 = Number(cell(second, p.id, 'data-field="redis-p99'));
    assert.ok(p99 > 25 && p99 <= 50, `Redis p99 ${p99} ms`);
    assert.equal(cell(second, p.id, 'data-field="batch-mean'), '10.0');
    assert.equal(cell(second, hung.id, 'data-field="problem'), 'no answer within 500 ms');
  });

  it("instances show each one's health from its /readyz: the parts not ready named, ready, or no answer", async (t) => {
    const redis = standalone();
    const p = await metricsInstance(t, redis, uniqueName('health-group'));
    const hung = await hungInstance(t, redis);
    const c = await startConsole({
      redis,
      kafka: { brokers: KAFKA_BROKERS.split(','), clientId: 'console-health-test' },
      port: 0,
      scrapeTimeoutMs: 500,
    });
    t.after(() => c.close());
    t.after(() => redis.disconnect());
    const health = async (id: string) => {
      const page = await (await fetch(`${c.url}instances`)).text();
      const row = new RegExp(`<tr><td><code>${id}</code>(.*?)</tr>`, 's').exec(page)?.[1] ?? '';
      return /data-field="health">(.*?)<\/td>/s.exec(row)?.[1]?.replace(/<[^>]*>/g, '');
    };
    p.health.setReady('redis', true);
    p.health.setReady('scripts', true);
    await pollUntil(
      'both instances listed',
      async () => (await health(p.id)) !== undefined && (await health(hung.id)) !== undefined,
    );
    assert.equal(await health(p.id), 'not ready: group, kafka');
    p.health.setReady('group', true);
    p.health.setReady('kafka', true);
    assert.equal(await health(p.id), 'ready');
    assert.equal(await health(hung.id), 'no answer within 500 ms');
  });
});
