/**
 * The scenarios on which the streams DSL is compared with Kafka Streams itself, their shapes (the
 * comparison contract) and a seeded input generator. test/topology/kstreams.ts runs a scenario with the
 * real Kafka Streams; the DSL's side runs the same scenario on the same input, and for every key the
 * sequences of output records must be equal.
 */
import { partitionFor } from '../../src/partitioner/index.js';

export type WindowSpec =
  | { kind: 'tumbling'; sizeMs: number; graceMs: number }
  | { kind: 'hopping'; sizeMs: number; advanceMs: number; graceMs: number }
  | { kind: 'sliding'; timeDifferenceMs: number; graceMs: number }
  | { kind: 'session'; inactivityGapMs: number; graceMs: number };

export interface Scenario {
  /** [a-z0-9-]+ */
  name: string;
  /** null: an unwindowed groupByKey().count()/aggregate into a table, toStream */
  window: WindowSpec | null;
  /** sum: of value.amount (an integer), starting at 0 */
  aggregate: 'count' | 'sum';
  /** 'final': EmitStrategy.onWindowClose() (windowed only) */
  emit: 'update' | 'final';
  /** stateless filter(value.amount > minAmount) before grouping */
  minAmount?: number;
  /** after toStream: filter(aggregate > minCount) (the fraud topology) */
  minCount?: number;
  /**
   * after toStream (and minCount): a node that throws on an update (or final result) whose value is a
   * multiple of throwEvery. Kafka Streams runs with `processing.exception.handler`
   * LogAndContinueProcessingExceptionHandler (KIP-1033: CONTINUE drops the record at that node, the
   * store keeps its update); redfence makes the record a dead letter with its state applied. The
   * outputs must be equal.
   */
  throwEvery?: number;
  /** repartition({ numberOfPartitions: repartition }) (string serdes) before grouping */
  repartition?: number;
  /**
   * Input topics (default 1), read as one source of the list of topics (inputTopics); the records of key
   * k<i> are in topic i % inputs (null keys in the first), in the partition of the record. Over 1 needs
   * `repartition` (every scenario aggregates, and the Redis runtime aggregates one topic's records).
   */
  inputs?: number;
  /**
   * The inputs read by a pattern matching exactly their names (inputPattern) instead of a list: Kafka
   * Streams subscribes to it, the Redis runtime resolves it at start to the same topics.
   */
  pattern?: boolean;
  /**
   * A second aggregation across a repartition: the first one's updates (after minCount) re-keyed to
   * `k<p>`, p the input partition of their key (regroupKey), grouped (a repartition topic of
   * `partitions` partitions) and summed (a reduce of their values); the output is the sums' table,
   * start = end = -1. Each new key gets the updates of one input partition, in that partition's
   * order, on every reader. `sum-and-count`: the grouping is named (`regroup`) and aggregated twice,
   * summed (start = end = -1) and counted (start = end = -2), both to the output: Kafka Streams writes a
   * named grouping's repartition topic once and both aggregations read it, each record's sum update
   * before its count update (the order they were added).
   */
  regroup?: 'sum' | 'sum-and-count';
  /** input partitions, of every input topic (output topic has the same count) */
  partitions: number;
}

export interface InRecord {
  partition: number;
  key: string | null;
  amount: number;
  timestamp: number;
}

/**
 * One output record. Windowed results are mapped to the plain key with the window bounds in the value
 * (Kafka Streams: .toStream().map((wk, v) -> KeyValue(wk.key(), {start, end, value}))); for an
 * unwindowed table start = end = -1. value null = a tombstone (session merges with cache 0).
 */
export interface OutRecord {
  key: string;
  start: number;
  end: number;
  value: number | null;
  timestamp: number;
  /** The record's headers, read only where a run asks for them (kstreams.ts, `headers`): `name=v1,v2;...`, names sorted. */
  headers?: string;
}

