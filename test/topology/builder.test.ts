import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RedfenceError } from '../../src/errors/index.js';
import {
  type BuiltTopology,
  SessionWindows,
  SlidingWindows,
  serdes,
  TimeWindows,
  topology,
} from '../../src/topology/index.js';

function invalid(fn: () => unknown, node: string | null, pattern: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(RedfenceError.is(err, 'RF_TOPOLOGY_INVALID'), String(err));
    assert.equal(err.details?.node, node);
    assert.match(err.message, pattern);
    if (node !== null) assert.ok(err.message.includes(node), err.message);
    return true;
  });
}

function kinds(b: BuiltTopology): string[] {
  return b.nodes.map((n) => n.kind);
}

describe('streams topology builder', () => {
  it('describes a stateless topology as frozen nodes and edges in one sub-topology', () => {
    const t = topology({ applicationId: 'app' });
    t.stream<string, number>('in', { key: serdes.string() })
      .filter((_k, v) => v > 1)
      .mapValues((v) => v * 2)
      .to('out');
    const b = t.build();
    assert.deepEqual(kinds(b), ['source', 'filter', 'mapValues', 'sink']);
    assert.deepEqual(
      b.nodes.map((n) => n.name),
      [
        'KSTREAM-SOURCE-0000000000',
        'KSTREAM-FILTER-0000000001',
        'KSTREAM-MAPVALUES-0000000002',
        'KSTREAM-SINK-0000000003',
      ],
    );
    assert.equal(b.edges.length, 3);
    assert.equal(b.subTopologies.length, 1);
    assert.deepEqual(b.subTopologies[0]?.sourceTopics, ['in']);
    assert.deepEqual(b.subTopologies[0]?.sinkTopics, ['out']);
    assert.deepEqual(b.repartitionTopics, []);
    assert.ok(Object.isFrozen(b) && Object.isFrozen(b.nodes) && Object.isFrozen(b.nodes[0]));
    assert.throws(() => (b.nodes as unknown[]).push({}));
  });

  it('groupByKey right after the source needs no repartition', () => {
    const t = topology({ applicationId: 'app' });
    t.stream('in').groupByKey().count({ name: 'counts' }).toStream().to('out');
    const b = t.build();
    assert.deepEqual(b.repartitionTopics, []);
    assert.equal(b.subTopologies.length, 1);
    assert.deepEqual(b.stores, [{ name: 'counts', node: 'KSTREAM-AGGREGATE-0000000001', kind: 'key-value' }]);
  });

  it('a stateful step after a key change repartitions: two sub-topologies, Kafka Streams topic names', () => {
    const t = topology({ applicationId: 'app' });
    t.stream<string, { c: string }>('in')
      .selectKey((_k, v) => v.c)
      .groupByKey()
      .count()
      .toStream()
      .to('out');
    const b = t.build();
    assert.deepEqual(b.repartitionTopics, ['app-KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition']);
    assert.equal(b.subTopologies.length, 2);
    const [first, second] = b.subTopologies;
    assert.deepEqual(first?.sinkTopics, ['app-KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition']);
    assert.deepEqual(second?.sourceTopics, ['app-KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition']);
    assert.deepEqual(second?.sinkTopics, ['out']);
    assert.deepEqual(kinds(b), ['source', 'selectKey', 'sink', 'source', 'aggregate', 'toStream', 'sink']);
  });

  it('groupBy always repartitions; a grouping name names the topic; map and flatMap change the key too', () => {
    const t = topology({ applicationId: 'shop' });
    const s = t.stream<string, { c: string; n: number }>('in');
    s.groupBy((_k, v) => v.c, { name: 'by-customer' })
      .reduce((a, b) => ({ c: a.c, n: a.n + b.n }), { name: 'r' })
      .toStream()
      .to('o1');
    s.map((k, v) => [v.c, k] as const)
      .groupByKey()
      .count({ name: 'c2' })
      .toStream()
      .to('o2');
    s.flatMap((k, v) => [[v.c, k] as const])
      .mapValues((v) => v)
      .groupByKey()
      .count({ name: 'c3' })
      .toStream()
      .to('o3');
    s.mapValues((v) => v.n)
      .groupByKey()
      .count({ name: 'c4' })
      .toStream()
      .to('o4');
    const b = t.build();
    assert.deepEqual(b.repartitionTopics, [
      'shop-by-customer-repartition',
      'shop-c2-repartition',
      'shop-c3-repartition',
    ]);
  });

  it('repartition() always splits at its topic, named as Kafka Streams names it; a later groupByKey needs no other', () => {
    const t = topology({ applicationId: 'app' });
    const s = serdes.string();
    const counted = t.stream<string, number>('in', { key: s }).repartition();
    counted.groupByKey().count({ name: 'counts' }).toStream().to('out');
    t.stream<string, number>('in2')
      .selectKey((_k, v) => String(v))
      .repartition({ name: 'by-value', numberOfPartitions: 2, key: s })
      .groupByKey()
      .count({ name: 'c2' })
      .toStream()
      .to('out2');
    const b = t.build();
    // KSTREAM-REPARTITION-1, then the sink 2, Kafka Streams' pass-through filter 3 (not kept), the source 4
    assert.deepEqual(b.repartitionTopics, [
      'app-KSTREAM-REPARTITION-0000000001-repartition',
      'app-by-value-repartition',
    ]);
    assert.deepEqual(
      b.nodes.slice(0, 3).map((n) => [n.kind, n.name]),
      [
        ['source', 'KSTREAM-SOURCE-0000000000'],
        ['sink', 'KSTREAM-SINK-0000000002'],
        ['source', 'KSTREAM-SOURCE-0000000004'],
      ],
    );
    const named = b.nodes.filter((n) => n.name.startsWith('by-value'));
    assert.deepEqual(
      named.map((n) => n.name),
      ['by-value-repartition-sink', 'by-value-repartition-source'],
    );
    const sink = named[0];
    assert.ok(sink?.kind === 'sink' && sink.internal && sink.keySerde === s);
    assert.deepEqual(sink.repartition, { partitions: 2 });
    const first = b.nodes[1];
    assert.ok(first?.kind === 'sink');
    assert.deepEqual(first.repartition, { partitions: null });
    // in -> repartition | counts ; in2 -> selectKey -> repartition | c2: four sub-topologies, no automatic repartition
    assert.equal(b.subTopologies.length, 4);
    assert.equal(b.nodes.filter((n) => n.kind === 'sink' && n.internal).length, 2);
    assert.deepEqual(
      b.subTopologies.map((x) => [x.sourceTopics, x.sinkTopics]),
      [
        [['in'], ['app-KSTREAM-REPARTITION-0000000001-repartition']],
        [['app-KSTREAM-REPARTITION-0000000001-repartition'], ['out']],
        [['in2'], ['app-by-value-repartition']],
        [['app-by-value-repartition'], ['out2']],
      ],
    );
  });

  it('windowed aggregations record their window, emit and late settings and store kinds', () => {
    const t = topology({ applicationId: 'app' });
    const g = t.stream('in').groupByKey();
    g.windowedBy(TimeWindows.ofSizeAndGrace(10, 2).advanceBy(5))
      .emit('final')
      .onLate('drop')
      .count({ name: 'h' })
      .toStream()
      .to('o1');
    g.windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(10, 0)).count({ name: 's' }).toStream().to('o2');
    g.windowedBy(SessionWindows.ofInactivityGapAndGrace(10, 0))
      .aggregate(
        () => 0,
        (_k, _v, a) => a + 1,
        (_k, a, b) => a + b,
        { name: 'se' },
      )
      .toStream()
      .to('o3');
    const b = t.build();
    const aggs = b.nodes.filter((n) => n.kind === 'aggregate');
    assert.deepEqual(
      aggs.map(
        (n) => n.kind === 'aggregate' && [n.store, n.window?.kind, n.emit, n.onLate, n.merger !== null],
      ),
      [
        ['h', 'hopping', 'final', 'drop', false],
        ['s', 'sliding', 'update', 'dead-letter', false],
        ['se', 'session', 'update', 'dead-letter', true],
      ],
    );
    assert.deepEqual(
      b.stores.map((s) => s.kind),
      ['window', 'window', 'session'],
    );
    const h = aggs[0];
    assert.ok(h?.kind === 'aggregate');
    assert.deepEqual(h.window, { kind: 'hopping', sizeMs: 10, advanceMs: 5, graceMs: 2 });
  });

  it('split names its branches <split>-<name> and merge joins streams', () => {
    const t = topology({ applicationId: 'app' });
    const branches = t
      .stream<string, number>('in')
      .split({ name: 'sp' })
      .branch((_k, v) => v > 10, 'big')
      .branch((_k, v) => v > 5)
      .defaultBranch();
    assert.deepEqual(Object.keys(branches), ['sp-big', 'sp-2', 'sp-0']);
    const big = branches['sp-big'];
    const small = branches['sp-0'];
    assert.ok(big && small);
    big.merge(small).to('out');
    const b = t.build();
    assert.ok(b.nodes.some((n) => n.kind === 'merge'));
    assert.equal(b.edges.filter((e) => e.to.startsWith('KSTREAM-MERGE')).length, 2);
  });

  it('refuses an operator argument that is not a function, and windows of another kind, at the call', () => {
    const t = topology({ applicationId: 'app' });
    const src = t.stream('in');
    const bad = (e: unknown) => RedfenceError.is(e, 'RF_INVALID_ARGUMENT');
    assert.throws(() => src.filter(undefined as never), bad);
    assert.throws(() => src.mapValues('x' as never), bad);
    assert.throws(() => src.split().branch(null as never), bad);
    assert.throws(() => src.groupByKey().reduce(undefined as never), bad);
    assert.throws(() => src.groupByKey().aggregate(() => 0, 1 as never), bad);
    assert.throws(() => src.groupByKey().windowedBy({ sizeMs: 10 } as never), bad);
  });

  it('refuses a bad applicationId and bad sources before anything is built', () => {
    assert.throws(
      () => topology({ applicationId: 'a b' }),
      (e: unknown) => RedfenceError.is(e, 'RF_INVALID_OPTIONS'),
    );
    const t = topology({ applicationId: 'app' });
    assert.throws(
      () => t.stream([]),
      (e: unknown) => RedfenceError.is(e, 'RF_INVALID_ARGUMENT'),
    );
    assert.throws(
      () => t.stream('in', { key: {} as never }),
      (e: unknown) => RedfenceError.is(e, 'RF_INVALID_ARGUMENT'),
    );
  });
});

