// Tumbling and hopping windows, and unwindowed tables: expectations computed by hand from Kafka Streams'
// KStreamWindowAggregate and KStreamAggregate (caching off, emit interval 0).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { serdes, TimeWindows, topology } from '../../src/topology/index.js';
import { runModel } from '../../src/topology/model.js';
import { timeWindowsFor } from '../../src/topology/windows.js';
import { type In, input, outputs, win } from './model-helpers.js';

const s = serdes.string();

function windowedCount(
  w: TimeWindows,
  emit: 'update' | 'final' = 'update',
  onLate: 'dead-letter' | 'drop' = 'dead-letter',
) {
  const t = topology({ applicationId: 'app' });
  t.stream<string, { amount: number }>('in', { key: s })
    .groupByKey()
    .windowedBy(w)
    .emit(emit)
    .onLate(onLate)
    .count({ name: 'counts' })
    .toStream()
    .map((wk, v) => [wk.key, { start: wk.start, end: wk.end, value: v }] as const)
    .to('out', { key: s });
  return t.build();
}

const a = (ts: number, key: string | null = 'a', amount = 1): In => ({ key, value: { amount }, ts });

describe('streams model: window assignment', () => {
  it('TimeWindows.windowsFor: starts are multiples of advance, none below 0', () => {
    assert.deepEqual(timeWindowsFor({ sizeMs: 10, advanceMs: 10 }, 0), [0]);
    assert.deepEqual(timeWindowsFor({ sizeMs: 10, advanceMs: 10 }, 9), [0]);
    assert.deepEqual(timeWindowsFor({ sizeMs: 10, advanceMs: 10 }, 10), [10]);
    assert.deepEqual(timeWindowsFor({ sizeMs: 10, advanceMs: 5 }, 7), [0, 5]);
    assert.deepEqual(timeWindowsFor({ sizeMs: 10, advanceMs: 5 }, 3), [0]);
    assert.deepEqual(timeWindowsFor({ sizeMs: 10, advanceMs: 3 }, 10), [3, 6, 9]);
  });
});

describe('streams model: tumbling and hopping windows', () => {
  it('emit update: every change, timestamp the max of the window; late when end <= stream time - grace', () => {
    const r = runModel(
      windowedCount(TimeWindows.ofSizeAndGrace(10, 5)),
      input([a(1), a(12), a(3), a(20), a(4), a(16)]),
    );
    assert.deepEqual(outputs(r), [
      win('a', 0, 10, 1, 1),
      win('a', 10, 20, 1, 12),
      win('a', 0, 10, 2, 3), // stream time 12, close 7: [0,10) still open
      win('a', 20, 30, 1, 20),
      win('a', 10, 20, 2, 16), // t=4 came between: stream time 20, close 15, [0,10) closed
    ]);
    assert.deepEqual(
      r.deadLetters.map((d) => [d.reason, d.source.offset, d.windows, d.store]),
      [['late', 4, [{ start: 0, end: 10 }], 'counts']],
    );
  });

  it('the late comparison is end <= close: grace 0 drops a record for a window ending at stream time', () => {
    const r0 = runModel(windowedCount(TimeWindows.ofSizeWithNoGrace(10)), input([a(10), a(9)]));
    assert.deepEqual(outputs(r0), [win('a', 10, 20, 1, 10)]);
    assert.equal(r0.deadLetters.length, 1);
    const r1 = runModel(windowedCount(TimeWindows.ofSizeAndGrace(10, 1)), input([a(10), a(9)]));
    assert.deepEqual(outputs(r1), [win('a', 10, 20, 1, 10), win('a', 0, 10, 1, 9)]);
    assert.equal(r1.deadLetters.length, 0);
  });

  it("onLate('drop') drops instead of dead-lettering", () => {
    const r = runModel(
      windowedCount(TimeWindows.ofSizeWithNoGrace(10), 'update', 'drop'),
      input([a(10), a(9)]),
    );
    assert.deepEqual(r.deadLetters, []);
    assert.deepEqual(
      r.dropped.map((d) => [d.reason, d.source.offset]),
      [['late', 1]],
    );
  });

  it('hopping: a record counts in every window it falls in that is still open', () => {
    const w = TimeWindows.ofSizeWithNoGrace(10).advanceBy(5);
    const r = runModel(windowedCount(w), input([a(7), a(12), a(9)]));
    assert.deepEqual(outputs(r), [
      win('a', 0, 10, 1, 7),
      win('a', 5, 15, 1, 7),
      win('a', 5, 15, 2, 12),
      win('a', 10, 20, 1, 12),
      win('a', 5, 15, 3, 12), // t=9: [0,10) closed at stream time 12; [5,15) open, its timestamp stays 12
    ]);
    assert.deepEqual(
      r.deadLetters.map((d) => d.windows),
      [[{ start: 0, end: 10 }]],
    );
  });

  it('windowed aggregations drop null keys only (a null value reaches the aggregator)', () => {
    const t = topology({ applicationId: 'app' });
    t.stream<string, { amount: number } | null>('in', { key: s })
      .groupByKey()
      .windowedBy(TimeWindows.ofSizeWithNoGrace(10))
      .count()
      .toStream()
      .map((wk, v) => [wk.key, v] as const)
      .to('out', { key: s });
    const r = runModel(t.build(), input([a(1, null), { key: 'a', ts: 2 }]));
    assert.deepEqual(outputs(r), [{ key: 'a', value: 1, ts: 2 }]);
    assert.deepEqual(
      r.dropped.map((d) => d.reason),
      ['null-key'],
    );
  });

  it('emit final: each window once when stream time passes end + grace, by window start then key', () => {
    const inputs = input([a(1), a(3, 'b'), a(3), a(12), a(16), a(26), a(12), a(27, 'b')]);
    const r = runModel(windowedCount(TimeWindows.ofSizeAndGrace(10, 5), 'final'), inputs);
    assert.deepEqual(outputs(r), [
      // t=16: stream time 16, close 11: windows ending <= 11
      win('a', 0, 10, 2, 3),
      win('b', 0, 10, 1, 3),
      // t=26: close 21: [10,20)
      win('a', 10, 20, 2, 16),
    ]);
    assert.deepEqual(
      r.deadLetters.map((d) => [d.source.offset, d.windows]),
      [[6, [{ start: 10, end: 20 }]]],
    );
  });

  it('emit final reproduces Kafka Streams losing a window that its store expired before the close was seen', () => {
    // The time-ordered store keeps size + grace behind its newest window start; a jump past that hides
    // [0,10) from the range fetch of the final results (AbstractRocksDBTimeOrderedSegmentedBytesStore.fetchAll).
    const r = runModel(
      windowedCount(TimeWindows.ofSizeAndGrace(10, 5), 'final'),
      input([a(5), a(100), a(200)]),
    );
    assert.deepEqual(outputs(r), []);
    const dense = runModel(
      windowedCount(TimeWindows.ofSizeAndGrace(10, 5), 'final'),
      input([a(5), a(16), a(100)]),
    );
    assert.deepEqual(outputs(dense), [win('a', 0, 10, 1, 5)]);
  });
});

