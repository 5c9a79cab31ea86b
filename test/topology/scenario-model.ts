/**
 * A scenario of test/topology/scenarios.ts (the comparison contract with the Kafka Streams runner) as a
 * topology of the streams DSL, and run by the reference model in the contract's wire format: the
 * redfence side of test/topology/kstreams.test.ts's comparison, also used by the model's own tests.
 */
import {
  type BuiltTopology,
  type KGroupedStream,
  type KTable,
  SessionWindows,
  SlidingWindows,
  serdes,
  TimeWindows,
  topology,
  type Windowed,
} from '../../src/topology/index.js';
import { runModel } from '../../src/topology/model.js';
import { input, outputs } from './model-helpers.js';
import {
  type InRecord,
  inputIndex,
  inputPattern,
  inputTopics,
  type OutRecord,
  regroupKey,
  type Scenario,
  type WindowSpec,
} from './scenarios.js';

const s = serdes.string();
type Order = { amount: number };
type Out = { start: number; end: number; value: number | null };

/** The windowed table of a scenario. */
function windowedTable(
  g: KGroupedStream<string, Order>,
  sc: Scenario,
  w: WindowSpec,
): KTable<Windowed<string>, number> {
  const sum = (_k: string, o: Order, total: number) => total + o.amount;
  if (w.kind === 'session') {
    const sw = g
      .windowedBy(SessionWindows.ofInactivityGapAndGrace(w.inactivityGapMs, w.graceMs))
      .emit(sc.emit);
    return sc.aggregate === 'count'
      ? sw.count()
      : sw.aggregate(
          () => 0,
          sum,
          (_k, x, y) => x + y,
        );
  }
  const windows =
    w.kind === 'sliding'
      ? SlidingWindows.ofTimeDifferenceAndGrace(w.timeDifferenceMs, w.graceMs)
      : TimeWindows.ofSizeAndGrace(w.sizeMs, w.graceMs).advanceBy(
          w.kind === 'hopping' ? w.advanceMs : w.sizeMs,
        );
  const tw = g.windowedBy(windows).emit(sc.emit);
  return sc.aggregate === 'count' ? tw.count() : tw.aggregate(() => 0, sum);
}

/** Where a scenario's topology reads and writes, and its application id (its Redis keys' names). */
export interface ScenarioTopics {
  /** default the scenario's name */
  applicationId?: string;
  /** the first input topic (default 'in'; the others follow it: inputTopics) */
  input?: string;
  /** default 'out' */
  output?: string;
}

/**
 * A scenario as a topology: the shape the comparison's glue is expected to take. Several input topics
 * are one source of the list of them (or of inputPattern, for a `pattern` scenario).
 */
export function scenarioTopology(sc: Scenario, at: ScenarioTopics = {}): BuiltTopology {
  const t = topology({ applicationId: at.applicationId ?? sc.name });
  const output = at.output ?? 'out';
  const first = at.input ?? 'in';
  let orders = t.stream<string, Order>(sc.pattern === true ? inputPattern(first) : inputTopics(sc, first), {
    key: s,
  });
  const min = sc.minAmount;
  if (min !== undefined) orders = orders.filter((_k, o) => o.amount > min);
  if (sc.repartition !== undefined)
    orders = orders.repartition({ numberOfPartitions: sc.repartition, key: s });
  const g = orders.groupByKey();
  const every = sc.throwEvery;
  const keep = (v: number | null) => {
    if (every !== undefined && v !== null && v % every === 0) throw new Error('a multiple of throwEvery');
    return sc.minCount === undefined || (v !== null && v > sc.minCount);
  };
  const updates =
    sc.window === null
      ? (sc.aggregate === 'count'
          ? g.count()
          : g.aggregate(
              () => 0,
              (_k, o, total: number) => total + o.amount,
            )
        )
          .toStream()
          .filter((_k, v) => keep(v))
          .mapValues((v): Out => ({ start: -1, end: -1, value: v }))
      : windowedTable(g, sc, sc.window)
          .toStream()
          .filter((_wk, v) => keep(v))
          .map((wk, v) => [wk.key, { start: wk.start, end: wk.end, value: v } satisfies Out] as const);
  if (sc.regroup === undefined) {
    updates.to(output, { key: s });
    return t.build();
  }
  // the second aggregation: a sum of the updates' values per k<partition>, across a repartition topic
  const regrouped = updates
    .map((k, o) => [regroupKey(sc, k), o.value] as const)
    .groupByKey(sc.regroup === 'sum' ? { key: s } : { key: s, name: 'regroup' });
  regrouped
    .reduce((a, b) => (a ?? 0) + (b ?? 0), { name: 'regrouped' })
    .toStream()
    .mapValues((v): Out => ({ start: -1, end: -1, value: v }))
    .to(output, { key: s });
  if (sc.regroup === 'sum-and-count')
    regrouped
      .count({ name: 'regrouped-count' })
      .toStream()
      .mapValues((v): Out => ({ start: -2, end: -2, value: v }))
      .to(output, { key: s });
  return t.build();
}

/**
 * The contract's wire format in and out of the model: each record in its input topic (inputIndex), in
 * the input's order.
 */
export function runScenario(sc: Scenario, records: InRecord[]): OutRecord[] {
  const topics = inputTopics(sc, 'in');
  const ins = input(
    records.map((r) => ({
      key: r.key,
      value: { amount: r.amount },
      ts: r.timestamp,
      partition: r.partition,
      topic: topics[inputIndex(sc, r.key)] as string,
    })),
  );
  const partitions = Object.fromEntries(topics.map((topic) => [topic, sc.partitions]));
  const result = runModel(scenarioTopology(sc), ins, { partitions });
  return outputs(result).map((o) => {
    const v = o.value as Out;
    return { key: o.key as string, start: v.start, end: v.end, value: v.value, timestamp: o.ts };
  });
}
