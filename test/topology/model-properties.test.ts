// The model's windowed counts against brute force, on seeded random inputs with no late records: the
// last value forwarded for each window must be the number of records inside it. This checks the
// transcription of Kafka Streams' algorithms (sliding windows and session merges especially).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SessionWindows, SlidingWindows, serdes, TimeWindows, topology } from '../../src/topology/index.js';
import { runModel } from '../../src/topology/model.js';
import { type In, input, outputs } from './model-helpers.js';

type W = { start: number; end: number; value: number | null };

/** A small seeded generator (mulberry32), so every run sees the same inputs. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function records(seed: number, n: number, spread: number): In[] {
  const r = rng(seed);
  const out: In[] = [];
  for (let i = 0; i < n; i++) {
    out.push({ key: r() < 0.5 ? 'a' : 'b', value: { amount: 1 }, ts: Math.floor(r() * spread) });
  }
  return out;
}

/** The last value forwarded per key and window; windows whose last value is a tombstone are gone. */
function lastValues(
  rs: In[],
  build: () => ReturnType<ReturnType<typeof topology>['build']>,
): Map<string, number> {
  const last = new Map<string, number | null>();
  for (const o of outputs(runModel(build(), input(rs)))) {
    const w = o.value as W;
    last.set(`${o.key}:${w.start}:${w.end}`, w.value);
  }
  return new Map([...last].filter((e): e is [string, number] => e[1] !== null));
}

function build(windows: TimeWindows | SlidingWindows | SessionWindows) {
  return () => {
    const t = topology({ applicationId: 'p' });
    const g = t.stream<string, { amount: number }>('in', { key: serdes.string() }).groupByKey();
    const table =
      windows instanceof SessionWindows ? g.windowedBy(windows).count() : g.windowedBy(windows).count();
    table
      .toStream()
      .map((wk, v) => [wk.key, { start: wk.start, end: wk.end, value: v }] as const)
      .to('out', { key: serdes.string() });
    return t.build();
  };
}

const count = (rs: In[], key: string, from: number, to: number) =>
  rs.filter((r) => r.key === key && r.ts >= from && r.ts <= to).length;

describe('streams model against brute force (seeded, no late records)', () => {
  for (const seed of [1, 2, 3, 4, 5, 6, 7, 8]) {
    it(`hopping windows, seed ${seed}`, () => {
      const rs = records(seed, 60, 200);
      const got = lastValues(rs, build(TimeWindows.ofSizeAndGrace(20, 1000).advanceBy(5)));
      const want = new Map<string, number>();
      for (const r of rs) {
        for (let start = Math.max(0, Math.floor((r.ts - 20 + 5) / 5) * 5); start <= r.ts; start += 5) {
          want.set(`${r.key}:${start}:${start + 20}`, count(rs, r.key as string, start, start + 19));
        }
      }
      assert.deepEqual(new Map([...got].sort()), new Map([...want].sort()));
    });

    it(`sliding windows, seed ${seed}`, () => {
      const rs = records(seed, 40, 120);
      const got = lastValues(rs, build(SlidingWindows.ofTimeDifferenceAndGrace(10, 1000)));
      assert.ok(got.size > 0);
      for (const [id, value] of got) {
        const [key, start, end] = id.split(':') as [string, string, string];
        assert.equal(value, count(rs, key, Number(start), Number(end)), `window ${id}`);
      }
      // Every record's own window exists: [t - d, t], or [0, d] for t < d.
      for (const r of rs) {
        const start = r.ts < 10 ? 0 : r.ts - 10;
        assert.ok(got.has(`${r.key}:${start}:${start + 10}`), `the window of the record at ${r.ts}`);
      }
    });

    it(`session windows, seed ${seed}`, () => {
      const rs = records(seed, 40, 400);
      const got = lastValues(rs, build(SessionWindows.ofInactivityGapAndGrace(15, 10_000)));
      const want = new Map<string, number>();
      for (const key of ['a', 'b']) {
        const ts = rs
          .filter((r) => r.key === key)
          .map((r) => r.ts)
          .sort((x, y) => x - y);
        let first = 0;
        for (let i = 1; i <= ts.length; i++) {
          if (i === ts.length || (ts[i] as number) - (ts[i - 1] as number) > 15) {
            want.set(`${key}:${ts[first]}:${ts[i - 1]}`, i - first);
            first = i;
          }
        }
      }
      assert.deepEqual(new Map([...got].sort()), new Map([...want].sort()));
    });
  }
});

/** Sorted timestamps with steps in [0, maxStep]: stream time never jumps past a store's retention. */
function dense(seed: number, n: number, maxStep: number): In[] {
  const r = rng(seed);
  let ts = 0;
  const out: In[] = [];
  for (let i = 0; i < n; i++) {
    ts += Math.floor(r() * (maxStep + 1));
    out.push({ key: r() < 0.5 ? 'a' : 'b', value: { amount: 1 }, ts });
  }
  return out;
}

