/**
 * Queryable state (TopologyState, src/topology/state/) against real Redis, standalone and Cluster, and
 * the real executor: after generated inputs run through TopologyExecutor (several partitions,
 * out-of-order and late records, null keys and values, replays by a new owner), every store's answer
 * for every key equals what the reference model's updates left (the last update per key, window or
 * session; session tombstones remove), and its stamp is the key's last record. Unknown stores, stores
 * of another kind and bad arguments are refused with their codes before any call; time windows of an
 * application from before the layout marker are RF_STATE_LAYOUT.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import type { Redis } from 'ioredis';
import { partitionFor } from '../../src/partitioner/index.js';
import { KeyStore } from '../../src/store/store.js';
import {
  type BuiltTopology,
  type Serde,
  SessionWindows,
  SlidingWindows,
  serdes,
  TimeWindows,
  topology,
} from '../../src/topology/index.js';
import { type ModelInput, type ModelResult, runModel } from '../../src/topology/model.js';
import { TopologyState } from '../../src/topology/state/state.js';
import { MAX_FETCH_WINDOWS } from '../../src/topology/state/stores.js';
import { uniqueName } from '../helpers/env.js';
import { TARGETS } from '../helpers/targets.js';
import { assertEqualToModel, generated, runOnRedis } from './run-helpers.js';

const RUNS = Number(process.env.RF_TOPOLOGY_STATE_RUNS ?? 12);
const s = serdes.string();
type Order = { amount: number };
type Stats = { n: number; sum: number };
/** Not JSON: a value read back through any other serde would not equal the model's. */
const statsSerde: Serde<Stats> = {
  serialize: (v) => Buffer.from(`${v.n}/${v.sum}`),
  deserialize: (b) => {
    const [n, sum] = b.toString().split('/').map(Number) as [number, number];
    return { n, sum };
  },
};
const HOP = { sizeMs: 10, advanceMs: 5, graceMs: 3 };
const TUMBLE = 20;
const SLIDE = 8;

/** One store of each kind the executor runs: counts and JS aggregates, unwindowed, windowed and sessions. */
function stores(app: string): BuiltTopology {
  const t = topology({ applicationId: app });
  const g = t.stream<string, Order | null>('in', { key: s }).groupByKey();
  g.count({ name: 'n' }).toStream().to('n', { key: s });
  g.aggregate(
    (): Stats => ({ n: 0, sum: 0 }),
    (_k, o, a) => ({ n: a.n + 1, sum: a.sum + (o?.amount ?? 0) }),
    { name: 'stats', value: statsSerde },
  )
    .toStream()
    .to('stats', { key: s, value: statsSerde });
  g.windowedBy(TimeWindows.ofSizeAndGrace(HOP.sizeMs, HOP.graceMs).advanceBy(HOP.advanceMs))
    .count({ name: 'hop' })
    .toStream()
    .map((w, n) => [JSON.stringify([w.key, w.start]), n] as const)
    .to('hop', { key: s });
  g.windowedBy(TimeWindows.ofSizeWithNoGrace(TUMBLE))
    .aggregate(
      () => 0,
      (_k, o, m) => Math.max(m, o?.amount ?? 0),
      { name: 'max' },
    )
    .toStream()
    .map((w, m) => [JSON.stringify([w.key, w.start]), m] as const)
    .to('max', { key: s });
  g.windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(SLIDE, 1000))
    .count({ name: 'slide' })
    .toStream()
    .map((w, n) => [JSON.stringify([w.key, w.start]), n] as const)
    .to('slide', { key: s });
  // a grace longer than the inputs: no session leaves the store's retention unannounced
  g.windowedBy(SessionWindows.ofInactivityGapAndGrace(6, 1000))
    .count({ name: 'visits' })
    .toStream()
    .map((w, n) => [JSON.stringify([w.key, w.start, w.end]), n] as const)
    .to('visits', { key: s });
  return t.build();
}

interface Last {
  value: unknown;
  ts: number;
}

