/**
 * What the topology runtime does not run yet is refused when the executor is made, with
 * RF_TOPOLOGY_UNSUPPORTED naming the node; a bad batch is RF_INVALID_ARGUMENT before anything is sent.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RedfenceError } from '../../src/errors/index.js';
import {
  type BuiltTopology,
  SessionWindows,
  SlidingWindows,
  serdes,
  topology,
} from '../../src/topology/index.js';
import { TopologyExecutor } from '../../src/topology/run/executor.js';
import { planTopology } from '../../src/topology/run/plan.js';

const s = serdes.string();
/** A Redis that fails the test if anything reaches it. */
const redis = {
  evalshaBuffer: async () => assert.fail('nothing may be sent'),
  evalBuffer: async () => assert.fail('nothing may be sent'),
};

function refusedAt(built: BuiltTopology, node: string | null, pattern: RegExp): void {
  assert.throws(
    () => new TopologyExecutor(built, { redis }),
    (err: unknown) =>
      RedfenceError.is(err, 'RF_TOPOLOGY_UNSUPPORTED') &&
      (err.details as { node: string | null }).node === node &&
      pattern.test(err.message),
  );
}

function grouped() {
  const t = topology({ applicationId: 'refused' });
  return { t, g: t.stream<string, number>('in', { key: s }).groupByKey() };
}

