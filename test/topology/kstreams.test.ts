/**
 * The Kafka Streams runner (kstreams.ts) on the real broker, independently of the streams DSL: tiny
 * fixed inputs whose outputs are computed by hand (window bounds, values, timestamps, a late record
 * dropped, a session bridge's tombstones), and every named scenario on its generated input with checks
 * that hold whatever the exact output (window shapes, final = last update, no tombstone in final,
 * alerts over the threshold), those over several input topics (no record late) by hand too. All runs
 * share one JVM. Skipped, saying why, only when there is no Java.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { before, describe, it } from 'node:test';
import { runKafkaStreams } from './kstreams.js';
import { PINNED } from './pinned.js';
import { runScenario } from './scenario-model.js';
import { CASES, inputFor, type OutRecord, regroupKey, START_MS as T, type WindowSpec } from './scenarios.js';

/** Scenarios the model is compared on (20 generated, 12 pinned): fewer is a silent shrink, and fails. */
const AT_LEAST_SCENARIOS = 32;

const java = spawnSync('java', ['-version'], { encoding: 'utf8' });
const NO_JAVA = java.error === undefined ? undefined : `no java on PATH (${java.error.message})`;

const out = (
  key: string,
  start: number,
  end: number,
  value: number | null,
  timestamp: number,
): OutRecord => ({
  key,
  start,
  end,
  value,
  timestamp,
});

const byKey = (records: OutRecord[]) => {
  const m = new Map<string, OutRecord[]>();
  for (const r of records) m.set(r.key, [...(m.get(r.key) ?? []), r]);
  return m;
};
/** The last value of every (key, start, end) of an output. */
const lastOf = (records: OutRecord[]) =>
  new Map(records.map((r) => [`${r.key}@${r.start}-${r.end}`, r.value]));

