/**
 * Shared pieces of the topology processor tests on the real broker and Redis: the topologies (the fraud
 * topology of docs/streams.md, a hopping-window count with emit final, a sliding-window count and
 * reduce) on a test's own topics, generated
 * input produced to its partitions (out-of-order and late records, null keys), the reference model's
 * results for it, and the comparison of what the output topics hold (read_committed) with the model's
 * outputs per topic and key.
 */
import assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { readDeadLetterHeaders } from '../../src/dead-letter/read-headers.js';
import type { ProcessingMode } from '../../src/processor/options.js';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import {
  type BuiltTopology,
  SlidingWindows,
  serdes,
  TimeWindows,
  topology,
} from '../../src/topology/index.js';
import { type ModelInput, type ModelResult, runModel } from '../../src/topology/model.js';
import { KAFKA_BROKERS } from '../helpers/env.js';
import {
  committedOffsets,
  createTopics,
  kafka,
  pollUntil,
  produce,
  type ReadRecord,
  readToEnd,
  waitCommitted,
} from '../helpers/kafka.js';
import { generateInput, type InputOptions, type InRecord, START_MS } from '../topology/scenarios.js';
import { twoStages } from './fixtures/two-stages.js';

const s = serdes.string();
const SEC = 1000;
const MIN = 60 * SEC;
export const PARTITIONS = 3;

export interface Case {
  readonly name: string;
  readonly build: (ns: string) => BuiltTopology;
  /** The output topics (besides the dead-letter topic). */
  readonly outputs: (ns: string) => string[];
  readonly input: InputOptions;
}

/** The fraud topology of docs/streams.md (threshold and alert count low enough to alert often). */
function fraud(ns: string): BuiltTopology {
  const t = topology({ applicationId: ns });
  t.stream<string, { amount: number }>(`${ns}-orders`, { key: s })
    .filter((_customer, order) => order !== null && order.amount > 40)
    .groupByKey()
    .windowedBy(TimeWindows.ofSizeWithNoGrace(5 * MIN))
    .count({ name: 'big-orders' })
    .toStream()
    .filter((_window, count) => count > 2)
    .map((w, count) => [w.key, { start: w.start, end: w.end, count }] as const)
    .to(`${ns}-fraud-alerts`, { key: s });
  return t.build();
}

/** A hopping-window count with grace and emit final; big amounts go straight to their own sink. */
function hoppingFinal(ns: string): BuiltTopology {
  const t = topology({ applicationId: ns });
  const by = t
    .stream<string, { amount: number }>(`${ns}-orders`, { key: s })
    .split({ name: 'size' })
    .branch((_k, o) => o !== null && o.amount > 90, 'big')
    .defaultBranch('rest');
  by['size-big']?.mapValues((o) => ({ big: o.amount })).to(`${ns}-big`, { key: s });
  by['size-rest']
    ?.groupByKey()
    .windowedBy(TimeWindows.ofSizeAndGrace(MIN, 10 * SEC).advanceBy(20 * SEC))
    .emit('final')
    .count({ name: 'hop-counts' })
    .toStream()
    .map((wk, n) => [wk.key, { start: wk.start, end: wk.end, n }] as const)
    .to(`${ns}-hop`, { key: s });
  return t.build();
}

/** A sliding-window count and reduce (the largest amount) of one grouped stream, with grace. */
function sliding(ns: string): BuiltTopology {
  const t = topology({ applicationId: ns });
  const g = t.stream<string, { amount: number }>(`${ns}-orders`, { key: s }).groupByKey();
  const w = SlidingWindows.ofTimeDifferenceAndGrace(30 * SEC, 10 * SEC);
  g.windowedBy(w)
    .count({ name: 'slide-counts' })
    .toStream()
    .map((wk, n) => [wk.key, { start: wk.start, end: wk.end, n }] as const)
    .to(`${ns}-slide`, { key: s });
  g.windowedBy(w)
    .reduce((a, b) => (b.amount > a.amount ? b : a), { name: 'slide-max' })
    .toStream()
    .map((wk, o) => [wk.key, { start: wk.start, max: o?.amount ?? null }] as const)
    .to(`${ns}-slide-max`, { key: s });
  return t.build();
}

const input = (over: Partial<InputOptions>): InputOptions => ({
  keys: 6,
  records: 600,
  partitions: PARTITIONS,
  startMs: START_MS,
  spanMs: 30 * MIN,
  outOfOrderFraction: 0.15,
  lateFraction: 0.05,
  nullKeyFraction: 0.03,
  disorderMs: 30 * SEC,
  lateByMs: 8 * MIN,
  ...over,
});

export const FRAUD: Case = {
  name: 'the fraud topology',
  build: fraud,
  outputs: (ns) => [`${ns}-fraud-alerts`],
  input: input({}),
};

