import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RedfenceError } from '../../src/errors/index.js';
import { murmur2, toPositive } from '../../src/partitioner/index.js';
import { type Serde, serdes, TimeWindows, topology } from '../../src/topology/index.js';
import { runModel } from '../../src/topology/model.js';
import { input, outputs } from './model-helpers.js';

type Order = { amount: number; c?: string };
const app = () => topology({ applicationId: 'app' });
const s = serdes.string();

describe('streams model: stateless operators', () => {
  it('filter, filterNot, mapValues, peek keep keys and timestamps', () => {
    const t = app();
    const seen: string[] = [];
    const src = t.stream<string, Order>('in', { key: s });
    src
      .filter((_k, v) => v.amount > 10)
      .mapValues((v) => v.amount * 2)
      .to('big', { key: s });
    src
      .filterNot((_k, v) => v.amount > 10)
      .peek((k) => seen.push(k))
      .to('small', { key: s });
    const r = runModel(
      t.build(),
      input([
        { key: 'a', value: { amount: 5 }, ts: 1 },
        { key: 'b', value: { amount: 50 }, ts: 2 },
      ]),
    );
    assert.deepEqual(outputs(r, 'big'), [{ key: 'b', value: 100, ts: 2 }]);
    assert.deepEqual(outputs(r, 'small'), [{ key: 'a', value: { amount: 5 }, ts: 1 }]);
    assert.deepEqual(seen, ['a']);
  });

  it('map, selectKey, flatMap and flatMapValues, in order, with the record timestamp', () => {
    const t = app();
    const src = t.stream<string, Order>('in', { key: s });
    src.map((k, v) => [`${k}!` as string, v.amount] as const).to('m', { key: s });
    src.selectKey((_k, v) => v.c ?? 'none').to('sk', { key: s });
    src.flatMap((k, v) => [[k, 1] as const, [`${k}2`, v.amount] as const]).to('fm', { key: s });
    src.flatMapValues((v) => [v.amount, v.amount + 1]).to('fmv', { key: s });
    const r = runModel(t.build(), input([{ key: 'a', value: { amount: 3, c: 'x' }, ts: 7 }]));
    assert.deepEqual(outputs(r, 'm'), [{ key: 'a!', value: 3, ts: 7 }]);
    assert.deepEqual(outputs(r, 'sk'), [{ key: 'x', value: { amount: 3, c: 'x' }, ts: 7 }]);
    assert.deepEqual(outputs(r, 'fm'), [
      { key: 'a', value: 1, ts: 7 },
      { key: 'a2', value: 3, ts: 7 },
    ]);
    assert.deepEqual(outputs(r, 'fmv'), [
      { key: 'a', value: 3, ts: 7 },
      { key: 'a', value: 4, ts: 7 },
    ]);
    // Sinks write in the order the records reached them: per input record, branch after branch.
    assert.deepEqual(
      r.outputs.map((o) => o.topic),
      ['m', 'sk', 'fm', 'fm', 'fmv', 'fmv'],
    );
  });

  it('split sends each record to its first matching branch, the rest to the default branch', () => {
    const t = app();
    const b = t
      .stream<string, number>('in', { key: s })
      .split({ name: 'size' })
      .branch((_k, v) => v >= 100, 'large')
      .branch((_k, v) => v >= 10, 'medium')
      .defaultBranch('small');
    b['size-large']?.to('large', { key: s });
    b['size-medium']?.to('medium', { key: s });
    b['size-small']?.to('small', { key: s });
    const r = runModel(
      t.build(),
      input([
        { key: 'a', value: 500, ts: 1 },
        { key: 'b', value: 50, ts: 2 },
        { key: 'c', value: 5, ts: 3 },
      ]),
    );
    assert.deepEqual(
      outputs(r, 'large').map((o) => o.key),
      ['a'],
    );
    assert.deepEqual(
      outputs(r, 'medium').map((o) => o.key),
      ['b'],
    );
    assert.deepEqual(
      outputs(r, 'small').map((o) => o.key),
      ['c'],
    );
  });

  it('noDefaultBranch drops what no branch takes; merge interleaves both streams in input order', () => {
    const t = app();
    const b = t
      .stream<string, number>('in', { key: s })
      .split()
      .branch((_k, v) => v > 0)
      .noDefaultBranch();
    const positive = Object.values(b)[0];
    assert.ok(positive);
    const other = t.stream<string, number>('in2', { key: s });
    positive.merge(other).to('out', { key: s });
    const r = runModel(t.build(), [
      ...input([{ key: 'a', value: 1, ts: 1 }]),
      ...input([{ key: 'x', value: -9, ts: 2 }], 'in2'),
      ...input([
        { key: 'b', value: -1, ts: 3 },
        { key: 'c', value: 2, ts: 4 },
      ]).slice(0, 2),
    ]);
    assert.deepEqual(
      outputs(r).map((o) => o.key),
      ['a', 'x', 'c'],
    );
  });

  it('a pattern matches whole topic names, as Kafka Streams matches; a global flag changes nothing', () => {
    for (const re of [/orders-.*/, /orders-.*/g]) {
      const t = app();
      t.stream(re, { key: s, value: s }).to('out', { key: s });
      const built = t.build();
      const rec = (topic: string) => ({
        topic,
        partition: 0,
        offset: 0,
        key: null,
        value: null,
        timestamp: 1,
      });
      // the same topic twice: a stateful test() would fail the second time
      for (const topic of ['orders-eu', 'orders-eu'])
        assert.equal(runModel(built, [rec(topic)]).outputs.length, 1, `${re} reads ${topic}`);
      for (const topic of ['old-orders-eu', 'orders'])
        assert.throws(
          () => runModel(built, [rec(topic)]),
          (e: unknown) => RedfenceError.is(e, 'RF_INVALID_ARGUMENT') && e.message.includes(topic),
          `${re} does not read ${topic}`,
        );
    }
  });

  it('sources by topic list and by pattern; serdes string, bytes and user serdes on both sides', () => {
    const upper: Serde<string> = {
      serialize: (v) => Buffer.from(v.toUpperCase()),
      deserialize: (b) => b.toString().toLowerCase(),
    };
    const t = app();
    t.stream(/^orders-(eu|us)$/, { key: s, value: serdes.bytes() }).to('raw', { key: upper });
    t.stream<string, string | null>(['x', 'y'], { key: s, value: s })
      .mapValues((v) => (v === null ? null : v.length))
      .to('len', { key: s });
    const r = runModel(t.build(), [
      {
        topic: 'orders-eu',
        partition: 0,
        offset: 0,
        key: Buffer.from('k'),
        value: Buffer.from([1, 2]),
        timestamp: 1,
      },
      {
        topic: 'x',
        partition: 0,
        offset: 0,
        key: Buffer.from('k'),
        value: Buffer.from('hello'),
        timestamp: 2,
      },
      { topic: 'y', partition: 1, offset: 0, key: null, value: null, timestamp: 3 },
    ]);
    const raw = r.outputs.filter((o) => o.topic === 'raw');
    assert.deepEqual(
      raw.map((o) => [o.key?.toString(), [...(o.value ?? [])]]),
      [['K', [1, 2]]],
    );
    // Null keys and values reach user functions as null and leave a sink as no bytes.
    assert.deepEqual(outputs(r, 'len'), [
      { key: 'k', value: 5, ts: 2 },
      { key: null, value: null, ts: 3 },
    ]);
  });

  it('refuses input no source reads and malformed input records', () => {
    const t = app();
    t.stream('in').to('out');
    const b = t.build();
    assert.throws(
      () => runModel(b, input([{ key: 'a', value: 1, ts: 1 }], 'other')),
      (e: unknown) => RedfenceError.is(e, 'RF_INVALID_ARGUMENT'),
    );
    assert.throws(
      () => runModel(b, input([{ key: 'a', value: 1, ts: -1 }])),
      (e: unknown) => RedfenceError.is(e, 'RF_INVALID_ARGUMENT'),
    );
  });
});

