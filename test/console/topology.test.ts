/**
 * The console's Topology view against real metrics servers and the real Redis registry: a topology
 * instance's nodes with their records in, out, late and dropped as totals and as rates over two
 * scrapes (the counts between them over the time between them), the lag of a repartition topic under
 * the node reading it; an instance running no topology is left out, one whose metrics server never
 * answers is named as not read, and the page still comes within the scrape timeout.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startConsole } from '../../src/console/server.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { pollUntil } from '../helpers/kafka.js';
import { hungInstance, metricsInstance } from './metrics-fixture.js';

/** The text of `attr`'s cell in node `node`'s row of instance `id`'s section. */
const cell = (page: string, id: string, node: string, attr: string) => {
  const section = new RegExp(`<section data-instance="${id}"(.*?)</section>`, 's').exec(page)?.[1] ?? '';
  const row = new RegExp(`<tr data-node="${node}">(.*?)</tr>`, 's').exec(section)?.[1] ?? '';
  return new RegExp(`${attr}">([^<]*)<`).exec(row)?.[1];
};

describe('console topology view (real metrics servers and Redis)', () => {
  it("nodes' totals and rates between two scrapes, a repartition lag; other instances left out or named", async (t) => {
    const redis = standalone();
    const topo = await metricsInstance(t, redis, uniqueName('topology-group'));
    const plain = await metricsInstance(t, redis, uniqueName('plain-group'));
    const hung = await hungInstance(t, redis);
    const c = await startConsole({
      redis,
      kafka: { brokers: KAFKA_BROKERS.split(','), clientId: 'console-topology-test' },
      port: 0,
      scrapeTimeoutMs: 500,
    });
    t.after(() => c.close());
    t.after(() => redis.disconnect()); // after hooks run in order: the fixtures' clean-ups use it first
    const m = topo.metrics;
    m.topology({
      application: 'fraud',
      nodes: ['orders', 'big', 'count', 'alerts', 'regroup'],
      windowed: ['count'],
      repartition: new Map([['fraud-regroup-repartition', 'regroup']]),
    });
    // the repartition topic's owned partitions: 7 and 5 records behind their ends
    m.lag('fraud-regroup-repartition', 0, 7, { committed: 3, end: 10 });
    m.lag('fraud-regroup-repartition', 1, 5, { committed: 15, end: 20 });
    m.topologyNode('fraud', 'orders', 100, 100);
    m.topologyNode('fraud', 'big', 100, 40);
    m.topologyNode('fraud', 'count', 40, 37);
    m.topologyLate('fraud', 'count', 3);
    m.topologyDropped('fraud', 'count', 'null-key', 2);
    plain.metrics.verdict('orders', 0, 'APPLY', 10);
    await pollUntil('the instances registered', async () => {
      const page = await (await fetch(`${c.url}instances`)).text();
      return [topo.id, plain.id, hung.id].every((id) => page.includes(id));
    });

    const started = Date.now();
    const first = await (await fetch(`${c.url}topology`)).text();
    assert.ok(Date.now() - started < 2000, 'the silent instance held the page up');
    assert.ok(first.includes(`<section data-instance="${topo.id}"`), 'the topology instance shown');
    assert.ok(!first.includes(`data-instance="${plain.id}"`), 'an instance without a topology left out');
    assert.match(first, new RegExp(`Not read: .*${hung.id}.*no answer within 500 ms`, 's'));
    assert.equal(cell(first, topo.id, 'orders', 'data-total="in'), '100');
    assert.equal(cell(first, topo.id, 'big', 'data-total="out'), '40');
    assert.equal(cell(first, topo.id, 'count', 'data-total="late'), '3');
    assert.equal(cell(first, topo.id, 'count', 'data-total="dropped'), '2');
    assert.equal(cell(first, topo.id, 'big', 'data-total="late'), '-', 'no late series for a stateless node');
    assert.equal(
      cell(first, topo.id, 'alerts', 'data-total="in'),
      '0',
      'a node seen by no record yet is listed',
    );
    assert.equal(cell(first, topo.id, 'count', 'data-rate="in'), '…', 'no rate from one scrape');
    assert.equal(
      cell(first, topo.id, 'regroup', 'data-field="repartition-lag'),
      '12',
      'summed over its partitions',
    );
    assert.equal(cell(first, topo.id, 'count', 'data-field="repartition-lag'), '-');

    m.topologyNode('fraud', 'orders', 50, 50);
    m.topologyNode('fraud', 'count', 20, 18);
    m.topologyLate('fraud', 'count', 2);
    let second = '';
    await pollUntil('rates over two scrapes', async () => {
      second = await (await fetch(`${c.url}topology`)).text();
      return /data-field="interval">/.test(second);
    });
    const seconds = Number(/data-field="interval">([^<]*)</.exec(second)?.[1]);
    assert.ok(seconds >= 1, `interval ${seconds}`);
    const counted = (node: string, what: string) =>
      Number(cell(second, topo.id, node, `data-rate="${what}`)) * seconds;
    assert.ok(Math.abs(counted('orders', 'in') - 50) < 0.2, `orders in ${counted('orders', 'in')}`);
    assert.ok(Math.abs(counted('count', 'out') - 18) < 0.2, `count out ${counted('count', 'out')}`);
    assert.ok(Math.abs(counted('count', 'late') - 2) < 0.2, `count late ${counted('count', 'late')}`);
    assert.equal(cell(second, topo.id, 'big', 'data-rate="in'), '0.0');
    assert.equal(cell(second, topo.id, 'orders', 'data-total="in'), '150');
  });
});