export const HOPPING_FINAL: Case = {
  name: 'a hopping-window count with emit final',
  build: hoppingFinal,
  outputs: (ns) => [`${ns}-big`, `${ns}-hop`],
  input: input({ spanMs: 20 * MIN, lateByMs: 2 * MIN, disorderMs: 15 * SEC }),
};

export const SLIDING: Case = {
  name: 'a sliding-window count and reduce',
  build: sliding,
  outputs: (ns) => [`${ns}-slide`, `${ns}-slide-max`],
  input: input({ spanMs: 20 * MIN, lateByMs: 2 * MIN, disorderMs: 15 * SEC }),
};

/** Aggregations in two sub-topologies (fixtures/two-stages.ts). */
export const TWO_STAGES: Case = {
  name: 'a windowed count, then an aggregate of its re-keyed updates',
  build: twoStages,
  outputs: (ns) => [`${ns}-per-customer`, `${ns}-stats`],
  input: {
    keys: 6,
    records: 500,
    partitions: PARTITIONS,
    startMs: START_MS,
    spanMs: 40 * MIN,
    outOfOrderFraction: 0.15,
    lateFraction: 0.05,
    nullKeyFraction: 0.03,
    disorderMs: 60_000,
    lateByMs: 8 * MIN,
  },
};

export interface Prepared {
  readonly built: BuiltTopology;
  readonly model: ModelResult;
  readonly records: number;
  /** The generated input as the model is given it (offsets 0.. per partition). */
  readonly inputs: readonly ModelInput[];
  /** Produces the generated records [from, to) (in order: each partition's offsets follow on). */
  readonly produce: (from: number, to: number) => Promise<void>;
  readonly cleanup: () => Promise<void>;
}

/**
 * Makes the test's topics (retention.ms -1: the event times are in the past), generates the input
 * (offsets 0.. per partition, as the model is given them; `produce` writes them, in parts if need be)
 * and runs the reference model on all of it.
 */
export async function prepare(c: Case, ns: string, seed: number): Promise<Prepared> {
  const built = c.build(ns);
  const topic = `${ns}-orders`;
  const keep = { 'retention.ms': '-1' };
  const cleanup = await createTopics([
    { topic, partitions: PARTITIONS, config: keep },
    ...c.outputs(ns).map((t) => ({ topic: t, partitions: PARTITIONS, config: keep })),
    { topic: `${topic}.DLT`, partitions: 1, config: keep },
  ]);
  const generated = generateInput(seed, c.input);
  const next = new Map<number, number>();
  const inputs: ModelInput[] = generated.map((r) => {
    const offset = next.get(r.partition) ?? 0;
    next.set(r.partition, offset + 1);
    return {
      topic,
      partition: r.partition,
      offset,
      key: r.key === null ? null : Buffer.from(r.key),
      value: Buffer.from(JSON.stringify({ amount: r.amount })),
      timestamp: r.timestamp,
    };
  });
  const write = (from: number, to: number) =>
    produce(
      topic,
      inputs.slice(from, to).map((r) => ({
        key: r.key?.toString() ?? null,
        value: r.value,
        partition: r.partition,
        timestamp: String(r.timestamp),
      })),
    );
  const model = runModel(built, inputs, { partitions: { [topic]: PARTITIONS } });
  return { built, model, records: inputs.length, inputs, produce: write, cleanup };
}

export function processor(
  built: BuiltTopology,
  redis: Redis,
  mode: ProcessingMode,
  maxBatchSize = 40,
): TopologyProcessor {
  return new TopologyProcessor({
    topology: built,
    redis,
    mode,
    kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize },
  });
}

/** Runs a processor of `built` until its group committed every partition of `topic` to its end, then closes it. */
export async function runToCommitted(
  built: BuiltTopology,
  redis: Redis,
  topic: string,
  mode: ProcessingMode,
  maxBatchSize?: number,
): Promise<void> {
  const p = processor(built, redis, mode, maxBatchSize);
  await p.start();
  try {
    await waitCommitted(p.groupId, topic, 60_000);
  } finally {
    await p.close();
  }
}

/** A row as {@link perKey} takes it. */
export interface Row {
  readonly topic: string;
  readonly key: string | null;
  readonly value: string | null;
  readonly ts: string;
}

/** The records of the topics (read_committed, each to its end), as rows. */
export async function topicRows(topics: readonly string[]): Promise<(ReadRecord & Row)[]> {
  const rows: (ReadRecord & Row)[] = [];
  for (const topic of topics)
    for (const r of await readToEnd(topic)) rows.push({ ...r, topic, ts: r.timestamp });
  return rows;
}

/** The model's outputs as rows. */
export function modelRows(model: ModelResult): Row[] {
  return model.outputs.map((o) => ({
    topic: o.topic,
    key: o.key?.toString() ?? null,
    value: o.value?.toString() ?? null,
    ts: String(o.timestamp),
  }));
}