export interface InputOptions {
  /** distinct keys k0..k<keys-1> */
  keys: number;
  records: number;
  partitions: number;
  /** event time of the first record (ms since the epoch; fixed and in the past) */
  startMs: number;
  /** the in-order records' event times grow evenly from startMs to startMs + spanMs */
  spanMs: number;
  /** share of records behind their partition's stream time by up to disorderMs (within grace) */
  outOfOrderFraction: number;
  /** share of records behind their partition's stream time by lateByMs or more (past window end + grace) */
  lateFraction: number;
  /** share of records without a key (an aggregation drops them) */
  nullKeyFraction: number;
  /** how far behind an out-of-order record is at most (default spanMs / 20) */
  disorderMs?: number;
  /** how far behind its partition's stream time a late record is at least (default spanMs / 4) */
  lateByMs?: number;
  /** amounts are whole numbers in 1..maxAmount (default 100) */
  maxAmount?: number;
}

/** 2026-01-01T00:00:00Z: event times are fixed and in the past, so the topics keep them (retention.ms -1). */
export const START_MS = 1_767_225_600_000;

/** mulberry32: a small seeded generator of floats in [0, 1). */
export function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * A seeded input: the same seed and options give the same records. A keyed record goes to the partition
 * Kafka's default partitioner picks for its key (murmur2), so all records of a key are in one partition
 * and one task sees them in order; a record without key goes to a random partition. Stream time is per
 * partition (the largest event time so far): an out-of-order record is behind it by 1..disorderMs, a
 * late record by lateByMs..1.5 lateByMs (only once the partition has a record).
 */
export function generateInput(seed: number, o: InputOptions): InRecord[] {
  const rand = seeded(seed);
  const int = (n: number) => Math.floor(rand() * n);
  const disorderMs = o.disorderMs ?? Math.floor(o.spanMs / 20);
  const lateByMs = o.lateByMs ?? Math.floor(o.spanMs / 4);
  const maxAmount = o.maxAmount ?? 100;
  const streamTime = new Map<number, number>();
  const out: InRecord[] = [];
  for (let i = 0; i < o.records; i++) {
    const nominal = o.startMs + Math.floor((i * o.spanMs) / o.records);
    const key = rand() < o.nullKeyFraction ? null : `k${int(o.keys)}`;
    const partition = key === null ? int(o.partitions) : partitionFor(key, o.partitions);
    const seen = streamTime.get(partition);
    const r = rand();
    let timestamp = nominal;
    if (seen !== undefined && r < o.lateFraction) {
      timestamp = seen - lateByMs - int(Math.floor(lateByMs / 2) + 1);
    } else if (seen !== undefined && r < o.lateFraction + o.outOfOrderFraction) {
      timestamp = Math.min(nominal, seen) - 1 - int(Math.max(1, disorderMs));
    }
    timestamp = Math.max(0, timestamp);
    streamTime.set(partition, Math.max(seen ?? timestamp, timestamp));
    out.push({ partition, key, amount: 1 + int(maxAmount), timestamp });
  }
  return out;
}

/** A scenario's input topics: the first (the run's input topic), then `<first>-2`, `<first>-3`, ... */
export function inputTopics(sc: Scenario, first: string): string[] {
  return Array.from({ length: sc.inputs ?? 1 }, (_, i) => (i === 0 ? first : `${first}-${i + 1}`));
}

/**
 * The pattern a `pattern` scenario reads, as text both sides compile (Kafka Streams:
 * Pattern.quote(first) + "(-[0-9]+)?"): the first input and every `<first>-<n>`, whole names only.
 */
export function inputPattern(first: string): RegExp {
  return new RegExp(`${first.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(-[0-9]+)?`);
}

/**
 * The index in inputTopics of the topic a record is in: key k<i> in topic i % inputs, a null key in the
 * first. Each key in one topic (and one partition of it) gives its records one order on every reader.
 */
export function inputIndex(sc: Scenario, key: string | null): number {
  const n = sc.inputs ?? 1;
  if (n === 1 || key === null) return 0;
  const m = /^k(\d+)$/.exec(key);
  if (m === null) throw new Error(`${sc.name}: key ${key} is not k<i>, so it has no input topic`);
  return Number(m[1]) % n;
}