/** What the model's updates left, per output topic and key (the last update; a null value removes). */
function lastUpdates(model: ModelResult): Map<string, Map<string, Last>> {
  const out = new Map<string, Map<string, Last>>();
  for (const o of model.outputs) {
    const m = out.get(o.topic) ?? new Map<string, Last>();
    out.set(o.topic, m);
    const k = o.key?.toString() as string;
    if (o.value === null) m.delete(k);
    else {
      const value =
        o.topic === 'stats' ? statsSerde.deserialize(o.value, '') : JSON.parse(o.value.toString());
      m.set(k, { value, ts: o.timestamp });
    }
  }
  return out;
}

/** The windows a window topic's updates left for `key`, by start. */
function windowsOf(last: Map<string, Last> | undefined, key: string, size: number) {
  return [...(last ?? [])]
    .map(([k, v]) => [JSON.parse(k) as [string, number], v] as const)
    .filter(([[k]]) => k === key)
    .map(([[, start], v]) => ({ start, end: start + size, value: v.value, timestamp: v.ts, final: false }))
    .sort((a, b) => a.start - b.start);
}

function sessionsOf(last: Map<string, Last> | undefined, key: string) {
  return [...(last ?? [])]
    .map(([k, v]) => [JSON.parse(k) as [string, number, number], v] as const)
    .filter(([[k]]) => k === key)
    .map(([[, start, end], v]) => ({ start, end, value: v.value }))
    .sort((a, b) => a.end - b.end || a.start - b.start);
}

/** The key's last record: every record with a key reaches the session count, which always applies. */
function lastRecord(input: readonly ModelInput[], key: string, partitions: number) {
  const mine = input.filter((r) => r.key?.toString() === key);
  const last = mine.at(-1);
  return last === undefined ? null : { partition: partitionFor(key, partitions), offset: last.offset };
}

