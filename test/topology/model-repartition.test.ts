/**
 * repartition() in the reference model: records go to murmur2(key bytes) % the topic's partition count
 * (numberOfPartitions, else the largest of the writing sub-topology's inputs); a windowed count with no
 * grace after it shows which records share a task (one stream time per repartition partition); a null
 * key passes through, as Kafka Streams 4.x writes it, while a grouping's repartition drops it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { murmur2, toPositive } from '../../src/partitioner/index.js';
import { type Repartitioned, serdes, TimeWindows, topology } from '../../src/topology/index.js';
import { type ModelOptions, runModel } from '../../src/topology/model.js';
import { input, outputs } from './model-helpers.js';

const s = serdes.string();
const partitionOf = (key: string, n: number) => toPositive(murmur2(Buffer.from(key))) % n;
/** Two keys murmur2 puts in different partitions of 2. */
const A = 'a';
const B = ['b', 'c', 'd', 'e', 'f'].find((k) => partitionOf(k, 2) !== partitionOf(A, 2)) as string;

/** repartition(r), then a tumbling count of 10 ms without grace: a record behind its task's stream time is late. */
function counted(r: Repartitioned<string, number> | undefined, options: ModelOptions = {}) {
  const t = topology({ applicationId: 'app' });
  t.stream<string, number>('in', { key: s })
    .repartition(r)
    .groupByKey()
    .windowedBy(TimeWindows.ofSizeWithNoGrace(10))
    .count({ name: 'n' })
    .toStream()
    .map((w, n) => [w.key, n] as const)
    .to('out', { key: s });
  // A at 100, then B at 5: late only when both share a repartition partition (its stream time 100)
  return runModel(
    t.build(),
    input([
      { key: A, value: 1, ts: 100 },
      { key: B, value: 2, ts: 5 },
    ]),
    options,
  );
}

describe('streams model: repartition()', () => {
  it('numberOfPartitions places records by murmur2 of the key among that many partitions', () => {
    assert.notEqual(partitionOf(A, 2), partitionOf(B, 2));
    const two = counted({ numberOfPartitions: 2 });
    assert.deepEqual(outputs(two), [
      { key: A, value: 1, ts: 100 },
      { key: B, value: 1, ts: 5 },
    ]);
    assert.equal(two.deadLetters.length, 0);
    const one = counted({ numberOfPartitions: 1 });
    assert.deepEqual(outputs(one), [{ key: A, value: 1, ts: 100 }]);
    assert.deepEqual(
      one.deadLetters.map((d) => [d.node, d.source.topic, d.source.partition]),
      [['KSTREAM-AGGREGATE-0000000005', 'app-KSTREAM-REPARTITION-0000000001-repartition', 0]],
    );
    // numberOfPartitions wins over the input's count
    assert.equal(counted({ numberOfPartitions: 1 }, { partitions: { in: 2 } }).deadLetters.length, 1);
  });

  it("without numberOfPartitions the topic has the input's partition count", () => {
    assert.equal(counted(undefined).deadLetters.length, 1, 'one input partition: one repartition partition');
    assert.equal(counted(undefined, { partitions: { in: 2 } }).deadLetters.length, 0);
    assert.equal(counted({ name: 'x' }, { partitions: { in: 2 } }).deadLetters.length, 0);
  });

  it('a null key passes repartition() (the aggregation after it drops it); a grouping drops it at its sink', () => {
    const t = topology({ applicationId: 'app' });
    const src = t.stream<string, number>('in', { key: s });
    const r = src.repartition({ name: 'r', numberOfPartitions: 3 });
    r.mapValues((v) => v + 1).to('passed', { key: s });
    r.groupByKey().count({ name: 'n' }).toStream().to('out', { key: s });
    src
      .groupBy((k) => k, { name: 'g', key: s })
      .count({ name: 'g-n' })
      .toStream()
      .to('grouped', { key: s });
    const result = runModel(
      t.build(),
      input([
        { key: null, value: 1, ts: 1 },
        { key: 'k', value: 2, ts: 2 },
      ]),
    );
    assert.deepEqual(outputs(result, 'passed'), [
      { key: null, value: 2, ts: 1 },
      { key: 'k', value: 3, ts: 2 },
    ]);
    assert.deepEqual(outputs(result, 'out'), [{ key: 'k', value: 1, ts: 2 }]);
    assert.deepEqual(outputs(result, 'grouped'), [{ key: 'k', value: 1, ts: 2 }]);
    assert.deepEqual(
      result.dropped.map((d) => [d.reason, d.node, d.source.topic]),
      [
        ['null-key', 'KSTREAM-AGGREGATE-0000000006', 'app-r-repartition'],
        ['null-key', 'KSTREAM-SINK-0000000010', 'in'],
      ],
    );
  });
});
