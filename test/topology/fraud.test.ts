// The fraud topology of issue 25 on a small input, the model's determinism, and a contract scenario
// (test/topology/scenarios.ts shapes) expressed with the builder.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type BuiltTopology, serdes, TimeWindows, topology } from '../../src/topology/index.js';
import { runModel } from '../../src/topology/model.js';
import { type In, input, outputs } from './model-helpers.js';
import { runScenario } from './scenario-model.js';
import type { InRecord, Scenario } from './scenarios.js';

const s = serdes.string();
const MIN = 60_000;

function fraud(threshold: number, minCount: number): BuiltTopology {
  const t = topology({ applicationId: 'fraud' });
  t.stream<string, { amount: number }>('orders', { key: s })
    .filter((_k, o) => o.amount > threshold)
    .groupByKey()
    .windowedBy(TimeWindows.ofSizeWithNoGrace(5 * MIN))
    .count({ name: 'big-orders' })
    .toStream()
    .filter((_wk, n) => n > minCount)
    .map((wk, n) => [wk.key, { start: wk.start, end: wk.end, count: n }] as const)
    .to('fraud-alerts', { key: s });
  return t.build();
}

function orders(): In[] {
  const out: In[] = [];
  // c1: 12 big orders within the first window, c2: 12 orders of which only 3 are big, c3: 11 big in two windows
  for (let i = 0; i < 12; i++)
    out.push({ key: 'c1', value: { amount: 500 + i }, ts: 1000 + i * 1000, topic: 'orders' });
  for (let i = 0; i < 12; i++)
    out.push({ key: 'c2', value: { amount: i < 3 ? 900 : 50 }, ts: 2000 + i * 1000, topic: 'orders' });
  for (let i = 0; i < 11; i++)
    out.push({ key: 'c3', value: { amount: 300 }, ts: 4 * MIN + i * 10_000, topic: 'orders', partition: 1 });
  return out;
}

describe('streams model: the fraud topology', () => {
  it('alerts when a customer has more than 10 large orders in a 5-minute window', () => {
    const r = runModel(fraud(100, 10), input(orders()));
    const alerts = outputs(r, 'fraud-alerts');
    // c1: counts 11 and 12 in [0, 5 min); c2 never; c3 split over two windows (6 + 5): never above 10
    assert.deepEqual(alerts, [
      { key: 'c1', value: { start: 0, end: 5 * MIN, count: 11 }, ts: 11_000 },
      { key: 'c1', value: { start: 0, end: 5 * MIN, count: 12 }, ts: 12_000 },
    ]);
    assert.deepEqual(r.deadLetters, []);
  });

  it('is deterministic: the same input twice gives the same outputs, bytes and order', () => {
    const a = runModel(fraud(100, 0), input(orders()));
    const b = runModel(fraud(100, 0), input(orders()));
    assert.ok(a.outputs.length > 20);
    assert.deepEqual(a, b);
  });
});

describe('streams model: contract scenarios are expressible', () => {
  const records: InRecord[] = [
    { partition: 0, key: 'a', amount: 5, timestamp: 0 },
    { partition: 0, key: 'a', amount: 7, timestamp: 5 },
    { partition: 1, key: 'd', amount: 1, timestamp: 3 },
    { partition: 0, key: null, amount: 9, timestamp: 6 },
    { partition: 0, key: 'a', amount: 2, timestamp: 30 },
  ];

  it('unwindowed sum: start = end = -1', () => {
    const out = runScenario(
      { name: 'sum', window: null, aggregate: 'sum', emit: 'update', partitions: 2 },
      records,
    );
    assert.deepEqual(out, [
      { key: 'a', start: -1, end: -1, value: 5, timestamp: 0 },
      { key: 'a', start: -1, end: -1, value: 12, timestamp: 5 },
      { key: 'd', start: -1, end: -1, value: 1, timestamp: 3 },
      { key: 'a', start: -1, end: -1, value: 14, timestamp: 30 },
    ]);
  });

  it('session sum with update: tombstones are value null', () => {
    const sc: Scenario = {
      name: 'sessions',
      window: { kind: 'session', inactivityGapMs: 10, graceMs: 0 },
      aggregate: 'sum',
      emit: 'update',
      partitions: 2,
    };
    assert.deepEqual(
      runScenario(sc, records).filter((o) => o.key === 'a'),
      [
        { key: 'a', start: 0, end: 0, value: 5, timestamp: 0 },
        { key: 'a', start: 0, end: 0, value: null, timestamp: 0 },
        { key: 'a', start: 0, end: 5, value: 12, timestamp: 5 },
        { key: 'a', start: 30, end: 30, value: 2, timestamp: 30 },
      ],
    );
  });

  it('tumbling count with emit final and the fraud filters', () => {
    const sc: Scenario = {
      name: 'fraud',
      window: { kind: 'tumbling', sizeMs: 10, graceMs: 0 },
      aggregate: 'count',
      emit: 'final',
      minAmount: 1,
      minCount: 1,
      partitions: 2,
    };
    // The last record at 15 closes [0,10); at 30 it would have jumped past the store's retention (size +
    // grace behind the newest window start) and [0,10) would have no final result, as in Kafka Streams.
    const closing = records.map((r) => (r.timestamp === 30 ? { ...r, timestamp: 15 } : r));
    assert.deepEqual(runScenario(sc, closing), [{ key: 'a', start: 0, end: 10, value: 2, timestamp: 5 }]);
    assert.deepEqual(runScenario(sc, records), []);
  });
});
