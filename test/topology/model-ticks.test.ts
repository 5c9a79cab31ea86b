// Ticks in the reference model (src/topology/tick.ts; docs/streams.md, "Closing the windows of an idle
// partition"): a record with a null key and the `redfence-tick` header walks no node and moves every
// windowed aggregation of its sub-topology as a record that updates no window. Expectations by hand from
// Kafka Streams' rules (a record updating no window: observed stream time, then the final results).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SessionWindows, SlidingWindows, serdes, TimeWindows, topology } from '../../src/topology/index.js';
import { type ModelInput, runModel } from '../../src/topology/model.js';
import { isTick, TICK_HEADER } from '../../src/topology/tick.js';
import { type In, input, outputs, win } from './model-helpers.js';

const s = serdes.string();

/** A tick of `topic` partition `partition` at `ts`, after the records of `before` (its offset follows theirs). */
function tick(before: readonly ModelInput[], ts: number, topic = 'in', partition = 0): ModelInput {
  const offset = before.filter((r) => r.topic === topic && r.partition === partition).length;
  return {
    topic,
    partition,
    offset,
    key: null,
    value: Buffer.alloc(0),
    timestamp: ts,
    headers: { [TICK_HEADER]: 'i1' },
  };
}

function windowedCount(w: TimeWindows | SessionWindows | SlidingWindows, emit: 'update' | 'final') {
  const t = topology({ applicationId: 'app' });
  const g = t.stream<string, { amount: number }>('in', { key: s }).groupByKey();
  const table =
    w instanceof SessionWindows
      ? g.windowedBy(w).emit(emit).count({ name: 'counts' })
      : g.windowedBy(w).emit(emit).count({ name: 'counts' });
  table
    .toStream()
    .map((wk, v) => [wk.key, { start: wk.start, end: wk.end, value: v }] as const)
    .to('out', { key: s });
  return t.build();
}

const a = (ts: number, key: string | null = 'a'): In => ({ key, value: { amount: 1 }, ts });

describe('streams model: ticks', () => {
  it('isTick: a null key and the header; a keyed record with the header is no tick', () => {
    assert.equal(isTick({ key: null, headers: { [TICK_HEADER]: '' } }), true);
    assert.equal(isTick({ key: null, headers: {} }), false);
    assert.equal(isTick({ key: null }), false);
    assert.equal(isTick({ key: Buffer.from('k'), headers: { [TICK_HEADER]: '' } }), false);
  });

  it("emit('final'), time windows: a tick closes the windows its time passes, without its headers", () => {
    const built = windowedCount(TimeWindows.ofSizeAndGrace(10, 2), 'final');
    const records = input([a(1), a(4, 'b'), a(11)]);
    assert.deepEqual(outputs(runModel(built, records)), [], 'stream time 11, close 9: nothing closed');
    const r = runModel(built, [...records, tick(records, 25)]);
    assert.deepEqual(outputs(r), [win('a', 0, 10, 1, 1), win('b', 0, 10, 1, 4), win('a', 10, 20, 1, 11)]);
    assert.ok(
      r.outputs.every((o) => o.headers === undefined),
      'no tick header on a result',
    );
    assert.deepEqual(
      [r.deadLetters, r.dropped, r.failed, r.misplaced],
      [[], [], [], []],
      'the tick is nothing else',
    );
    // a record after the tick, older than the tick minus the grace, is late
    const late = [...records, tick(records, 25), { ...input([a(22)])[0], offset: 4 } as ModelInput];
    assert.deepEqual(runModel(built, late).deadLetters, [], 'a record in a window still open is not late');
    const older = [...records, tick(records, 25), { ...input([a(13)])[0], offset: 4 } as ModelInput];
    assert.deepEqual(
      runModel(built, older).deadLetters.map((d) => [d.source.offset, d.windows]),
      [[4, [{ start: 10, end: 20 }]]],
      'a record of a window the tick closed is late',
    );
  });

  it("emit('update'): a tick forwards nothing and moves the stream time for the late check", () => {
    const built = windowedCount(TimeWindows.ofSizeWithNoGrace(10), 'update');
    const records = input([a(1)]);
    const r = runModel(built, [
      ...records,
      tick(records, 30),
      { ...input([a(5)])[0], offset: 2 } as ModelInput,
    ]);
    assert.deepEqual(outputs(r), [win('a', 0, 10, 1, 1)]);
    assert.deepEqual(
      r.deadLetters.map((d) => [d.source.offset, d.windows]),
      [[2, [{ start: 0, end: 10 }]]],
    );
  });

  it("emit('final'), session and sliding windows: a tick closes them as a record would", () => {
    const sessions = windowedCount(SessionWindows.ofInactivityGapAndGrace(5, 1), 'final');
    const sr = input([a(1), a(3), a(20, 'b')]);
    assert.deepEqual(outputs(runModel(sessions, sr)), [win('a', 1, 3, 2, 3)], 'b at 20 closes a alone');
    assert.deepEqual(outputs(runModel(sessions, [...sr, tick(sr, 30)])), [
      win('a', 1, 3, 2, 3),
      win('b', 20, 20, 1, 20),
    ]);
    const sliding = windowedCount(SlidingWindows.ofTimeDifferenceAndGrace(5, 1), 'final');
    const lr = input([a(10), a(12)]);
    const closed = outputs(runModel(sliding, [...lr, tick(lr, 40)]));
    assert.deepEqual(closed, [win('a', 5, 10, 1, 10), win('a', 7, 12, 2, 12), win('a', 11, 16, 1, 12)]);
    assert.deepEqual(outputs(runModel(sliding, lr)), closed.slice(0, 1), 'without the tick: the first alone');
  });

  it('walks no node: no drop, no dead letter, no function called; an unwindowed count ignores it', () => {
    const t = topology({ applicationId: 'app' });
    let calls = 0;
    t.stream<string, { amount: number }>('in', { key: s })
      .filter(() => {
        calls++;
        return true;
      })
      .groupByKey()
      .count({ name: 'plain' })
      .toStream()
      .to('out', { key: s });
    const records = input([a(1)]);
    const r = runModel(t.build(), [...records, tick(records, 99)]);
    assert.equal(calls, 1, 'the filter ran on the record alone');
    assert.deepEqual([r.outputs.length, r.deadLetters, r.dropped, r.failed], [1, [], [], []]);
  });

  it('a tick of a repartition topic closes the windows of the sub-topology reading it', () => {
    const t = topology({ applicationId: 'app' });
    t.stream<string, { amount: number }>('in', { key: s })
      .groupBy((k) => `r${k}`, { name: 'rk', key: s })
      .windowedBy(TimeWindows.ofSizeWithNoGrace(10))
      .emit('final')
      .count({ name: 'counts' })
      .toStream()
      .map((wk, v) => [wk.key, { start: wk.start, end: wk.end, value: v }] as const)
      .to('out', { key: s });
    const built = t.build();
    const records = input([a(3)]);
    assert.deepEqual(outputs(runModel(built, records)), []);
    const rep = 'app-rk-repartition';
    const ticked = runModel(built, [...records, { ...tick([], 50, rep, 0) }]);
    assert.deepEqual(outputs(ticked), [win('ra', 0, 10, 1, 3)]);
    // the input's tick does not reach the repartition topic: the input's sub-topology has no window
    assert.deepEqual(outputs(runModel(built, [...records, tick(records, 50)])), []);
  });
});