describe('Kafka Streams on the streams scenarios (the reference runner)', { skip: NO_JAVA }, () => {
  let results = new Map<string, OutRecord[]>();
  const inputs = new Map(CASES.map((c) => [c.scenario.name, inputFor(c.scenario.name)]));
  const get = (name: string) => {
    const r = results.get(name);
    assert.ok(r !== undefined, `no output for ${name}`);
    return r;
  };

  before(async () => {
    results = await runKafkaStreams([
      ...PINNED,
      ...CASES.map((c) => ({ scenario: c.scenario, input: inputs.get(c.scenario.name) ?? [] })),
    ]);
  });

  it('a tumbling count: 1, 2, 3 in one window, timestamps the largest so far; the late record gives nothing', () => {
    assert.deepEqual(get('pin-tumbling-update'), [
      out('a', T, T + 10_000, 1, T + 1000),
      out('a', T, T + 10_000, 2, T + 3000),
      out('a', T, T + 10_000, 3, T + 3000),
      out('b', T + 10_000, T + 20_000, 1, T + 19_999),
    ]);
  });

  it('a tumbling count emitted on window close: one final 3; the window still open gives nothing', () => {
    assert.deepEqual(get('pin-tumbling-final'), [out('a', T, T + 10_000, 3, T + 3000)]);
  });

  it('emitted on close, Kafka Streams 4.4 skips a window or session when the record closing it jumps past its retention', () => {
    // The window store keeps size + grace (12 s) before its newest window start; the final fetch reads
    // only what it keeps: b (window start T+20 s) closes [T, T+10 s) but the fetch starts at T+8 s + 1.
    // With b at T+20 s - 1 ms (window start T+10 s, above) the window is emitted.
    assert.deepEqual(get('pin-tumbling-final-jump'), []);
    assert.deepEqual(get('pin-session-final-jump'), []);
  });

  it('a session bridge: tombstones for both merged sessions, then the merged session', () => {
    assert.deepEqual(get('pin-session-update'), [
      out('a', T, T, 1, T),
      out('a', T + 8000, T + 8000, 1, T + 8000),
      out('a', T, T, null, T),
      out('a', T + 8000, T + 8000, null, T + 8000),
      out('a', T, T + 8000, 3, T + 8000),
    ]);
  });

  it('a session emitted on close: only the merged session, once', () => {
    assert.deepEqual(get('pin-session-final'), [out('a', T, T + 8000, 3, T + 8000)]);
  });

  it('a hopping sum: the record is in the two windows that hold it, earliest first', () => {
    assert.deepEqual(get('pin-hopping-sum'), [
      out('a', T, T + 10_000, 4, T + 7000),
      out('a', T + 5000, T + 15_000, 4, T + 7000),
    ]);
  });

  it('a sliding count: the left windows of both records and the right window of the first', () => {
    const got = get('pin-sliding-update').map((r) => [r.start - T, r.end - T, r.value]);
    got.sort((x, y) => Number(x[0]) - Number(y[0]));
    assert.deepEqual(got, [
      [5000, 10_000, 1],
      [7000, 12_000, 2],
      [10_001, 15_001, 1],
    ]);
  });

  it('an unwindowed sum: running totals per key, start = end = -1, the null key dropped', () => {
    assert.deepEqual(get('pin-table-sum'), [
      out('a', -1, -1, 5, T),
      out('a', -1, -1, 12, T + 2),
      out('b', -1, -1, 1, T + 3),
    ]);
  });

  it('the fraud topology: amounts over 50 counted, counts over 1 alerted', () => {
    assert.deepEqual(get('pin-fraud'), [
      out('a', T, T + 10_000, 2, T + 3),
      out('a', T, T + 10_000, 3, T + 4),
    ]);
  });

  it('unwindowed count and sum on the generated input (one or two input topics): 1..n and running sums per key', () => {
    for (const name of ['table-count', 'table-sum', 'table-sum-inputs']) {
      const count = CASES.find((c) => c.scenario.name === name)?.scenario.aggregate === 'count';
      const expected: OutRecord[] = [];
      const state = new Map<string, { value: number; ts: number }>();
      for (const r of inputs.get(name) ?? []) {
        if (r.key === null) continue;
        const s = state.get(r.key) ?? { value: 0, ts: r.timestamp };
        s.value += count ? 1 : r.amount;
        s.ts = Math.max(s.ts, r.timestamp);
        state.set(r.key, s);
        expected.push(out(r.key, -1, -1, s.value, s.ts));
      }
      assert.deepEqual(byKey(get(name)), byKey(expected), name);
    }
  });

  it('two aggregations across a repartition: per k<p>, the running sum of the tumbling counts of the keys of partition p, in their order', () => {
    const sc = CASES.find((c) => c.scenario.name === 'tumbling-count-regroup')?.scenario;
    assert.ok(sc !== undefined);
    // tumbling-count-update is the first aggregation on the same input; its output topic's partition p
    // holds the updates of the keys of input partition p (the same key, the same partition count), read
    // in offset order: the order Kafka Streams' task read them in
    const expected: OutRecord[] = [];
    const sums = new Map<string, { value: number; ts: number }>();
    for (const r of get('tumbling-count-update')) {
      const k = regroupKey(sc, r.key);
      const s = sums.get(k) ?? { value: 0, ts: r.timestamp };
      s.value += r.value ?? 0;
      s.ts = Math.max(s.ts, r.timestamp);
      sums.set(k, s);
      expected.push(out(k, -1, -1, s.value, s.ts));
    }
    assert.ok(sums.size > 1);
    assert.deepEqual(byKey(get('tumbling-count-regroup')), byKey(expected));
  });

  it('a tumbling count over three input topics through a repartition: every keyed record of every topic counted once, in the order of its key', () => {
    const name = 'tumbling-count-inputs';
    const w = CASES.find((c) => c.scenario.name === name)?.scenario.window;
    assert.ok(w?.kind === 'tumbling');
    const input = inputs.get(name) ?? [];
    // the grace outlasts the input's span: no record is late, each keyed one is one update of its window
    assert.ok(input.length > 0 && Math.max(...input.map((r) => r.timestamp)) - T < w.graceMs);
    const expected: OutRecord[] = [];
    const windows = new Map<string, { value: number; ts: number }>();
    for (const r of input) {
      if (r.key === null) continue;
      const start = r.timestamp - (r.timestamp % w.sizeMs);
      const at = `${r.key}@${start}`;
      const s = windows.get(at) ?? { value: 0, ts: r.timestamp };
      s.value += 1;
      s.ts = Math.max(s.ts, r.timestamp);
      windows.set(at, s);
      expected.push(out(r.key, start, start + w.sizeMs, s.value, s.ts));
    }
    assert.deepEqual(byKey(get(name)), byKey(expected), name);
  });

  it('windowed scenarios: window shapes, late records dropped, final = the last update of each closed window', () => {
    const shape = (w: WindowSpec, r: OutRecord) => {
      if (w.kind === 'tumbling') return r.start % w.sizeMs === 0 && r.end - r.start === w.sizeMs;
      if (w.kind === 'hopping') return r.start % w.advanceMs === 0 && r.end - r.start === w.sizeMs;
      if (w.kind === 'sliding') return r.end - r.start === w.timeDifferenceMs;
      return r.start <= r.end && r.end - r.start < 10 * 60_000;
    };
    for (const { scenario: s } of CASES) {
      const got = get(s.name);
      assert.ok(got.length > 0, `${s.name}: no output`);
      assert.ok(
        got.every((r) => /^k\d+$/.test(r.key)),
        `${s.name}: a key that is not the input's`,
      );
      if (s.window === null || s.regroup !== undefined) continue;
      const w = s.window;
      assert.ok(
        got.every((r) => shape(w, r)),
        `${s.name}: a window that is not ${w.kind}`,
      );
      if (s.emit === 'final') {
        const seen = got.map((r) => `${r.key}@${r.start}`);
        assert.equal(new Set(seen).size, seen.length, `${s.name}: a window emitted twice`);
        assert.ok(
          got.every((r) => r.value !== null),
          `${s.name}: a tombstone in final results`,
        );
        const updates = lastOf(get(s.name.replace(/-final$/, '-update')));
        for (const r of got)
          assert.equal(
            r.value,
            updates.get(`${r.key}@${r.start}-${r.end}`),
            `${s.name}: ${r.key}@${r.start}`,
          );
      }
      if (s.minCount !== undefined)
        assert.ok(
          got.every((r) => (r.value ?? 0) > (s.minCount ?? 0)),
          `${s.name}: alert`,
        );
    }
    const keyed = (inputs.get('tumbling-count-update') ?? []).filter((r) => r.key !== null).length;
    const counted = get('tumbling-count-update').length;
    assert.ok(
      counted < keyed && counted > keyed * 0.8,
      `tumbling update: ${counted} outputs of ${keyed} keyed records`,
    );
    assert.ok(
      get('session-count-update').some((r) => r.value === null),
      'session update: no tombstone (no session merged)',
    );
  });

  it('a node that throws downstream of the aggregation, with CONTINUE: that update (or final result) is dropped, the aggregate goes on', () => {
    for (const emit of ['update', 'final'] as const) {
      const plain = get(`tumbling-count-${emit}`);
      const throws = get(`tumbling-count-throws-${emit}`);
      // the same input (base(3), seed 1): the plain scenario's outputs without the multiples of 3
      const kept = plain.filter((r) => r.value === null || r.value % 3 !== 0);
      assert.ok(kept.length < plain.length, `${emit}: no multiple of 3 in the plain outputs`);
      assert.deepEqual(byKey(throws), byKey(kept), emit);
      if (emit === 'update')
        assert.ok(
          throws.some((r) => (r.value ?? 0) > 3),
          'counts past a dropped update: the store kept it',
        );
    }
  });

  it('the reference model gives what Kafka Streams gives, key by key, on every scenario', () => {
    const runs = [
      ...PINNED,
      ...CASES.map((c) => ({ scenario: c.scenario, input: inputs.get(c.scenario.name) ?? [] })),
    ];
    assert.ok(runs.length >= AT_LEAST_SCENARIOS, `only ${runs.length} scenarios`);
    assert.ok(
      runs.filter((r) => (r.scenario.inputs ?? 1) > 1).length >= 2,
      'scenarios over several input topics',
    );
    let compared = 0;
    for (const { scenario, input } of runs) {
      const theirs = byKey(get(scenario.name));
      const ours = byKey(runScenario(scenario, input));
      assert.deepEqual(
        [...ours.keys()].sort(),
        [...theirs.keys()].sort(),
        `${scenario.name}: the keys with outputs differ`,
      );
      for (const [key, records] of theirs) {
        assert.deepEqual(ours.get(key), records, `${scenario.name}: the outputs of key ${key} differ`);
        compared += records.length;
      }
    }
    // the generated scenarios alone give a few thousand outputs: a comparison of nothing cannot pass
    assert.ok(compared > 2000, `only ${compared} outputs compared`);
  });
});