for (const target of TARGETS.filter((t) => t.mode === 'cluster')) {
  describe(`queryable state on ${target.name}`, { timeout: 300_000 }, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    it('every store answers what the model left for every key, stamped with its last record', async () => {
      const seen = { values: 0, windows: 0, sessions: 0, merged: 0, ranged: 0, absent: 0 };
      await fc.assert(
        fc.asyncProperty(
          generated(4, 20, 1),
          fc.array(fc.nat(400), { minLength: 4, maxLength: 4 }),
          async (g, bounds) => {
            const built = stores(uniqueName('qs').replace(/-/g, '_'));
            const model = runModel(built, g.input, { partitions: { in: g.partitions } });
            assertEqualToModel(model, await runOnRedis(redis, built, g, null));
            const last = lastUpdates(model);
            const state = new TopologyState(built, { redis: redis as Redis });
            const top = Math.max(0, ...g.input.map((r) => r.timestamp)) + TUMBLE;
            const [lo, hi] = [
              Math.min(bounds[0] ?? 0, bounds[1] ?? 0),
              Math.max(bounds[0] ?? 0, bounds[1] ?? 0),
            ];
            for (const key of ['a', 'b', 'c', 'd', 'e', 'never']) {
              const stamp = lastRecord(g.input, key, g.partitions);
              for (const [store, topic] of [
                ['n', 'n'],
                ['stats', 'stats'],
              ] as const) {
                const got = await state.keyValueStore(store).get(key);
                const want = last.get(topic)?.get(key);
                assert.deepEqual(got.value, want?.value ?? null, `${store} ${key}`);
                assert.equal(got.timestamp, want?.ts ?? null, `${store} ${key} timestamp`);
                assert.deepEqual(
                  got.stamp && { partition: got.stamp.partition, offset: got.stamp.offset },
                  stamp,
                );
                if (want !== undefined) seen.values++;
                if (got.stamp === null) seen.absent++;
              }
              for (const [store, size] of [
                ['hop', HOP.sizeMs],
                ['max', TUMBLE],
                ['slide', SLIDE],
              ] as const) {
                const all = windowsOf(last.get(store), key, size);
                const got = await state.windowStore(store).fetch(key, 0, top);
                assert.deepEqual(got.windows, all, `${store} ${key} windows`);
                assert.deepEqual(
                  got.stamp && { partition: got.stamp.partition, offset: got.stamp.offset },
                  stamp,
                );
                const part = await state.windowStore(store).fetch(key, lo, hi);
                assert.deepEqual(
                  part.windows,
                  all.filter((w) => w.start >= lo && w.start <= hi),
                  `${store} ${key} windows starting in [${lo}, ${hi}]`,
                );
                seen.windows += all.length;
                seen.ranged += part.windows.length;
              }
              const sessions = sessionsOf(last.get('visits'), key);
              const visits = state.sessionStore('visits');
              const got = await visits.fetch(key);
              assert.deepEqual(got.sessions, sessions, `visits ${key}`);
              assert.deepEqual(
                got.stamp && { partition: got.stamp.partition, offset: got.stamp.offset },
                stamp,
              );
              const found = await visits.findSessions(key, lo, hi);
              assert.deepEqual(
                found.sessions,
                sessions.filter((x) => x.end >= lo && x.start <= hi),
                `visits ${key} overlapping [${lo}, ${hi}]`,
              );
              seen.sessions += sessions.length;
              seen.merged += sessions.filter((x) => x.end > x.start).length;
            }
          },
        ),
        { numRuns: RUNS },
      );
      assert.ok(seen.values > 0 && seen.windows > 0 && seen.sessions > 0, JSON.stringify(seen));
      assert.ok(seen.merged > 0 && seen.ranged > 0 && seen.absent > 0, JSON.stringify(seen));
    });

    it('a window fetch wider than one script reads in parts and equals a narrow one', async () => {
      const built = stores(uniqueName('qw').replace(/-/g, '_'));
      const value = Buffer.from('{"amount":5}');
      const records = [3, 30_000, 49_997].map((timestamp, offset) => ({
        topic: 'in',
        partition: 0,
        offset,
        key: Buffer.from('k'),
        value,
        timestamp,
      }));
      const g = { partitions: 1, input: records, cuts: [[9]], replays: [false] };
      await runOnRedis(redis, built, g, null);
      const hop = new TopologyState(built, { redis: redis as Redis }).windowStore<string, number>('hop');
      const wide = await hop.fetch('k', 0, 5 * (MAX_FETCH_WINDOWS - 1)); // 2 parts
      assert.deepEqual(
        wide.windows.map((w) => [w.start, w.value]),
        [0, 29_995, 30_000, 49_990, 49_995].map((start) => [start, 1]),
      );
      assert.deepEqual(wide.stamp, { topic: 'in', partition: 0, offset: 2, epoch: 1 });
      assert.deepEqual((await hop.fetch('k', 29_995, 30_000)).windows, wide.windows.slice(1, 3));
      assert.deepEqual((await hop.fetch('k', 10, 1)).windows, [], 'from after to: no window');
    });

    it('time windows of an application that ran before the layout marker: RF_STATE_LAYOUT, the others read', async () => {
      const built = stores(uniqueName('ql').replace(/-/g, '_'));
      const state = new TopologyState(built, { redis: redis as Redis });
      assert.deepEqual((await state.windowStore('hop').fetch('k', 0, 100)).windows, [], 'not started: none');
      // an older version took partition 0 (no marker): its windows kept their timestamps in a second key
      const store = new KeyStore({ redis, app: built.applicationId });
      await redis.incr(store.keys.epoch('in', 0));
      await assert.rejects(state.windowStore('hop').fetch('k', 0, 100), {
        code: 'RF_STATE_LAYOUT',
        message: new RegExp(`application ${built.applicationId}: .*rebuild it from its input`),
      });
      assert.equal((await state.keyValueStore('n').get('k')).value, null, 'a key-value store reads');
      assert.deepEqual((await state.sessionStore('visits').fetch('k')).sessions, []);
      assert.equal(await redis.exists(store.keys.layout()), 0, 'a reader claims nothing');
    });
  });
}