describe('streams model: unwindowed tables', () => {
  const table = (kind: 'count' | 'reduce' | 'aggregate') => {
    const t = topology({ applicationId: 'app' });
    const g = t.stream<string, { amount: number }>('in', { key: s }).groupByKey();
    const tab =
      kind === 'count'
        ? g.count()
        : kind === 'reduce'
          ? g.reduce((x, y) => ({ amount: x.amount + y.amount }))
          : g.aggregate(
              () => ({ n: 0, sum: 0 }),
              (_k, v, agg) => ({ n: agg.n + 1, sum: agg.sum + v.amount }),
            );
    (tab.toStream() as ReturnType<typeof tab.toStream>).to('out', { key: s });
    return t.build();
  };
  const records = input([
    a(5, 'a', 10),
    a(3, 'b', 1),
    a(2, 'a', 20),
    a(9, null, 5),
    { key: 'a', ts: 11 },
    a(7, 'a', 1),
  ]);

  it('count: one update per record, the timestamp the max so far; null keys and null values dropped', () => {
    const r = runModel(table('count'), records);
    assert.deepEqual(outputs(r), [
      { key: 'a', value: 1, ts: 5 },
      { key: 'b', value: 1, ts: 3 },
      { key: 'a', value: 2, ts: 5 },
      { key: 'a', value: 3, ts: 7 },
    ]);
    assert.deepEqual(
      r.dropped.map((d) => [d.reason, d.source.offset]),
      [
        ['null-key', 3],
        ['null-value', 4],
      ],
    );
  });

  it('reduce: the first value, then reducer(aggregate, value)', () => {
    assert.deepEqual(
      outputs(runModel(table('reduce'), records)).map((o) => o.value),
      [{ amount: 10 }, { amount: 1 }, { amount: 30 }, { amount: 31 }],
    );
  });

  it('aggregate: initializer then aggregator(key, value, aggregate)', () => {
    assert.deepEqual(
      outputs(runModel(table('aggregate'), records)).map((o) => o.value),
      [
        { n: 1, sum: 10 },
        { n: 1, sum: 1 },
        { n: 2, sum: 30 },
        { n: 3, sum: 31 },
      ],
    );
  });

  it("reduce stores its values with the stream's value serde (as Kafka Streams does), here bytes", () => {
    const t = topology({ applicationId: 'app' });
    t.stream('in', { key: s, value: serdes.bytes() })
      .groupByKey()
      .reduce((x, y) => Buffer.concat([x, y]))
      .toStream()
      .to('out', { key: s });
    const r = runModel(t.build(), [
      { topic: 'in', partition: 0, offset: 0, key: Buffer.from('k'), value: Buffer.from([1]), timestamp: 1 },
      {
        topic: 'in',
        partition: 0,
        offset: 1,
        key: Buffer.from('k'),
        value: Buffer.from([2, 3]),
        timestamp: 2,
      },
    ]);
    assert.deepEqual(
      r.outputs.map((o) => [...(o.value ?? [])]),
      [[1], [1, 2, 3]],
    );
  });

  it('keeps state per key across partitions of one topic apart (one task per partition)', () => {
    const r = runModel(
      table('count'),
      input([
        { ...a(1), partition: 0 },
        { ...a(2), partition: 1 },
      ]),
    );
    assert.deepEqual(
      outputs(r).map((o) => o.value),
      [1, 1],
    );
  });
});
