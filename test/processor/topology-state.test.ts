/**
 * Queryable state racing a running TopologyProcessor on the real broker and Redis: while the processor
 * works through generated input (3 partitions, out-of-order and late records, null keys; small batches),
 * another client reads a key-value store and a window store of every key in a loop. Every answer must
 * equal the reference model run on the key's partition up to the answer's stamp (the stamp's record and
 * those before it, nothing after): a read never shows part of a batch. The reads must see many stamps
 * before the end, and the end state must equal the model on the whole input.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { type BuiltTopology, serdes, TimeWindows, topology } from '../../src/topology/index.js';
import { type ModelInput, runModel } from '../../src/topology/model.js';
import { TopologyState } from '../../src/topology/state/state.js';
import { standalone, uniqueName } from '../helpers/env.js';
import { START_MS } from '../topology/scenarios.js';
import { type Case, PARTITIONS, prepare, processor } from './topology-helpers.js';

const s = serdes.string();
const SEC = 1000;
const MIN = 60 * SEC;
const HOP = { sizeMs: MIN, advanceMs: 20 * SEC, graceMs: 10 * SEC };

/** An unwindowed count and a hopping-window count of the same orders. */
function counts(ns: string): BuiltTopology {
  const t = topology({ applicationId: ns });
  const g = t.stream<string, { amount: number }>(`${ns}-orders`, { key: s }).groupByKey();
  g.count({ name: 'orders' }).toStream().to(`${ns}-counts`, { key: s });
  g.windowedBy(TimeWindows.ofSizeAndGrace(HOP.sizeMs, HOP.graceMs).advanceBy(HOP.advanceMs))
    .count({ name: 'per-minute' })
    .toStream()
    .map((w, n) => [JSON.stringify([w.key, w.start]), n] as const)
    .to(`${ns}-hop`, { key: s });
  return t.build();
}

const CASE: Case = {
  name: 'a count and a hopping-window count',
  build: counts,
  outputs: (ns) => [`${ns}-counts`, `${ns}-hop`],
  input: {
    keys: 6,
    records: 600,
    partitions: PARTITIONS,
    startMs: START_MS,
    spanMs: 20 * MIN,
    outOfOrderFraction: 0.15,
    lateFraction: 0.05,
    nullKeyFraction: 0.03,
    disorderMs: 15 * SEC,
    lateByMs: 2 * MIN,
  },
};

interface Expected {
  count: number | null;
  windows: { start: number; value: number }[];
}

/** The model on the key's partition up to `offset`: the key's count and its windows' counts. */
function expectedAt(
  built: BuiltTopology,
  inputs: readonly ModelInput[],
  ns: string,
  key: string,
  partition: number,
  offset: number,
): Expected {
  const prefix = inputs.filter((r) => r.partition === partition && r.offset <= offset);
  const model = runModel(built, prefix, { partitions: { [`${ns}-orders`]: PARTITIONS } });
  let count: number | null = null;
  const windows = new Map<number, number>();
  for (const o of model.outputs) {
    const k = o.key?.toString() as string;
    const v = JSON.parse(o.value?.toString() as string) as number;
    if (o.topic === `${ns}-counts` && k === key) count = v;
    if (o.topic === `${ns}-hop`) {
      const [wk, start] = JSON.parse(k) as [string, number];
      if (wk === key) windows.set(start, v);
    }
  }
  const list = [...windows].map(([start, value]) => ({ start, value })).sort((a, b) => a.start - b.start);
  return { count, windows: list };
}

describe('queryable state while a topology processor runs', { timeout: 300_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  it('every answer equals the model up to its stamp; the reads see the state move', async (t) => {
    const ns = uniqueName('tqs');
    const { built, inputs, records, produce, cleanup } = await prepare(CASE, ns, 21);
    t.after(cleanup);
    const keys = [...new Set(inputs.flatMap((r) => (r.key === null ? [] : [r.key.toString()])))];
    const lastOf = new Map(
      keys.map((k) => [k, inputs.filter((r) => r.key?.toString() === k).at(-1)?.offset as number]),
    );
    const times = inputs.map((r) => r.timestamp);
    const [from, to] = [Math.min(...times) - HOP.sizeMs, Math.max(...times)];
    const state = new TopologyState(built, { redis });
    const count = state.keyValueStore<string, number>('orders');
    const perMinute = state.windowStore<string, number>('per-minute');
    const cache = new Map<string, Expected>();
    const expect = (key: string, p: number, o: number) => {
      const id = `${key}@${p}:${o}`;
      let e = cache.get(id);
      if (e === undefined) {
        e = expectedAt(built, inputs, ns, key, p, o);
        cache.set(id, e);
      }
      return e;
    };

    await produce(0, records);
    const p = processor(built, redis, 'exactly-once', 7);
    await p.start();
    const stamps = new Set<string>();
    let reads = 0;
    let partial = 0;
    try {
      const deadline = Date.now() + 180_000;
      for (let done = false; !done; ) {
        assert.ok(Date.now() < deadline, 'the processor reached the end of the input in time');
        done = true;
        for (const key of keys) {
          const [c, w] = await Promise.all([count.get(key), perMinute.fetch(key, from, to)]);
          for (const a of [c, w]) {
            if (a.stamp === null) {
              done = false;
              continue;
            }
            const want = expect(key, a.stamp.partition, a.stamp.offset);
            if ('value' in a) assert.equal(a.value, want.count, `count of ${key} at ${a.stamp.offset}`);
            else
              assert.deepEqual(
                a.windows.map((x) => ({ start: x.start, value: x.value })),
                want.windows,
                `windows of ${key} at ${a.stamp.offset}`,
              );
            stamps.add(`${key}@${a.stamp.offset}`);
            reads++;
            if (a.stamp.offset < (lastOf.get(key) as number)) {
              partial++;
              done = false;
            }
          }
        }
      }
    } finally {
      await p.close();
    }
    console.log('STATE READS', { reads, partial, stamps: stamps.size, records });
    assert.ok(partial > 0, 'some reads saw a key before its last record');
    assert.ok(stamps.size > 2 * keys.length, `reads saw the keys at many points (${stamps.size} stamps)`);
    // at the end: the model on the whole input
    for (const key of keys) {
      const all = expectedAt(
        built,
        inputs,
        ns,
        key,
        inputs.find((r) => r.key?.toString() === key)?.partition ?? 0,
        Number.MAX_SAFE_INTEGER,
      );
      assert.equal((await count.get(key)).value, all.count);
      assert.deepEqual(
        (await perMinute.fetch(key, from, to)).windows.map((x) => ({ start: x.start, value: x.value })),
        all.windows,
      );
    }
  });
});
