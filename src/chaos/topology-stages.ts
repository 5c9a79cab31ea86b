/**
 * A topology with repartition topics judged in stages (src/chaos/topology-verdict.ts uses this): the
 * model runs once per task, a task being one partition of a topic the topology reads (its input topic,
 * or a repartition topic), over that partition's records as the run actually has them: the input topic
 * read back, a repartition topic as the harness read it while the run went on (src/chaos/repartition-log.ts:
 * the purge deletes its committed records, as Kafka Streams purges its repartition topics).
 *
 * Why per task and why that is exact: a task's state (its aggregations' stores and stream time) is its
 * own, so what it writes depends on its partition's records, in their offset order, and on nothing else.
 * What is not determined is the order in which a repartition partition receives the records of the
 * several tasks that write to it (each task writes its own in order, but tasks run in parallel, on
 * several instances, and are replayed after faults). That order decides the downstream task's outputs
 * (a key's counts come in another order, a window closes earlier or later), so the downstream model
 * runs over the order the run took, read back, instead of the one order `runModel` over the whole
 * input would take. The model's order is then checked where it is determined:
 *
 * - stage N (a task writing a repartition topic): the model's repartition records of each task, each
 *   placed on `murmur2(key) % partitions` of the topic (a null key through `repartition()` on any
 *   partition; a grouping drops a null key), are compared with what each partition holds. Exactly-once
 *   (read_committed): each partition holds exactly the model's records for it, each once, and the
 *   records of each writing task in that task's order (the partition is an interleaving of the tasks'
 *   sequences; only the interleaving is free). At-least-once (read_uncommitted): per partition and key,
 *   every model record at least once and nothing the model does not write; repeats are a replay's
 *   (counted, allowed: the downstream model then reads them as the run did).
 * - stage N+1 (a task reading a repartition partition): the model over that partition as read gives
 *   outputs, dead letters and further repartition records, judged as any task's.
 *
 * The topology is split for the model at every repartition topic: its writing sink and reading source
 * become an external sink and source (the same serdes and nodes), so `runModel` over one task's records
 * gives that task's outputs and repartition records, not the downstream walk's.
 */
import { type ModelInput, type ModelOutput, runModel } from '../topology/model.js';
import { isTick, TICK_HEADER, windowedAggregations } from '../topology/tick.js';
import type { BuiltTopology, TopologyNode } from '../topology/types.js';
import type { ReadMessage } from './kafka.js';
import { kafkaPartition } from './murmur2.js';

/** The model's record of one task: an output (or repartition record) and the task that wrote it. */
export type TaskOutput = ModelOutput & { task: string };

export const taskOf = (topic: string, partition: number) => `${topic}/${partition}`;

/** The topology with each repartition topic's writing sink and reading source made external. */
export function splitAtRepartitions(built: BuiltTopology): BuiltTopology {
  const nodes = built.nodes.map((n): TopologyNode => {
    if ((n.kind === 'source' || n.kind === 'sink') && n.internal)
      return Object.freeze({ ...n, internal: false });
    return n;
  });
  return Object.freeze({ ...built, nodes: Object.freeze(nodes), repartitionTopics: Object.freeze([]) });
}

/**
 * Each repartition topic's partition count, in the order they are written (a topic after the ones its
 * writer reads): `repartition()`'s numberOfPartitions, else the largest count of the topics its writing
 * sub-topology reads (a pattern's: the input topics it matches), as the runtime and Kafka Streams make
 * it. `inputs`: the run's input topics with their counts (`--input-partitions`); a topic not in it has
 * `inputPartitions`.
 */
export function repartitionCounts(
  built: BuiltTopology,
  inputPartitions: number,
  inputs: ReadonlyMap<string, number> = new Map(),
): Map<string, number> {
  const internal = new Set(built.repartitionTopics);
  const fixed = new Map<string, number>();
  for (const n of built.nodes)
    if (n.kind === 'sink' && n.internal && n.repartition?.partitions != null)
      fixed.set(n.topic, n.repartition.partitions);
  const counts = new Map<string, number>();
  const count = (topic: string, seen: Set<string>): number => {
    if (!internal.has(topic)) return inputs.get(topic) ?? inputPartitions;
    const known = counts.get(topic);
    if (known !== undefined) return known;
    let n = fixed.get(topic);
    if (n === undefined) {
      n = 1;
      if (seen.has(topic)) return n;
      seen.add(topic);
      for (const s of built.subTopologies) {
        if (!s.sinkTopics.includes(topic)) continue;
        for (const t of s.sourceTopics) n = Math.max(n, count(t, seen));
        if (s.sourcePatterns.length === 0) continue;
        // a pattern reads the input topics it matches (none known: the input's count)
        const matched = [...inputs].filter(([t]) => s.sourcePatterns.some((p) => p.test(t)));
        for (const [, c] of matched.length > 0 ? matched : [['', inputPartitions] as const])
          n = Math.max(n, c);
      }
    }
    counts.set(topic, n);
    return n;
  };
  for (const t of built.repartitionTopics) count(t, new Set());
  return counts;
}

