/**
 * A topology's several input topics and pattern sources under `redfence chaos`, without services: the
 * run's names for them (listed inputs numbered, a pattern made to match `<input>-m-<name>` only), the
 * records' topics checked before any connection, the default input spread over the listed inputs with
 * a clock per topic, the dead-letter topic the runtime will write, and the verdict of a key whose
 * outputs come from two input topics' tasks (an interleaving: each task's outputs in order, each once).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ReadMessage } from '../../src/chaos/kafka.js';
import { Rng } from '../../src/chaos/rng.js';
import { checkTopicShape, inputCounts } from '../../src/chaos/topic-shape.js';
import {
  chaosTopics,
  onChaosTopics,
  runInputTopics,
  TOPIC_LAG_MS,
  topologyInput,
} from '../../src/chaos/topology-module.js';
import { repartitionCounts } from '../../src/chaos/topology-stages.js';
import { chaosDeadLetter, runInputTopic } from '../../src/chaos/topology-topics.js';
import { judgeTopologyRun } from '../../src/chaos/topology-verdict.js';
import { RecordList } from '../../src/chaos/workload.js';
import { RedfenceError } from '../../src/errors/index.js';
import { serdes, topology } from '../../src/topology/index.js';
import { type ModelInput, runModel } from '../../src/topology/model.js';
import patternRegions, { chaosInput } from './fixtures/pattern-regions.js';
import twoInputs from './fixtures/two-inputs.js';
import { windowedCount } from './fixtures/windowed-count.js';

const RUN = { input: 'in', output: 'out', store: 'chaos_app' };
const onRun = (built: typeof twoInputs) =>
  onChaosTopics(built, chaosTopics(built, RUN.input, RUN.output), RUN.store);
const sourcesOf = (built: typeof twoInputs) =>
  built.nodes.flatMap((n) => (n.kind === 'source' && !n.internal ? [n] : []));
const refused = (f: () => unknown, pattern: RegExp) =>
  assert.throws(
    f,
    (e: unknown) => RedfenceError.is(e) && e.code === 'RF_MODULE_INVALID' && pattern.test(e.message),
  );

describe('several input topics and patterns under redfence chaos', () => {
  it("names: listed inputs numbered in their sources' order, a pattern matching the run's names only", () => {
    const two = onRun(twoInputs);
    assert.deepEqual(
      sourcesOf(two).map((s) => s.topics),
      [['in'], ['in-1']],
    );
    assert.equal(two.repartitionTopics[0], 'chaos_app-by-band-repartition');
    assert.equal(chaosDeadLetter(two), 'in.DLT');
    const regions = onRun(patternRegions);
    const [source] = sourcesOf(regions);
    const pattern = source?.pattern as RegExp;
    assert.equal(source?.topics, null, 'resolved by the instances at start, as any pattern');
    assert.ok(pattern.test('in-m-region-eu'));
    for (const other of ['region-eu', 'in-m-region-', 'in-m-orders', 'in-1', 'x-in-m-region-eu'])
      assert.ok(!pattern.test(other), other);
    assert.deepEqual(
      regions.subTopologies.flatMap((s) => s.sourcePatterns),
      [pattern],
    );
    // a pattern reading first: the runtime's dead letters go to <applicationId>.DLT
    assert.equal(chaosDeadLetter(regions), 'chaos_app.DLT');
  });

  it("the records' topics: listed inputs first, then each name a pattern matches; what cannot run is refused", () => {
    const records = topologyInput({ path: 'two', built: twoInputs }, 3, 400);
    assert.deepEqual(
      runInputTopics(
        'two',
        twoInputs,
        records.map((r) => r.topic),
        RUN,
      ),
      ['in', 'in-1'],
    );
    const regional = chaosInput(new Rng(7, 'module-input'), 60);
    assert.deepEqual(
      runInputTopics(
        'p',
        patternRegions,
        regional.map((r) => r.topic),
        RUN,
      ).sort(),
      ['in-m-region-ap', 'in-m-region-eu', 'in-m-region-us'],
    );
    refused(
      () => runInputTopics('two', twoInputs, ['refunds']),
      /names topic refunds, which no source reads/,
    );
    refused(() => runInputTopics('p', patternRegions, [undefined]), /each record names its topic/);
    refused(
      () => runInputTopics('p', patternRegions, ['region-eu', 'orders']),
      /orders, which no source reads/,
    );
    const both = topology({ applicationId: 'both' });
    both.stream('orders').merge(both.stream(/eu-.*/)).to('out');
    refused(
      () => runInputTopics('b', both.build(), [undefined]),
      /no record names a topic its pattern \/eu-\.\*\/ matches/,
    );
    // a pattern's topics into an aggregation: the runtime's refusal, once resolved to the records' topics
    const agg = topology({ applicationId: 'agg' });
    agg.stream(/eu-.*/).groupByKey().count({ name: 'n' }).toStream().to('counts');
    assert.deepEqual(runInputTopics('a', agg.build(), ['eu-1'], RUN), ['in-m-eu-1']);
    refused(() => runInputTopics('a', agg.build(), ['eu-1', 'eu-2']), /does not run on Redis yet/);
  });

  it('the default input: spread over the listed inputs, each with its own clock; one topic keeps its input', () => {
    const records = topologyInput({ path: 'two', built: twoInputs }, 5, 2000);
    const of = (topic: string) => records.filter((r) => r.topic === topic);
    assert.ok(of('orders').length > 800 && of('returns').length > 800, 'both topics get records');
    assert.equal(of('orders').length + of('returns').length, 2000);
    // a record's time is its place (100 ms apart) less its disorder, and less TOPIC_LAG_MS on the second topic
    assert.ok(
      records.every(
        (r, i) => r.topic !== 'returns' || r.timestamp === 0 || i * 100 - (r.timestamp ?? 0) >= TOPIC_LAG_MS,
      ),
      'every return is at least TOPIC_LAG_MS behind its place',
    );
    const one = topologyInput({ path: 'one', built: windowedCount(false) }, 5, 50);
    assert.ok(one.every((r) => r.topic === undefined));
  });

  it("a merge's outputs: each task's in order and each once, in any interleaving; out of a task's order is a difference", () => {
    const t = topology({ applicationId: 'merge' });
    t.stream<string, { n: number }>('a', { key: serdes.string() })
      .merge(t.stream<string, { n: number }>('b', { key: serdes.string() }))
      .to('merged', { key: serdes.string() });
    const built = onRun(t.build());
    const rec = (topic: string, offset: number): ModelInput => ({
      topic,
      partition: 0,
      offset,
      key: Buffer.from('k'),
      value: Buffer.from(JSON.stringify({ n: offset, topic })),
      timestamp: 1000 + offset,
    });
    const input = [0, 1, 2].map((o) => rec('in', o)).concat([0, 1, 2].map((o) => rec('in-1', o)));
    const msg = (
      o: { key: Buffer | null; value: Buffer | null; timestamp: number },
      i: number,
    ): ReadMessage => ({
      partition: 0,
      offset: i,
      timestamp: o.timestamp,
      key: o.key,
      value: o.value,
      headers: new Map(),
    });
    const a = runModel(built, input.slice(0, 3)).outputs;
    const b = runModel(built, input.slice(3)).outputs;
    const judge = (order: typeof a, mode: 'exactly-once' | 'at-least-once' = 'exactly-once') =>
      judgeTopologyRun({
        mode,
        built,
        produced: 6,
        input,
        outputs: new Map([['out', order.map(msg)]]),
        deadLetters: [],
        offsets: new Map([
          ['in', { committed: new Map([[0, 3]]), ends: new Map([[0, 3]]) }],
          ['in-1', { committed: new Map([[0, 3]]), ends: new Map([[0, 3]]) }],
        ]),
      });
    const [a0, a1, a2] = a as [(typeof a)[0], (typeof a)[0], (typeof a)[0]];
    const [b0, b1, b2] = b as [(typeof a)[0], (typeof a)[0], (typeof a)[0]];
    const ok = judge([b0, a0, a1, b1, b2, a2]);
    assert.equal(ok.differences.length, 0, JSON.stringify(ok.differences));
    assert.deepEqual([ok.inputRecords, ...ok.inputTopics.values()], [6, 3, 3]);
    assert.equal(ok.keysUnordered, 1);
    const swapped = judge([a0, b0, a2, a1, b1, b2]);
    assert.equal(swapped.counts.get('output'), 1);
    assert.match(
      swapped.differences[0]?.message ?? '',
      /\(outputs from 2 tasks\): output #2 .* is out of its task's order/,
    );
    const repeated = judge([a0, b0, a1, a1, b1, b2, a2]);
    assert.match(repeated.differences[0]?.message ?? '', /1 not the model's or repeated/);
    // at-least-once: a repeat is a replay's (allowed); a missing output is not
    assert.equal(judge([a0, b0, a1, a1, b1, b2, a2], 'at-least-once').differences.length, 0);
    assert.match(
      judge([a0, b0, a1, b1, b2], 'at-least-once').differences[0]?.message ?? '',
      /1 model outputs missing/,
    );
  });

  it('input topics of their own counts: a repartition topic gets the largest its writer reads; a null key placed on its own topic', () => {
    const two = onRun(twoInputs);
    const rep = 'chaos_app-by-band-repartition';
    const counts = inputCounts(
      ['in', 'in-1'],
      { partitions: 3, inputPartitions: { orders: 4, returns: 2 } },
      (t) => (t === 'orders' ? 'in' : 'in-1'),
    );
    assert.deepEqual(
      [...counts],
      [
        ['in', 4],
        ['in-1', 2],
      ],
    );
    assert.deepEqual([...repartitionCounts(two, 3, counts)], [[rep, 4]]);
    assert.deepEqual(
      [
        ...repartitionCounts(
          two,
          3,
          new Map([
            ['in', 1],
            ['in-1', 2],
          ]),
        ),
      ],
      [[rep, 2]],
    );
    // a pattern's writer: the largest count among the input topics it matches (a late one's too)
    const regions = onRun(patternRegions);
    const topics = chaosTopics(patternRegions, RUN.input, RUN.output);
    const eu = runInputTopic(topics, 'region-eu');
    const sa = runInputTopic(topics, 'region-sa');
    assert.deepEqual(
      [
        ...repartitionCounts(
          regions,
          3,
          new Map([
            [eu, 3],
            [sa, 5],
            ['in-9', 7],
          ]),
        ),
      ],
      [['chaos_app-by-region-repartition', 5]],
    );
    // the feeder's null keys: partition i mod the count of the record's own topic
    const list = new RecordList(
      [0, 1, 2, 3, 4].map((i) => ({ key: null, value: Buffer.from(`${i}`), topic: i % 2 === 0 ? 'a' : 'b' })),
      (t) => (t === 'a' ? 2 : 5),
      0,
    );
    const placed = [0, 1, 2, 3, 4].map(() => list.next()).map((r) => `${r.topic}/${r.partition}`);
    assert.deepEqual(placed, ['a/0', 'b/1', 'a/0', 'b/3', 'a/0']);
  });

  it('--input-partitions and --late-topic: what cannot run is refused with the option named', () => {
    const regional = chaosInput(new Rng(7, 'module-input'), 60).map((r) => r.topic);
    const bad = (
      shape: Parameters<typeof checkTopicShape>[3],
      topics: Array<string | undefined>,
      message: RegExp,
    ) =>
      assert.throws(
        () => checkTopicShape('m', patternRegions, topics, shape),
        (e: unknown) => RedfenceError.is(e) && e.code === 'RF_INVALID_OPTIONS' && message.test(e.message),
      );
    checkTopicShape('m', patternRegions, regional, {
      inputPartitions: { 'region-eu': 1 },
      lateTopic: 'region-us',
    });
    bad(
      { inputPartitions: { 'region-eu': 0 } },
      regional,
      /^--input-partitions region-eu=0: a count from 1 to 1000/,
    );
    bad({ inputPartitions: { 'region-eu': 2.5 } }, regional, /--input-partitions region-eu=2.5/);
    bad(
      { inputPartitions: { 'region-sa': 2 } },
      regional,
      /--input-partitions region-sa: m reads no such topic/,
    );
    // Kafka Streams asks co-partitioned inputs of a stateful step reading several topics; redfence
    // refuses such a step (so --input-partitions never meets it): the refusal as a chaos run reports it
    const co = topology({ applicationId: 'co' });
    co.stream(['orders', 'returns']).groupByKey().count({ name: 'n' }).toStream().to('counts');
    refused(
      () => runInputTopics('co', co.build(), [undefined], RUN),
      /on the records' topics: .*several topics \(in, in-1\).* does not run on Redis yet.*repartition\(\)/,
    );
    bad({ lateTopic: 'region-eu', idleCloseMs: 500 }, regional, /--late-topic with --idle-close/);
    // the only topic its pattern would read at start: the instances could not start
    bad(
      { lateTopic: 'region-eu' },
      ['region-eu'],
      /the only topic the records name for the pattern \/region-\[a-z\]\+\//,
    );
    assert.throws(
      () => checkTopicShape('two', twoInputs, ['orders', 'returns'], { lateTopic: 'orders' }),
      /--late-topic orders: a listed input topic must exist/,
    );
  });
});