/** The key a regrouped update goes to: `k<p>`, p its key's partition among the input's `partitions`. */
export function regroupKey(sc: Scenario, key: string): string {
  return `k${partitionFor(key, sc.partitions)}`;
}

/** A scenario and the options of its generated input. */
export interface ScenarioCase {
  scenario: Scenario;
  input: InputOptions;
}

const SEC = 1000;
const MIN = 60 * SEC;
/** 300 records over 10 minutes, 2-3 partitions: windows of a minute see several records of a key. */
const base = (partitions: number, over: Partial<InputOptions> = {}): InputOptions => ({
  keys: 6,
  records: 300,
  partitions,
  startMs: START_MS,
  spanMs: 10 * MIN,
  outOfOrderFraction: 0.15,
  lateFraction: 0.04,
  nullKeyFraction: 0.03,
  disorderMs: 8 * SEC,
  lateByMs: 3 * MIN,
  ...over,
});

const tumbling: WindowSpec = { kind: 'tumbling', sizeMs: MIN, graceMs: 10 * SEC };
const hopping: WindowSpec = { kind: 'hopping', sizeMs: MIN, advanceMs: 20 * SEC, graceMs: 10 * SEC };
const sliding: WindowSpec = { kind: 'sliding', timeDifferenceMs: 30 * SEC, graceMs: 10 * SEC };
/** A key's records are ~12 s apart on average: some gaps exceed 20 s, and out-of-order records bridge them. */
const session: WindowSpec = { kind: 'session', inactivityGapMs: 20 * SEC, graceMs: 10 * SEC };
/** Fraud: amounts over 60, 5-minute windows, grace 1 min, alert on a count over 3. */
const fraudWindow: WindowSpec = { kind: 'tumbling', sizeMs: 5 * MIN, graceMs: MIN };
const fraudInput = base(3, {
  keys: 5,
  records: 400,
  spanMs: 30 * MIN,
  disorderMs: 40 * SEC,
  lateByMs: 8 * MIN,
});