/** One task's input: a partition of the input topic or of a repartition topic, in offset order. */
export function tasksOf(records: readonly ModelInput[]): Map<string, ModelInput[]> {
  const tasks = new Map<string, ModelInput[]>();
  for (const r of records) {
    const k = taskOf(r.topic, r.partition);
    const list = tasks.get(k);
    if (list) list.push(r);
    else tasks.set(k, [r]);
  }
  return tasks;
}

/** A record as read, as the model takes it (its headers too: a tick is known by its header). */
export function asModelRecord(topic: string, m: ReadMessage): ModelInput {
  const r = {
    topic,
    partition: m.partition,
    offset: m.offset,
    key: m.key,
    value: m.value,
    timestamp: Math.max(0, m.timestamp),
  };
  return m.headers.size === 0 ? r : { ...r, headers: Object.fromEntries(m.headers) };
}

/** A repartition partition as read, as the downstream model takes it. */
export function asModelInput(topic: string, records: readonly ReadMessage[]): ModelInput[] {
  return records.map((m) => asModelRecord(topic, m));
}

/** A tick of `idleCloseMs` (src/topology/tick.ts) as read by the harness. */
export const isTickMessage = (m: ReadMessage): boolean => m.key === null && m.headers.has(TICK_HEADER);

/**
 * The records of a partition the run took: all of them but the ticks at or past the group's committed
 * offset (a tick produced after the drain, before the instances stopped: never read, so it closed
 * nothing; a record of the input past the committed offset is still there, and fails the offsets check).
 */
export function taken(records: readonly ModelInput[], committed: number): ModelInput[] {
  return records.filter((r) => !(isTick(r) && r.offset >= committed));
}

/**
 * How many more final results (outputs and repartition records) ticks would still give: the model over
 * each task's records, and over them with a tick after them far past every window's close. 0 when the
 * ticks already made have closed every window the records opened (`redfence chaos --idle-close` drains
 * until then: an instance makes ticks into a partition until then, and no more after).
 */
export function pendingFinals(
  built: BuiltTopology,
  tasks: ReadonlyMap<string, readonly ModelInput[]>,
): number {
  const split = splitAtRepartitions(built);
  let horizon = 1;
  for (const n of windowedAggregations(built)) horizon = Math.max(horizon, closeSpan(n));
  let pending = 0;
  for (const records of tasks.values()) {
    const last = records.at(-1);
    if (last === undefined) continue;
    const latest = records.reduce((t, r) => Math.max(t, r.timestamp), 0);
    const tick: ModelInput = {
      topic: last.topic,
      partition: last.partition,
      offset: last.offset + 1,
      key: null,
      value: Buffer.alloc(0),
      timestamp: latest + 2 * horizon,
      headers: { [TICK_HEADER]: 'redfence-chaos' },
    };
    const count = (r: ReturnType<typeof runModel>) => r.outputs.length;
    pending += count(runModel(split, [...records, tick])) - count(runModel(split, records));
  }
  return pending;
}

/**
 * How many records the model writes when it takes a tick (the final results of the windows ticks close,
 * outputs and repartition records): per task, its count over the records up to each tick less that up
 * to the record before it. Two model runs per tick: ticks are few (none until a partition idles).
 */
export function tickFinals(built: BuiltTopology, tasks: ReadonlyMap<string, readonly ModelInput[]>): number {
  const split = splitAtRepartitions(built);
  const count = (records: readonly ModelInput[]) => runModel(split, records).outputs.length;
  let n = 0;
  for (const records of tasks.values())
    records.forEach((r, i) => {
      if (isTick(r)) n += count(records.slice(0, i + 1)) - count(records.slice(0, i));
    });
  return n;
}

