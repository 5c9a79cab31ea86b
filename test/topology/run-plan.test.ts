/**
 * Store ids in the key call come from the store's name alone (src/topology/run/plan.ts storeIdOf):
 * adding or reordering other aggregations never moves a store's state; two names with one id are
 * refused with RF_TOPOLOGY_INVALID naming both, before anything connects.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RedfenceError } from '../../src/errors/index.js';
import { serdes, TimeWindows, topology } from '../../src/topology/index.js';
import { planTopology, storeIdOf } from '../../src/topology/run/plan.js';

const s = serdes.string();

function counts(names: readonly string[]) {
  const t = topology({ applicationId: 'ids' });
  const g = t.stream<string, number>('in', { key: s }).groupByKey();
  for (const name of names)
    g.windowedBy(TimeWindows.ofSizeWithNoGrace(1000)).count({ name }).toStream().to(`out-${name}`);
  return t.build();
}

describe('topology runtime: store ids', () => {
  it('follow the store name, not the order of the aggregations', () => {
    const before = planTopology(counts(['orders-per-minute']));
    const after = planTopology(counts(['big-orders', 'orders-per-minute', 'refunds']));
    const ids = (p: ReturnType<typeof planTopology>) =>
      new Map([...p.aggregates.values()].map((a) => [a.node.store, [a.valueStore, a.timeStore]]));
    assert.deepEqual(ids(after).get('orders-per-minute'), ids(before).get('orders-per-minute'));
    for (const [value = -1, time] of ids(after).values())
      assert.ok(value % 2 === 1 && value >= 1 && time === value + 1 && time <= 65_535);
  });

  it('two store names with one id are refused, naming both', () => {
    const seen = new Map<number, string>();
    let pair: [string, string] | undefined;
    for (let i = 0; pair === undefined; i++) {
      const name = `store-${i}`;
      const other = seen.get(storeIdOf(name));
      if (other !== undefined) pair = [other, name];
      else seen.set(storeIdOf(name), name);
    }
    assert.throws(
      () => planTopology(counts(pair)),
      (err: unknown) =>
        RedfenceError.is(err, 'RF_TOPOLOGY_INVALID') &&
        err.message.includes(`"${pair[0]}"`) &&
        err.message.includes(`"${pair[1]}"`),
    );
  });

  it('a repartitioned topology: the input sub-topology first, then the one reading its repartition topic', () => {
    const t = topology({ applicationId: 'ids' });
    t.stream<string, { c: string }>('in', { key: s })
      .groupBy((_k, v) => v.c, { name: 'by-c', key: s })
      .count({ name: 'n' })
      .toStream()
      .to('out');
    const plan = planTopology(t.build());
    assert.equal(plan.topic, 'in');
    assert.deepEqual(
      [...plan.subs.values()].map((p) => [p.topic, p.internal, p.writes]),
      [
        ['in', false, ['ids-by-c-repartition']],
        ['ids-by-c-repartition', true, []],
      ],
    );
  });
});