describe('topology runtime: refusals', () => {
  it('aggregations in two sub-topologies plan: the second in its own fence space, its repartition topic', () => {
    const t = topology({ applicationId: 'two' });
    const first = t.stream<string, number>('in', { key: s }).groupByKey().count({ name: 'first' });
    first
      .toStream()
      .groupBy((w, n) => `${w}:${n}`, { name: 'by-n', key: s })
      .count({ name: 'second' })
      .toStream()
      .to('out');
    const plan = planTopology(t.build());
    assert.deepEqual(
      [...plan.subs.values()].map((x) => [x.topic, x.stateful, x.space]),
      [
        ['in', true, null],
        ['two-by-n-repartition', true, 'two-by-n-repartition'],
      ],
    );
    assert.deepEqual(
      [...plan.aggregates.values()].map((a) => [a.node.store, a.topic, a.space]),
      [
        ['first', 'in', null],
        ['second', 'two-by-n-repartition', 'two-by-n-repartition'],
      ],
    );
    // one named grouped stream aggregated twice after a key change: as Kafka Streams, one repartition
    // topic written once, both aggregations in the sub-topology reading it
    const twice = topology({ applicationId: 'twice' });
    const g = twice.stream<string, number>('in', { key: s }).groupBy((k) => k, { name: 'by-k', key: s });
    g.count({ name: 'c1' }).toStream().to('out');
    g.count({ name: 'c2' }).toStream().to('out2');
    const built = twice.build();
    assert.deepEqual(built.repartitionTopics, ['twice-by-k-repartition']);
    assert.equal(built.nodes.filter((n) => n.kind === 'sink' && n.internal).length, 1, 'one writer');
    assert.deepEqual(
      [...planTopology(built).aggregates.values()].map((a) => [a.node.store, a.topic, a.space]),
      [
        ['c1', 'twice-by-k-repartition', null],
        ['c2', 'twice-by-k-repartition', null],
      ],
    );
    // unnamed, a topic per aggregation, named after its store (the second its own fence space)
    const unnamed = topology({ applicationId: 'unnamed' });
    const u = unnamed.stream<string, number>('in', { key: s }).groupBy((k) => k, { key: s });
    u.count({ name: 'c1' }).toStream().to('out');
    u.count({ name: 'c2' }).toStream().to('out2');
    assert.deepEqual(
      [...planTopology(unnamed.build()).aggregates.values()].map((a) => [a.node.store, a.topic, a.space]),
      [
        ['c1', 'unnamed-c1-repartition', null],
        ['c2', 'unnamed-c2-repartition', 'unnamed-c2-repartition'],
      ],
    );
    // one aggregation after a groupBy keeps the application's own fence space (as every version wrote it)
    const one = topology({ applicationId: 'one' });
    one
      .stream<string, number>('in', { key: s })
      .groupBy((k) => k, { name: 'by-k', key: s })
      .count({ name: 'c' })
      .toStream()
      .to('out');
    assert.deepEqual(
      [...planTopology(one.build()).subs.values()].map((x) => [x.topic, x.space]),
      [
        ['in', null],
        ['one-by-k-repartition', null],
      ],
    );
  });

  it('windowed aggregations with emit final or a JS function plan (session and sliding windows)', () => {
    for (const make of [
      (g: ReturnType<typeof grouped>['g']) =>
        g.windowedBy(SessionWindows.ofInactivityGapWithNoGrace(10)).emit('final').count({ name: 'r' }),
      (g: ReturnType<typeof grouped>['g']) =>
        g.windowedBy(SessionWindows.ofInactivityGapWithNoGrace(10)).reduce((a, b) => a + b, { name: 'r' }),
      (g: ReturnType<typeof grouped>['g']) =>
        g.windowedBy(SessionWindows.ofInactivityGapWithNoGrace(10)).aggregate(
          () => 0,
          (_k, v, a: number) => a + v,
          (_k, a, b) => a + b,
          { name: 'r' },
        ),
      (g: ReturnType<typeof grouped>['g']) =>
        g.windowedBy(SlidingWindows.ofTimeDifferenceWithNoGrace(10)).emit('final').count({ name: 'r' }),
      (g: ReturnType<typeof grouped>['g']) =>
        g
          .windowedBy(SlidingWindows.ofTimeDifferenceWithNoGrace(10))
          .emit('final')
          .reduce((a, b) => a + b, { name: 'r' }),
    ]) {
      const { t, g } = grouped();
      make(g).toStream().to('out');
      assert.equal(planTopology(t.build()).aggregates.size, 1);
    }
  });

  it('a count of a count, a count of several topics, a pattern; several topics without state plan', () => {
    const a = topology({ applicationId: 'refused' });
    const counts = a.stream<string, number>('in', { key: s }).groupByKey().count({ name: 'first' });
    counts.toStream().groupByKey().count({ name: 'second' }).toStream().to('out');
    const second = a.build().nodes.filter((n) => n.kind === 'aggregate')[1]?.name ?? 'none';
    refusedAt(a.build(), second, /aggregation of .*same sub-topology.*repartition\(\)/);
    // the fix the message names: repartition() between them, two sub-topologies that plan
    const fixed = topology({ applicationId: 'fixed' });
    fixed
      .stream<string, number>('in', { key: s })
      .groupByKey()
      .count({ name: 'first' })
      .toStream()
      .repartition({ name: 'counts', key: s })
      .groupByKey()
      .count({ name: 'second' })
      .toStream()
      .to('out');
    assert.deepEqual(
      [...planTopology(fixed.build()).aggregates.values()].map((x) => [x.node.store, x.space]),
      [
        ['first', null],
        ['second', 'fixed-counts-repartition'],
      ],
    );

    const b = topology({ applicationId: 'refused' });
    b.stream<string, number>(['x', 'y'], { key: s }).groupByKey().count({ name: 'xy' }).toStream().to('out');
    const agg = b.build().nodes.find((n) => n.kind === 'aggregate')?.name ?? 'none';
    refusedAt(b.build(), agg, /several topics \(x, y\).*repartition\(\)/);

    // stateless, or given one topic by repartition(): planned, inputs in source order
    const ok = topology({ applicationId: 'ok' });
    const x = ok.stream<string, number>('x', { key: s });
    x.merge(ok.stream<string, number>(['y', 'z'], { key: s })).to('out');
    assert.deepEqual(planTopology(ok.build()).inputs, ['x', 'y', 'z']);
    const rp = topology({ applicationId: 'ok' });
    rp.stream<string, number>(['x', 'y'], { key: s })
      .repartition({ name: 'merged' })
      .groupByKey()
      .count({ name: 'xy' })
      .toStream()
      .to('out');
    const plan = planTopology(rp.build());
    assert.deepEqual(plan.inputs, ['x', 'y']);
    assert.deepEqual([...plan.subs.keys()], ['x', 'y', 'ok-merged-repartition']);
    assert.equal(plan.subs.get('y')?.id, plan.subs.get('x')?.id, 'one sub-topology, a view per topic');

    const c = topology({ applicationId: 'refused' });
    c.stream(/^in-.*/).to('out');
    refusedAt(c.build(), c.build().nodes[0]?.name ?? 'none', /its pattern \/\^in-\.\*\/ is not resolved/);
  });

  it('a bad batch is refused before anything is sent', async () => {
    const t = topology({ applicationId: 'ok' });
    t.stream<string, number>('in', { key: s }).groupByKey().count().toStream().to('out');
    const exec = new TopologyExecutor(t.build(), { redis });
    const rec = {
      topic: 'in',
      partition: 0,
      offset: 5,
      key: Buffer.from('k'),
      value: Buffer.from('1'),
      timestamp: 1,
    };
    const batch = { topic: 'in', partition: 0, epoch: 1, committedOffset: 5, records: [rec] };
    for (const bad of [
      { ...batch, topic: 'other' },
      { ...batch, partition: -1 },
      { ...batch, records: [rec, rec] }, // offsets must increase
      { ...batch, records: [{ ...rec, partition: 1 }] },
      { ...batch, records: [{ ...rec, timestamp: -1 }] },
    ])
      await assert.rejects(exec.runBatch(bad), (err: unknown) =>
        RedfenceError.is(err, 'RF_INVALID_ARGUMENT'),
      );
    assert.throws(() => new TopologyExecutor(t.build(), { redis, retention: 1 } as never), /unknown option/);
  });
});