/** How far past a window's last record its close can be: size, gap or difference, and grace. */
function closeSpan(n: ReturnType<typeof windowedAggregations>[number]): number {
  const w = n.window;
  if (w === null) return 0;
  const span =
    w.kind === 'session' ? w.inactivityGapMs : w.kind === 'sliding' ? 2 * w.timeDifferenceMs : w.sizeMs;
  return span + w.graceMs + 2;
}

export interface StagedModel {
  /** External sinks' records, each with its task. */
  outputs: TaskOutput[];
  /** Repartition records, each with its task (the topic is the repartition topic). */
  repartition: TaskOutput[];
  /** Dead letters as `<topic>/<partition>/<offset>/<reason>`. */
  deadLetters: string[];
}

/**
 * The model over each task's records (the split topology: src/chaos/topology-stages.ts above): what
 * every task writes to external sinks and repartition topics, and its dead letters (late, a function or
 * serde that threw, a record on the wrong partition).
 */
export function runStaged(
  built: BuiltTopology,
  tasks: ReadonlyMap<string, readonly ModelInput[]>,
): StagedModel {
  const split = splitAtRepartitions(built);
  const internal = new Set(built.repartitionTopics);
  const out: StagedModel = { outputs: [], repartition: [], deadLetters: [] };
  const dl = (s: { topic: string; partition: number; offset: number }, reason: string) =>
    out.deadLetters.push(`${s.topic}/${s.partition}/${s.offset}/${reason}`);
  for (const [task, records] of [...tasks].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))) {
    const result = runModel(split, records);
    for (const o of result.outputs)
      (internal.has(o.topic) ? out.repartition : out.outputs).push({ ...o, task });
    for (const d of result.deadLetters) dl(d.source, d.reason);
    for (const d of result.failed) dl(d.source, d.reason);
    for (const d of result.misplaced) dl(d.source, d.reason);
  }
  // a grouping's repartition drops a null key (its aggregation would); repartition() writes it
  const keepsNull = new Set<string>();
  for (const n of built.nodes)
    if (n.kind === 'sink' && n.internal && n.repartition !== null) keepsNull.add(n.topic);
  out.repartition = out.repartition.filter((o) => o.key !== null || keepsNull.has(o.topic));
  return out;
}

/** How a repartition topic compared with the model's records for it. */
export interface RepartitionComparison {
  records: number;
  modelRecords: number;
  /** At-least-once: repeated records (a replay's, allowed). */
  duplicates: number;
  /** Partitions whose records could be matched to their tasks in more than one way (compared as multisets). */
  ambiguous: number;
  /** One line per difference. */
  differences: string[];
}

type Rec = { key: string; value: string; ts: number };
const hex = (b: Buffer | null) => (b === null ? 'null' : b.toString('hex'));
const same = (a: Rec, b: Rec) => a.key === b.key && a.value === b.value && a.ts === b.ts;
const ident = (r: Rec) => `${r.key}\u0000${r.value}\u0000${r.ts}`;

/**
 * Stage N of one repartition topic: the model's records for it (by writing task) against what each of
 * its `partitions` holds as read (see the top of this file). `show` renders a record for a message.
 */