export const CASES: readonly ScenarioCase[] = [
  {
    scenario: {
      name: 'tumbling-count-update',
      window: tumbling,
      aggregate: 'count',
      emit: 'update',
      partitions: 3,
    },
    input: base(3),
  },
  {
    scenario: {
      name: 'tumbling-count-throws-update',
      window: tumbling,
      aggregate: 'count',
      emit: 'update',
      throwEvery: 3,
      partitions: 3,
    },
    input: base(3),
  },
  {
    scenario: {
      name: 'tumbling-count-throws-final',
      window: tumbling,
      aggregate: 'count',
      emit: 'final',
      throwEvery: 3,
      partitions: 3,
    },
    input: base(3),
  },
  {
    scenario: {
      name: 'tumbling-count-final',
      window: tumbling,
      aggregate: 'count',
      emit: 'final',
      partitions: 3,
    },
    input: base(3),
  },
  {
    scenario: {
      name: 'hopping-sum-update',
      window: hopping,
      aggregate: 'sum',
      emit: 'update',
      partitions: 2,
    },
    input: base(2),
  },
  {
    scenario: { name: 'hopping-sum-final', window: hopping, aggregate: 'sum', emit: 'final', partitions: 2 },
    input: base(2),
  },
  {
    scenario: {
      name: 'sliding-count-update',
      window: sliding,
      aggregate: 'count',
      emit: 'update',
      partitions: 2,
    },
    input: base(2),
  },
  {
    scenario: {
      name: 'sliding-count-final',
      window: sliding,
      aggregate: 'count',
      emit: 'final',
      partitions: 2,
    },
    input: base(2),
  },
  {
    scenario: {
      name: 'session-count-update',
      window: session,
      aggregate: 'count',
      emit: 'update',
      partitions: 3,
    },
    input: base(3),
  },
  {
    // a sum in session windows: aggregate(init, aggregator, merger), a JS merger on Redis
    scenario: {
      name: 'session-sum-update',
      window: session,
      aggregate: 'sum',
      emit: 'update',
      partitions: 2,
    },
    input: base(2),
  },
  {
    scenario: {
      name: 'session-count-final',
      window: session,
      aggregate: 'count',
      emit: 'final',
      partitions: 3,
    },
    input: base(3),
  },
  {
    // through repartition() to 2 partitions: the grace outlasts the input's span, so no record is late and
    // the order in which a repartition partition interleaves the input partitions decides nothing
    scenario: {
      name: 'tumbling-sum-repartition',
      window: { kind: 'tumbling', sizeMs: MIN, graceMs: 60 * MIN },
      aggregate: 'sum',
      emit: 'update',
      repartition: 2,
      partitions: 3,
    },
    input: base(3),
  },
  {
    // three input topics read as one source, through repartition() to 3 partitions, then a windowed
    // count. Kafka Streams (and the runtime) write the repartition topic in the order their tasks read
    // the inputs, which depends on what each fetch brought: each key is in one topic and partition, so
    // its records keep one order on both sides; the grace outlasts the input's span, so no record is late
    // and the order across keys in a repartition partition (its stream time) decides nothing.
    scenario: {
      name: 'tumbling-count-inputs',
      window: { kind: 'tumbling', sizeMs: MIN, graceMs: 60 * MIN },
      aggregate: 'count',
      emit: 'update',
      repartition: 3,
      inputs: 3,
      partitions: 2,
    },
    input: base(2),
  },
  {
    // two input topics, through repartition() to 2 partitions, then an unwindowed sum: a key's running
    // sum follows its records' order, one order since each key is in one topic and partition
    scenario: {
      name: 'table-sum-inputs',
      window: null,
      aggregate: 'sum',
      emit: 'update',
      repartition: 2,
      inputs: 2,
      partitions: 3,
    },
    input: base(3),
  },
  {
    // table-sum-inputs' shape with the two input topics read by a pattern, and a count: Kafka Streams
    // subscribes to the pattern, the runtime resolves it at start (both inputs exist before either starts)
    scenario: {
      name: 'table-count-pattern',
      window: null,
      aggregate: 'count',
      emit: 'update',
      repartition: 2,
      inputs: 2,
      pattern: true,
      partitions: 2,
    },
    input: base(2),
  },
  {
    // two aggregations across a repartition: the tumbling counts' updates summed per input partition
    // (`k<p>`, keys the first aggregation has too); the input of tumbling-count-update
    scenario: {
      name: 'tumbling-count-regroup',
      window: tumbling,
      aggregate: 'count',
      emit: 'update',
      regroup: 'sum',
      partitions: 3,
    },
    input: base(3),
  },
  {
    // one named grouped stream aggregated twice: one repartition topic, read by a sum and a count
    scenario: {
      name: 'tumbling-count-regroup-twice',
      window: tumbling,
      aggregate: 'count',
      emit: 'update',
      regroup: 'sum-and-count',
      partitions: 3,
    },
    input: base(3),
  },
  {
    scenario: { name: 'table-count', window: null, aggregate: 'count', emit: 'update', partitions: 3 },
    input: base(3),
  },
  {
    scenario: { name: 'table-sum', window: null, aggregate: 'sum', emit: 'update', partitions: 2 },
    input: base(2),
  },
  {
    scenario: {
      name: 'fraud-update',
      window: fraudWindow,
      aggregate: 'count',
      emit: 'update',
      minAmount: 60,
      minCount: 3,
      partitions: 3,
    },
    input: fraudInput,
  },
  {
    scenario: {
      name: 'fraud-final',
      window: fraudWindow,
      aggregate: 'count',
      emit: 'final',
      minAmount: 60,
      minCount: 3,
      partitions: 3,
    },
    input: fraudInput,
  },
];

/** The named scenarios. */
export const SCENARIOS: readonly Scenario[] = CASES.map((c) => c.scenario);

/** A scenario's generated input for a seed (seed 1 unless said). */
export function inputFor(name: string, seed = 1): InRecord[] {
  const c = CASES.find((x) => x.scenario.name === name);
  if (c === undefined) throw new Error(`no scenario named ${name}`);
  return generateInput(seed, c.input);
}