/** `topic key -> [value @timestamp]...`: records without a key (from every partition) sorted. */
export function perKey(rows: readonly Row[]) {
  const m = new Map<string, string[]>();
  for (const r of rows) {
    const k = `${r.topic} ${r.key ?? '-'}`;
    m.set(k, [...(m.get(k) ?? []), `${r.value ?? '-'} @${r.ts}`]);
  }
  for (const [k, list] of m) if (k.endsWith(' -')) list.sort();
  return m;
}

/**
 * Reads every output topic to its end (read_committed) and compares it with the model's outputs per
 * topic and key, in order; the dead-letter topic holds one record per model dead letter (its source
 * offset and partition). Returns how many output records were read.
 */
export async function assertOutputsEqualModel(c: Case, ns: string, model: ModelResult): Promise<number> {
  const read = await assertOutputsPerKey(c.outputs(ns), model);
  const dead = await readToEnd(`${ns}-orders.DLT`);
  const where = (p: number, o: string | number) => `${p}/${o}`;
  const deadAt = dead.map((r) => {
    const h = readDeadLetterHeaders(r.headers);
    assert.equal(h.reason, 'late');
    return where(h.originalPartition, h.originalOffset.toString());
  });
  const wantDead = model.deadLetters.map((d) => where(d.source.partition, d.source.offset));
  assert.deepEqual(deadAt.sort(), wantDead.sort(), 'one dead letter per late record');
  return read;
}

/**
 * Reads every output topic to its end (read_committed) and compares it with the model's outputs per
 * topic and key, in order. Returns how many output records were read.
 */
export async function assertOutputsPerKey(outputs: readonly string[], model: ModelResult): Promise<number> {
  const got = await topicRows(outputs);
  assert.deepEqual(perKey(got), perKey(modelRows(model)), 'output records per topic and key');
  return got.length;
}

/**
 * Generated input spread over several topics: 9 keys over PARTITIONS partitions in 30 minutes, a fifth
 * out of order, none late and none without a key; key k<i> in topics[i % n], in the partition the
 * generator gave it (offsets 0.. per topic and partition), its amount as the value. Each key is in one
 * topic, so its records have one order in the model and in the runtime.
 */
export function overTopics(seed: number, records: number, topics: readonly string[]): ModelInput[] {
  const generated: InRecord[] = generateInput(seed, {
    keys: 9,
    records,
    partitions: PARTITIONS,
    startMs: START_MS,
    spanMs: 30 * MIN,
    outOfOrderFraction: 0.2,
    lateFraction: 0,
    nullKeyFraction: 0,
    disorderMs: 60_000,
    lateByMs: 0,
  });
  const next = new Map<string, number>();
  return generated.map((r) => {
    const topic = topics[Number((r.key as string).slice(1)) % topics.length] as string;
    const at = `${topic}/${r.partition}`;
    const offset = next.get(at) ?? 0;
    next.set(at, offset + 1);
    return {
      topic,
      partition: r.partition,
      offset,
      key: Buffer.from(r.key as string),
      value: Buffer.from(JSON.stringify({ amount: r.amount })),
      timestamp: r.timestamp,
    };
  });
}

/** Produces the records of `topic` among `records`, in order, as the model is given them. */
export function produceTopic(topic: string, records: readonly ModelInput[]): Promise<void> {
  return produce(
    topic,
    records
      .filter((r) => r.topic === topic)
      .map((r) => ({
        key: r.key?.toString() ?? null,
        value: r.value,
        partition: r.partition,
        timestamp: String(r.timestamp),
      })),
  );
}

/**
 * Waits (up to 120 s) until the group has committed `topic` (a repartition topic) past its last records:
 * transaction markers follow them, so its end offsets are not the mark.
 */
export async function waitReadPast(groupId: string, topic: string): Promise<void> {
  const last = new Map<number, number>();
  for (const r of await readToEnd(topic))
    last.set(r.partition, Math.max(last.get(r.partition) ?? -1, Number(r.offset)));
  await pollUntil(
    `${topic} committed past its last records`,
    async () => {
      const at = await committedOffsets(groupId, topic).catch(() => new Map<number, number>());
      return [...last].every(([partition, offset]) => (at.get(partition) ?? -1) >= offset + 1);
    },
    120_000,
  );
}

/** The group's committed offsets and metadata of the input topic. */
export async function committedWithMetadata(
  groupId: string,
  topic: string,
): Promise<Map<number, { offset: number; metadata: string }>> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const rows = await admin.fetchOffsets({ groupId, topics: [topic] });
    return new Map(
      (rows[0]?.partitions ?? []).map((p) => [
        p.partition,
        { offset: Number(p.offset), metadata: p.metadata ?? '' },
      ]),
    );
  } finally {
    await admin.disconnect();
  }
}