describe('streams model: repartition', () => {
  it('a count after selectKey goes through the repartition topic: partition by murmur2 of the key bytes', () => {
    const t = app();
    t.stream<string, { c: string }>('in', { key: s })
      .selectKey((_k, v) => v.c)
      .groupByKey({ key: s })
      .count({ name: 'per-c' })
      .toStream()
      .to('out', { key: s });
    const b = t.build();
    const r = runModel(
      b,
      input([
        { key: 'o1', value: { c: 'x' }, ts: 1, partition: 0 },
        { key: 'o2', value: { c: 'y' }, ts: 2, partition: 1 },
        { key: 'o3', value: { c: 'x' }, ts: 3, partition: 2 },
        { key: 'o4', value: { c: 'x' }, ts: 4, partition: 1 },
      ]),
    );
    assert.deepEqual(outputs(r), [
      { key: 'x', value: 1, ts: 1 },
      { key: 'y', value: 1, ts: 2 },
      { key: 'x', value: 2, ts: 3 },
      { key: 'x', value: 3, ts: 4 },
    ]);
  });

  it('drops null keys at the repartition (Kafka Streams filters them before the repartition topic)', () => {
    const t = app();
    t.stream<string, { c: string | null }>('in', { key: s })
      .selectKey((_k, v) => v.c)
      .groupByKey()
      .count()
      .toStream()
      .to('out');
    const r = runModel(t.build(), input([{ key: 'o1', value: { c: null }, ts: 1 }]));
    assert.deepEqual(r.outputs, []);
    assert.deepEqual(
      r.dropped.map((d) => [d.reason, d.node, d.source.topic]),
      [['null-key', 'KSTREAM-SINK-0000000003', 'in']],
    );
  });

  it('stream time of a repartitioned aggregation is kept per repartition partition', () => {
    // Two keys on different repartition partitions: a record late on one partition is not late on the other.
    const t = app();
    t.stream<string, { c: string }>('in', { key: s })
      .selectKey((_k, v) => v.c)
      .groupByKey({ key: s })
      .windowedBy(TimeWindows.ofSizeWithNoGrace(10))
      .count()
      .toStream()
      .map((wk, v) => [wk.key, v] as const)
      .to('out', { key: s });
    const keys = ['a', 'b', 'c', 'd', 'e', 'f'];
    const part = (k: string) => toPositive(murmur2(Buffer.from(k))) % 4;
    const k1 = keys[0] as string;
    const k2 = keys.find((k) => part(k) !== part(k1)) as string;
    const r = runModel(
      t.build(),
      input([
        { key: 'o1', value: { c: k1 }, ts: 100 },
        { key: 'o2', value: { c: k2 }, ts: 5 },
        { key: 'o3', value: { c: k1 }, ts: 5 },
      ]),
      { partitions: { in: 4 } },
    );
    assert.deepEqual(
      outputs(r).map((o) => [o.key, o.ts]),
      [
        [k1, 100],
        [k2, 5],
      ],
    );
    assert.equal(r.deadLetters.length, 1);
    assert.equal(r.deadLetters[0]?.source.topic, 'app-KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition');
  });
});