function finals(rs: In[], windows: TimeWindows | SlidingWindows | SessionWindows) {
  const t = topology({ applicationId: 'p' });
  const g = t.stream<string, { amount: number }>('in', { key: serdes.string() }).groupByKey();
  const table =
    windows instanceof SessionWindows
      ? g.windowedBy(windows).emit('final').count()
      : g.windowedBy(windows).emit('final').count();
  table
    .toStream()
    .map((wk, v) => [wk.key, { start: wk.start, end: wk.end, value: v }] as const)
    .to('out', { key: serdes.string() });
  return outputs(runModel(t.build(), input(rs))).map((o) => ({
    key: o.key as string,
    ...(o.value as W),
    ts: o.ts,
  }));
}

describe('streams model emit final against brute force (seeded, dense input)', () => {
  for (const seed of [11, 12, 13, 14, 15]) {
    it(`hopping windows: every closed window once, in start order per key, with its count, seed ${seed}`, () => {
      const rs = dense(seed, 80, 4);
      const out = finals(rs, TimeWindows.ofSizeAndGrace(20, 5).advanceBy(5));
      const close = Math.max(...rs.map((r) => r.ts)) - 5;
      for (const key of ['a', 'b']) {
        const mine = out.filter((o) => o.key === key);
        const starts = new Set<number>();
        for (const r of rs.filter((x) => x.key === key)) {
          for (let s0 = Math.max(0, Math.floor((r.ts - 15) / 5) * 5); s0 <= r.ts; s0 += 5)
            if (s0 + 20 <= close) starts.add(s0);
        }
        assert.deepEqual(
          mine.map((o) => o.start),
          [...starts].sort((x, y) => x - y),
        );
        for (const o of mine) assert.equal(o.value, count(rs, key, o.start, o.end - 1));
      }
    });

    it(`session windows: every closed session once with its count, seed ${seed}`, () => {
      const rs = dense(seed, 60, 30);
      const out = finals(rs, SessionWindows.ofInactivityGapAndGrace(15, 10));
      const close = Math.max(...rs.map((r) => r.ts)) - 10 - 15;
      for (const key of ['a', 'b']) {
        const ts = rs.filter((r) => r.key === key).map((r) => r.ts);
        const want: W[] = [];
        let first = 0;
        for (let i = 1; i <= ts.length; i++) {
          if (i === ts.length || (ts[i] as number) - (ts[i - 1] as number) > 15) {
            const end = ts[i - 1] as number;
            if (end < close) want.push({ start: ts[first] as number, end, value: i - first });
            first = i;
          }
        }
        assert.deepEqual(
          out.filter((o) => o.key === key).map(({ start, end, value }) => ({ start, end, value })),
          want,
        );
      }
    });

    it(`sliding windows: each window once, with its count, seed ${seed}`, () => {
      const rs = dense(seed, 60, 6);
      const out = finals(rs, SlidingWindows.ofTimeDifferenceAndGrace(10, 5));
      const seen = new Set<string>();
      for (const o of out) {
        const id = `${o.key}:${o.start}`;
        assert.ok(!seen.has(id), `window ${id} emitted twice`);
        seen.add(id);
        assert.equal(o.value, count(rs, o.key, o.start, o.end));
      }
      assert.ok(out.length > 10);
    });
  }
});

describe('streams model with no grace on in-order input (stores pruned as they go) against brute force', () => {
  for (const seed of [21, 22, 23]) {
    it(`hopping, sliding and session counts, seed ${seed}`, () => {
      const rs = dense(seed, 300, 9);
      const hop = lastValues(rs, build(TimeWindows.ofSizeWithNoGrace(20).advanceBy(5)));
      for (const [id, v] of hop) {
        const [key, start, end] = id.split(':') as [string, string, string];
        assert.equal(v, count(rs, key, Number(start), Number(end) - 1), `hopping ${id}`);
      }
      const slide = lastValues(rs, build(SlidingWindows.ofTimeDifferenceWithNoGrace(10)));
      for (const [id, v] of slide) {
        const [key, start, end] = id.split(':') as [string, string, string];
        assert.equal(v, count(rs, key, Number(start), Number(end)), `sliding ${id}`);
      }
      const sessions = lastValues(rs, build(SessionWindows.ofInactivityGapWithNoGrace(15)));
      let total = 0;
      for (const [id, v] of sessions) {
        const [key, start, end] = id.split(':') as [string, string, string];
        assert.equal(v, count(rs, key, Number(start), Number(end)), `session ${id}`);
        total += v;
      }
      assert.equal(total, rs.length);
      assert.ok(hop.size > 50 && slide.size > 50);
    });
  }
});