describe('streams topology checks at build()', () => {
  const windowed = (w: TimeWindows | SlidingWindows | SessionWindows) => {
    const t = topology({ applicationId: 'app' });
    const g = t.stream('in').groupByKey();
    const table = w instanceof SessionWindows ? g.windowedBy(w).count() : g.windowedBy(w).count();
    table.toStream().to('out');
    return () => t.build();
  };
  const node = 'KSTREAM-AGGREGATE-0000000002';

  it('a time window with size <= 0, grace < 0 or advance > size', () => {
    invalid(windowed(TimeWindows.ofSizeAndGrace(0, 0)), node, /size must be an integer > 0/);
    invalid(windowed(TimeWindows.ofSizeAndGrace(-5, 0)), node, /size must be/);
    invalid(windowed(TimeWindows.ofSizeAndGrace(10, -1)), node, /grace must be an integer >= 0/);
    invalid(
      windowed(TimeWindows.ofSizeAndGrace(10, 0).advanceBy(11)),
      node,
      /advance \(11\) must not be larger than size/,
    );
    invalid(windowed(TimeWindows.ofSizeAndGrace(10, 0).advanceBy(0)), node, /advance must be an integer > 0/);
  });

  it('a sliding or session window with a bad difference, gap or grace', () => {
    invalid(windowed(SlidingWindows.ofTimeDifferenceAndGrace(-1, 0)), node, /time difference/);
    invalid(windowed(SlidingWindows.ofTimeDifferenceAndGrace(10, -1)), node, /grace/);
    invalid(windowed(SessionWindows.ofInactivityGapAndGrace(0, 0)), node, /inactivity gap/);
    invalid(windowed(SessionWindows.ofInactivityGapAndGrace(10, -3)), node, /grace/);
    assert.doesNotThrow(windowed(TimeWindows.ofSizeAndGrace(10, 0).advanceBy(10)));
  });

  it('a store name used twice', () => {
    const t = topology({ applicationId: 'app' });
    const g = t.stream('in').groupByKey();
    g.count({ name: 'counts' }).toStream().to('o1');
    g.count({ name: 'counts' }).toStream().to('o2');
    invalid(
      () => t.build(),
      'KSTREAM-AGGREGATE-0000000004',
      /store name counts is already used by node KSTREAM-AGGREGATE-0000000001/,
    );
  });

  it('a node name used twice', () => {
    const t = topology({ applicationId: 'app' });
    t.stream('in')
      .filter(() => true, { name: 'keep' })
      .mapValues((v) => v, { name: 'keep' })
      .to('out');
    invalid(() => t.build(), 'keep', /node name keep is used twice/);
  });

  it('a repartition() numberOfPartitions that is not a positive integer; a repartition() name used twice', () => {
    for (const n of [0, -1, 1.5, Number.NaN, '2' as unknown as number]) {
      const t = topology({ applicationId: 'app' });
      t.stream('in').repartition({ name: 'r', numberOfPartitions: n }).to('out');
      invalid(() => t.build(), 'r-repartition-sink', /numberOfPartitions must be a positive integer/);
    }
    const twice = topology({ applicationId: 'app' });
    const src = twice.stream('in');
    src.repartition({ name: 'r' }).to('o1');
    src.repartition({ name: 'r' }).to('o2');
    invalid(
      () => twice.build(),
      'r-repartition-sink',
      /topic app-r-repartition is already written by node r-repartition-sink/,
    );
    const grouped = topology({ applicationId: 'app' });
    const g = grouped.stream('in');
    g.repartition({ name: 'r' }).to('o1');
    g.selectKey((k) => k)
      .groupByKey({ name: 'r' })
      .count()
      .toStream()
      .to('o2');
    invalid(
      () => grouped.build(),
      'KSTREAM-SINK-0000000007',
      /app-r-repartition is already written by node r-repartition-sink/,
    );
    assert.throws(
      () =>
        topology({ applicationId: 'app' })
          .stream('in')
          .repartition({ key: {} as never }),
      (err: unknown) => RedfenceError.is(err, 'RF_INVALID_ARGUMENT'),
    );
  });

  it('a topology without a sink, or without a source', () => {
    const t = topology({ applicationId: 'app' });
    t.stream('in').filter(() => true);
    invalid(() => t.build(), null, /no sink/);
    invalid(() => topology({ applicationId: 'app' }).build(), null, /no source/);
  });

  it('a sink topic equal to a source topic (by name or by pattern)', () => {
    const t = topology({ applicationId: 'app' });
    t.stream(['a', 'in']).to('in', { name: 'back' });
    invalid(() => t.build(), 'back', /writes to in, which source KSTREAM-SOURCE-0000000000 reads/);
    const p = topology({ applicationId: 'app' });
    p.stream(/^orders-.*/).to('orders-eu', { name: 'loop' });
    invalid(() => p.build(), 'loop', /writes to orders-eu/);
  });
});