describe('queryable state: refusals', () => {
  // never reached: every refusal comes before a call
  let calls = 0;
  const redis = {
    evalshaBuffer: async () => {
      calls++;
    },
    evalBuffer: async () => {
      calls++;
    },
  } as unknown as Redis;

  it('an unknown store is RF_STORE_UNKNOWN listing the stores; another kind is RF_STORE_KIND naming the reader', () => {
    const state = new TopologyState(stores('refuse'), { redis });
    assert.throws(
      () => state.keyValueStore('nope'),
      (e: { code?: string; details?: { stores?: string[] } }) =>
        e.code === 'RF_STORE_UNKNOWN' &&
        JSON.stringify(e.details?.stores) === JSON.stringify(['n', 'stats', 'hop', 'max', 'slide', 'visits']),
    );
    assert.throws(() => state.windowStore('n'), {
      code: 'RF_STORE_KIND',
      message:
        /"n" of topology refuse is a key-value store, not a window store: read it with keyValueStore\("n"\)/,
    });
    assert.throws(() => state.keyValueStore('hop'), {
      code: 'RF_STORE_KIND',
      message: /windowStore\("hop"\)/,
    });
    assert.throws(() => state.windowStore('visits'), { code: 'RF_STORE_KIND', message: /sessionStore/ });
    assert.throws(() => state.sessionStore('max'), { code: 'RF_STORE_KIND' });
    assert.equal(state.kindOf('visits'), 'session');
    assert.deepEqual(
      state.stores.map((x) => [x.name, x.kind]),
      [
        ['n', 'key-value'],
        ['stats', 'key-value'],
        ['hop', 'window'],
        ['max', 'window'],
        ['slide', 'window'],
        ['visits', 'session'],
      ],
    );
  });

  it('bad arguments are RF_INVALID_ARGUMENT naming the field, without the key; nothing is sent', async () => {
    const state = new TopologyState(stores('refuse'), { redis });
    const bad = (field: string) => (e: { code?: string; details?: { field?: string } }) =>
      e.code === 'RF_INVALID_ARGUMENT' && e.details?.field === field;
    await assert.rejects(state.keyValueStore('n').get(null), bad('key'));
    await assert.rejects(state.windowStore('hop').fetch('k', 1.5, 9), bad('fromMs'));
    await assert.rejects(state.windowStore('hop').fetch('k', 0, Number.NaN), bad('toMs'));
    await assert.rejects(state.windowStore('hop').fetch('k', 0, 5 * MAX_FETCH_WINDOWS), bad('toMs'));
    await assert.rejects(
      state.sessionStore('visits').findSessions('k', 0, '9' as never),
      bad('latestStartMs'),
    );
    const throwing: Serde<string> = {
      serialize: () => {
        throw new Error('secret-key-text');
      },
      deserialize: (b) => b.toString(),
    };
    const t = topology({ applicationId: 'refuse2' });
    t.stream<string, number>('in', { key: throwing }).groupByKey().count({ name: 'c' }).toStream().to('out');
    await assert.rejects(
      new TopologyState(t.build(), { redis }).keyValueStore('c').get('secret-key-text'),
      (e: Error & { code?: string }) => e.code === 'RF_INVALID_ARGUMENT' && !e.message.includes('secret'),
    );
    assert.equal(calls, 0);
  });

  it('a topology the executor cannot run, a non-topology and unknown options are refused at construction', () => {
    // a count of a count's updates
    const t = topology({ applicationId: 'twice' });
    t.stream<string, number>('in')
      .groupByKey()
      .count({ name: 'first' })
      .toStream()
      .groupByKey()
      .count({ name: 'second' })
      .toStream()
      .to('out');
    assert.throws(() => new TopologyState(t.build(), { redis }), { code: 'RF_TOPOLOGY_UNSUPPORTED' });
    assert.throws(() => new TopologyState({} as BuiltTopology, { redis }), { code: 'RF_INVALID_ARGUMENT' });
    assert.throws(() => new TopologyState(stores('x'), { redis, store: 'x' } as never), {
      code: 'RF_INVALID_OPTIONS',
      message: /unknown option "store"/,
    });
    assert.throws(() => new TopologyState(stores('x'), { redis: {} as Redis }), {
      code: 'RF_INVALID_OPTIONS',
    });
  });
});
