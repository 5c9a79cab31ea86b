// Session and sliding windows: expectations computed by hand from Kafka Streams'
// KStreamSessionWindowAggregate and KStreamSlidingWindowAggregate (caching off, emit interval 0).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SessionWindows, SlidingWindows, serdes, topology } from '../../src/topology/index.js';
import { runModel } from '../../src/topology/model.js';
import { type In, input, outputs, win } from './model-helpers.js';

const s = serdes.string();
const a = (ts: number, key: string | null = 'a', amount = 1): In => ({ key, value: { amount }, ts });

function sessionCount(w: SessionWindows, emit: 'update' | 'final') {
  const t = topology({ applicationId: 'app' });
  t.stream<string, { amount: number }>('in', { key: s })
    .groupByKey()
    .windowedBy(w)
    .emit(emit)
    .count()
    .toStream()
    .map((wk, v) => [wk.key, { start: wk.start, end: wk.end, value: v }] as const)
    .to('out', { key: s });
  return t.build();
}

function slidingCount(w: SlidingWindows, emit: 'update' | 'final' = 'update') {
  const t = topology({ applicationId: 'app' });
  t.stream<string, { amount: number }>('in', { key: s })
    .groupByKey()
    .windowedBy(w)
    .emit(emit)
    .count()
    .toStream()
    .map((wk, v) => [wk.key, { start: wk.start, end: wk.end, value: v }] as const)
    .to('out', { key: s });
  return t.build();
}

describe('streams model: session windows', () => {
  const records = input([a(0), a(5), a(30), a(18), a(21), a(50)]);

  it('emit update: merges with tombstones (timestamp: the old session end) before the merged session', () => {
    const r = runModel(sessionCount(SessionWindows.ofInactivityGapWithNoGrace(10), 'update'), records);
    assert.deepEqual(outputs(r), [
      win('a', 0, 0, 1, 0),
      { key: 'a', value: { start: 0, end: 0, value: null }, ts: 0 },
      win('a', 0, 5, 2, 5),
      win('a', 30, 30, 1, 30),
      // t=18: close = 30 - 0 - 10 = 20; the session [18,18] ends before it: late
      { key: 'a', value: { start: 30, end: 30, value: null }, ts: 30 },
      win('a', 21, 30, 2, 30),
      win('a', 50, 50, 1, 50),
    ]);
    assert.deepEqual(
      r.deadLetters.map((d) => [d.source.offset, d.windows]),
      [[3, [{ start: 18, end: 18 }]]],
    );
  });

  it('a record inside a session replaces it: a tombstone, then the same window with its new value', () => {
    const r = runModel(
      sessionCount(SessionWindows.ofInactivityGapWithNoGrace(10), 'update'),
      input([a(0), a(8), a(4)]),
    );
    assert.deepEqual(outputs(r).slice(3), [
      { key: 'a', value: { start: 0, end: 8, value: null }, ts: 8 },
      win('a', 0, 8, 3, 8),
    ]);
  });

  const sumSessions = (grace: number) => {
    const t = topology({ applicationId: 'app' });
    t.stream<string, { amount: number }>('in', { key: s })
      .groupByKey()
      .windowedBy(SessionWindows.ofInactivityGapAndGrace(10, grace))
      .aggregate(
        () => 0,
        (_k, v, sum) => sum + v.amount,
        (_k, x, y) => x + y,
      )
      .toStream()
      .filter((_wk, v) => v !== null)
      .map((wk, v) => [wk.key, v] as const)
      .to('out', { key: s });
    return t.build();
  };

  it('a record bridging two sessions merges them with the merger of a session aggregate', () => {
    const r = runModel(sumSessions(100), input([a(0, 'a', 5), a(20, 'a', 7), a(10, 'a', 100)]));
    assert.deepEqual(
      outputs(r).map((o) => o.value),
      [5, 7, 112],
    );
  });

  it('a session older than the store retention (gap + grace) is not found, so not merged', () => {
    // Stream time 20, gap 10, grace 0: the key-first session store shows sessions ending at or after
    // 20 - 10 + 1 = 11 (AbstractRocksDBSegmentedBytesStore.getActualFrom); [0,0] is not merged.
    const r = runModel(sumSessions(0), input([a(0, 'a', 5), a(20, 'a', 7), a(10, 'a', 100)]));
    assert.deepEqual(
      outputs(r).map((o) => o.value),
      [5, 7, 107],
    );
  });

  it('emit final: each session once when stream time - gap - grace passes its end, timestamp its end', () => {
    const r = runModel(sessionCount(SessionWindows.ofInactivityGapWithNoGrace(10), 'final'), records);
    assert.deepEqual(outputs(r), [win('a', 0, 5, 2, 5), win('a', 21, 30, 2, 30)]);
  });
});

describe('streams model: sliding windows', () => {
  it('left and right windows, out-of-order records, the late rule end < stream time - grace', () => {
    const r = runModel(
      slidingCount(SlidingWindows.ofTimeDifferenceWithNoGrace(10)),
      input([a(20), a(25), a(22)]),
    );
    assert.deepEqual(outputs(r), [
      win('a', 10, 20, 1, 20),
      win('a', 21, 31, 1, 25), // the right window of the record at 20 now holds 25
      win('a', 15, 25, 2, 25),
      // t=22 (stream time 25): the windows holding it, then its own right window [23,33] holding 25
      win('a', 21, 31, 2, 25),
      win('a', 15, 25, 3, 25),
      win('a', 23, 33, 1, 25),
    ]);
    // its left window [12,22] ends before stream time 25: missed
    assert.deepEqual(
      r.deadLetters.map((d) => [d.source.offset, d.windows]),
      [[2, [{ start: 12, end: 22 }]]],
    );
  });

  it('records earlier than the time difference share the window [0, difference]', () => {
    const r = runModel(slidingCount(SlidingWindows.ofTimeDifferenceWithNoGrace(10)), input([a(3), a(5)]));
    assert.deepEqual(outputs(r), [win('a', 0, 10, 1, 3), win('a', 4, 14, 1, 5), win('a', 0, 10, 2, 5)]);
  });

  it('a record whose every window closed is late as a whole', () => {
    const r = runModel(slidingCount(SlidingWindows.ofTimeDifferenceWithNoGrace(10)), input([a(100), a(80)]));
    assert.deepEqual(outputs(r), [win('a', 90, 100, 1, 100)]);
    assert.deepEqual(
      r.deadLetters.map((d) => d.windows),
      [[{ start: 80, end: 90 }]],
    );
  });

  it('sliding windows drop null keys and null values', () => {
    const r = runModel(
      slidingCount(SlidingWindows.ofTimeDifferenceWithNoGrace(10)),
      input([a(20, null), { key: 'a', ts: 21 }]),
    );
    assert.deepEqual(r.outputs, []);
    assert.deepEqual(
      r.dropped.map((d) => d.reason),
      ['null-key', 'null-value'],
    );
  });

  it('emit final: windows whose end is before stream time - grace, once, by start', () => {
    const r = runModel(
      slidingCount(SlidingWindows.ofTimeDifferenceWithNoGrace(10), 'final'),
      input([a(20), a(25), a(40)]),
    );
    // t=40: close 40, windows with start <= 29: [10,20], [15,25], [21,31]
    assert.deepEqual(outputs(r), [win('a', 10, 20, 1, 20), win('a', 15, 25, 2, 25), win('a', 21, 31, 1, 25)]);
  });
});