export function compareRepartition(
  mode: 'exactly-once' | 'at-least-once',
  topic: string,
  partitions: number,
  model: readonly TaskOutput[],
  actual: readonly ReadMessage[],
  show: (r: Rec) => string,
): RepartitionComparison {
  const c: RepartitionComparison = {
    records: actual.length,
    modelRecords: model.length,
    duplicates: 0,
    ambiguous: 0,
    differences: [],
  };
  // by partition (null keys: any partition, so all of them as one), then by writing task, in order
  const anywhere = -1;
  const want = new Map<number, Map<string, Rec[]>>();
  for (const o of model) {
    const q = o.key === null ? anywhere : kafkaPartition(o.key, partitions);
    const byTask = want.get(q) ?? new Map<string, Rec[]>();
    want.set(q, byTask);
    const list = byTask.get(o.task) ?? [];
    byTask.set(o.task, list);
    list.push({ key: hex(o.key), value: hex(o.value), ts: o.timestamp });
  }
  const got = new Map<number, Rec[]>();
  for (const m of actual) {
    const q = m.key === null ? anywhere : m.partition;
    const list = got.get(q) ?? [];
    got.set(q, list);
    list.push({ key: hex(m.key), value: hex(m.value), ts: m.timestamp });
  }
  for (const q of [...new Set([...want.keys(), ...got.keys()])].sort((a, b) => a - b)) {
    const where = q === anywhere ? `${topic} (null keys, any partition)` : `${topic}/${q}`;
    const tasks = want.get(q) ?? new Map<string, Rec[]>();
    const records = got.get(q) ?? [];
    let order = '';
    if (mode === 'exactly-once' && q !== anywhere) {
      const r = interleaving(tasks, records, same);
      if (r.ok) continue;
      if (r.ambiguous) c.ambiguous++;
      // out of order with the right records: the first record no task had next names it
      else if (r.bad) order = `record #${r.bad.at} is out of its task's order (${show(r.bad.rec)})`;
    }
    const m = multisets(tasks, records, mode);
    c.duplicates += m.duplicates;
    const parts = [
      ...(m.missing.length > 0
        ? [`${m.missing.length} model records missing (first ${show(m.missing[0] as Rec)})`]
        : []),
      ...(m.strays.length > 0
        ? [
            `${m.strays.length} records ${mode === 'exactly-once' ? "not the model's or repeated" : "not the model's"} (first ${show(m.strays[0] as Rec)})`,
          ]
        : []),
    ];
    if (parts.length === 0 && order !== '') parts.push(order);
    if (parts.length > 0)
      c.differences.push(`${where}: ${records.length} records, the model ${sum(tasks)}; ${parts.join(', ')}`);
  }
  return c;
}

const sum = (tasks: ReadonlyMap<string, readonly Rec[]>) =>
  [...tasks.values()].reduce((a, l) => a + l.length, 0);

/**
 * Whether `records` is an interleaving of the tasks' sequences, each in order and each record once:
 * each record is taken as the next record of a task whose next one it is. When two tasks' next records
 * are the same (`same`: a repartition record's key, value and timestamp; an output's value and
 * timestamp), the first task is taken, which another choice might have contradicted: such a sequence
 * is `ambiguous` when it does not pass (compared as a multiset instead). `bad`: the first record no
 * task had next (missing, repeated and stray records are then counted by the multiset comparison,
 * which names what is wrong more precisely than the first place it shows).
 */
export function interleaving<T>(
  tasks: ReadonlyMap<string, readonly T[]>,
  records: readonly T[],
  same: (a: T, b: T) => boolean,
) {
  const heads = new Map<string, number>([...tasks.keys()].map((t) => [t, 0]));
  let ambiguous = false;
  let bad: { at: number; rec: T } | undefined;
  records.forEach((x, at) => {
    const next = [...heads].filter(([t, i]) => {
      const e = tasks.get(t)?.[i];
      return e !== undefined && same(e, x);
    });
    if (next.length > 1) ambiguous = true;
    const [t, i] = next[0] ?? [];
    if (t === undefined || i === undefined) bad ??= { at, rec: x };
    else heads.set(t, i + 1);
  });
  const complete = [...heads].every(([t, i]) => i === (tasks.get(t)?.length ?? 0));
  return { ok: bad === undefined && complete, ambiguous, bad };
}

/** Per record (key, value, timestamp): the model's count against the run's. */
function multisets(tasks: ReadonlyMap<string, readonly Rec[]>, records: readonly Rec[], mode: string) {
  const want = new Map<string, { rec: Rec; n: number }>();
  for (const list of tasks.values())
    for (const r of list) {
      const e = want.get(ident(r)) ?? { rec: r, n: 0 };
      e.n++;
      want.set(ident(r), e);
    }
  const got = new Map<string, { rec: Rec; n: number }>();
  for (const r of records) {
    const e = got.get(ident(r)) ?? { rec: r, n: 0 };
    e.n++;
    got.set(ident(r), e);
  }
  const missing: Rec[] = [];
  const strays: Rec[] = [];
  let duplicates = 0;
  for (const [k, w] of want) {
    const n = got.get(k)?.n ?? 0;
    for (let i = n; i < w.n; i++) missing.push(w.rec);
  }
  for (const [k, g] of got) {
    const w = want.get(k)?.n ?? 0;
    const over = g.n - w;
    if (over <= 0) continue;
    if (mode === 'at-least-once' && w > 0) duplicates += over;
    else for (let i = 0; i < over; i++) strays.push(g.rec);
  }
  return { missing, strays, duplicates };
}
