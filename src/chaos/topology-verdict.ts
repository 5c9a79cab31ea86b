/**
 * The verdict of a topology chaos run: what the run's output topics, dead-letter topic, repartition
 * topics and committed offsets hold, against the reference model (src/topology/model.ts `runModel`) over
 * the input as it was actually written (read back from the input topic, with its partitions, offsets and
 * timestamps).
 *
 * The model runs once per task (src/chaos/topology-stages.ts): each partition of the input topic, and
 * each partition of a repartition topic over its records as the harness read them during the run (the
 * order in which a repartition partition receives several tasks' records is the run's to choose; that
 * file says why this is exact, and what is checked of the repartition topics themselves). A task's
 * outputs depend on its partition's records only. Per output topic and key (bytes), the outputs are
 * compared as records (value bytes and timestamp):
 *
 * - exactly-once (read_committed): the run's sequence equals the model's, in order, each once;
 * - at-least-once (read_uncommitted): the run's sequence splits into runs, each a contiguous stretch of
 *   the model's sequence; together they hold every model output; a run that starts at or before the
 *   furthest point reached is a replay (its outputs are counted as duplicates, allowed); an output no
 *   run can hold (a value the model never gives that key) is a difference.
 *
 * A key whose model outputs come from more than one task (a key changed by map or selectKey without a
 * repartition after it) has no order across tasks: its outputs are compared as a multiset (counted
 * apart). Dead letters are compared by (topic, partition, offset, `redfence-reason`) of the record they
 * carry (an input record, or a repartition record): exactly-once each of the model's once and nothing
 * else; at-least-once the same set, repeats counted as duplicates. Every input partition must be
 * committed to its end offset, every repartition partition past its last record, and the input topic
 * must hold every record produced.
 */
import type { ModelInput } from '../topology/model.js';
import type { BuiltTopology } from '../topology/types.js';
import type { ReadMessage } from './kafka.js';
import {
  asModelInput,
  compareRepartition,
  runStaged,
  type StagedModel,
  type TaskOutput,
  tasksOf,
} from './topology-stages.js';

export type TopologyCheck = 'input' | 'model' | 'repartition' | 'output' | 'dead-letter' | 'offsets';
export const TOPOLOGY_CHECKS: readonly TopologyCheck[] = [
  'input',
  'model',
  'repartition',
  'output',
  'dead-letter',
  'offsets',
];

/** The repartition topics as the harness read them during the run (src/chaos/repartition-log.ts). */
export interface RepartitionRead {
  /** Topic -> partition count, in the order they are written. */
  counts: ReadonlyMap<string, number>;
  /** Topic -> its records, partition by partition, in offset order. */
  records: ReadonlyMap<string, readonly ReadMessage[]>;
  /** Topic -> the group's committed offset per partition. */
  committed: ReadonlyMap<string, ReadonlyMap<number, number>>;
  /** Records the purge deleted (the partitions' first offsets at the end). */
  purged: number;
  /** The reader's failures (a partition that fell behind the purge): the downstream cannot be judged. */
  failures: readonly string[];
}

export interface TopologyDifference {
  check: TopologyCheck;
  message: string;
}

export interface TopologyVerdictInput {
  mode: 'exactly-once' | 'at-least-once';
  /** The topology on the run's topics. */
  built: BuiltTopology;
  /** How many records the harness produced. */
  produced: number;
  /** The input topic read back, in partition and offset order. */
  input: readonly ModelInput[];
  /** Each output topic read back (read_committed or read_uncommitted by mode), partition by partition. */
  outputs: ReadonlyMap<string, readonly ReadMessage[]>;
  deadLetters: readonly ReadMessage[];
  committed: ReadonlyMap<number, number>;
  ends: ReadonlyMap<number, number>;
  /** With repartition topics: what they held. */
  repartition?: RepartitionRead;
}

export interface TopologyResult {
  inputRecords: number;
  modelOutputs: number;
  outputRecords: number;
  /** Output keys (topic and key) compared; in order, and as multisets (outputs from several tasks). */
  keys: number;
  keysUnordered: number;
  /** At-least-once: outputs in replays (allowed), and the replays. */
  duplicateOutputs: number;
  replays: number;
  /** Repartition records read (all topics) and the model's; at-least-once repeats (allowed). */
  repartitionRecords: number;
  modelRepartitionRecords: number;
  repartitionDuplicates: number;
  /** Repartition partitions whose tasks' records matched in more than one way (compared as multisets). */
  repartitionAmbiguous: number;
  repartitionPurged: number;
  modelDeadLetters: number;
  deadLetterRecords: number;
  duplicateDeadLetters: number;
  committed: number;
  endOffsets: number;
  keysDiffering: number;
  differences: TopologyDifference[];
  counts: Map<TopologyCheck, number>;
}

/** At most this many differences of one check are listed (all are counted). */
const LISTED = 20;

type Out = { value: string; ts: number; task: string };
const id = (b: Buffer | null) => (b === null ? 'null' : b.toString('hex'));
const same = (a: Out, b: Out) => a.value === b.value && a.ts === b.ts;
const clip = (s: string, n = 120) => (s.length <= n ? s : `${s.slice(0, n)}... (${s.length} chars)`);
const shown = (hex: string): string => {
  if (hex === 'null') return '<null>';
  const b = Buffer.from(hex, 'hex');
  const text = b.toString('utf8');
  return Buffer.from(text, 'utf8').equals(b) ? text : `<base64:${b.toString('base64')}>`;
};
const showOut = (o: Out | undefined) => (o ? `${clip(shown(o.value))} @${o.ts}` : 'none');

function push<T>(m: Map<string, T[]>, k: string, v: T): void {
  const list = m.get(k);
  if (list) list.push(v);
  else m.set(k, [v]);
}

/** The model per task: the input topic's partitions, then each repartition partition as read. */
function model(x: TopologyVerdictInput): StagedModel {
  const tasks = tasksOf(x.input);
  for (const [topic, records] of x.repartition?.records ?? [])
    for (const [task, list] of tasksOf(asModelInput(topic, records))) tasks.set(task, list);
  return runStaged(x.built, tasks);
}

/** At-least-once: `actual` as runs of contiguous stretches of `expected`. */
function replayRuns(expected: readonly Out[], actual: readonly Out[]) {
  const covered = new Array<boolean>(expected.length).fill(false);
  let p = 0; // the next model position of the current run
  let furthest = 0;
  let replays = 0;
  let duplicates = 0;
  const strays: Out[] = [];
  for (const x of actual) {
    if (p < expected.length && same(expected[p] as Out, x)) {
      if (covered[p]) duplicates++;
    } else {
      // a new run: an uncovered place first, else a replay of a covered one (the latest before p)
      let j = expected.findIndex((e, i) => !covered[i] && same(e, x));
      if (j < 0) for (let i = p - 1; i >= 0 && j < 0; i--) if (same(expected[i] as Out, x)) j = i;
      if (j < 0) j = expected.findIndex((e) => same(e, x));
      if (j < 0) {
        strays.push(x);
        continue;
      }
      if (covered[j]) {
        duplicates++;
        if (j < furthest) replays++;
      }
      p = j;
    }
    covered[p] = true;
    p++;
    furthest = Math.max(furthest, p);
  }
  const missing = expected.filter((_, i) => !covered[i]);
  return { replays, duplicates, strays, missing };
}

function multiset(list: readonly Out[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const o of list) m.set(`${o.value}@${o.ts}`, (m.get(`${o.value}@${o.ts}`) ?? 0) + 1);
  return m;
}

export function judgeTopologyRun(x: TopologyVerdictInput): TopologyResult {
  const differences: TopologyDifference[] = [];
  const counts = new Map<TopologyCheck, number>();
  const differing = new Set<string>();
  const add = (check: TopologyCheck, message: string, key?: string) => {
    const n = (counts.get(check) ?? 0) + 1;
    counts.set(check, n);
    if (key !== undefined) differing.add(key);
    if (n <= LISTED) differences.push({ check, message });
  };
  const result: TopologyResult = {
    inputRecords: x.input.length,
    modelOutputs: 0,
    outputRecords: 0,
    keys: 0,
    keysUnordered: 0,
    duplicateOutputs: 0,
    replays: 0,
    repartitionRecords: 0,
    modelRepartitionRecords: 0,
    repartitionDuplicates: 0,
    repartitionAmbiguous: 0,
    repartitionPurged: x.repartition?.purged ?? 0,
    modelDeadLetters: 0,
    deadLetterRecords: x.deadLetters.length,
    duplicateDeadLetters: 0,
    committed: 0,
    endOffsets: 0,
    keysDiffering: 0,
    differences,
    counts,
  };
  if (x.input.length !== x.produced)
    add('input', `the input topic holds ${x.input.length} records, ${x.produced} were produced`);
  let m: StagedModel;
  try {
    m = model(x);
  } catch (err) {
    add('model', `the reference model refused the input: ${(err as Error).message}`);
    m = { outputs: [], repartition: [], deadLetters: [] };
  }
  result.modelOutputs = m.outputs.length;
  if (x.repartition) judgeRepartitions(x, x.repartition, m.repartition, result, add);
  judgeOutputs(x, m.outputs, result, add);
  judgeDeadLetters(x, m.deadLetters, result, add);
  for (const [p, end] of x.ends) {
    const c = x.committed.get(p) ?? (end === 0 ? 0 : -1);
    result.endOffsets += end;
    result.committed += Math.max(0, c);
    if (c !== end) add('offsets', `input partition ${p}: committed ${c}, end offset ${end}`);
  }
  result.keysDiffering = differing.size;
  return result;
}

type Add = (check: TopologyCheck, message: string, key?: string) => void;

function judgeOutputs(
  x: TopologyVerdictInput,
  modelOutputs: readonly TaskOutput[],
  result: TopologyResult,
  add: Add,
): void {
  const expected = new Map<string, Out[]>();
  for (const o of modelOutputs)
    push(expected, `${o.topic}\u0000${id(o.key)}`, { value: id(o.value), ts: o.timestamp, task: o.task });
  const actual = new Map<string, Out[]>();
  for (const [topic, records] of x.outputs)
    for (const r of records) {
      result.outputRecords++;
      push(actual, `${topic}\u0000${id(r.key)}`, { value: id(r.value), ts: r.timestamp, task: '' });
    }
  const keys = new Set([...expected.keys(), ...actual.keys()]);
  result.keys = keys.size;
  for (const k of [...keys].sort()) {
    const [topic, key] = k.split('\u0000') as [string, string];
    const name = `${topic} key ${clip(shown(key), 60)}`;
    const want = expected.get(k) ?? [];
    const got = actual.get(k) ?? [];
    const ordered = new Set(want.map((o) => o.task)).size <= 1 && key !== 'null';
    if (!ordered) {
      result.keysUnordered++;
      const a = multiset(want);
      const b = multiset(got);
      let extra = 0;
      let short = 0;
      for (const [v, n] of a) short += Math.max(0, n - (b.get(v) ?? 0));
      for (const [v, n] of b) {
        const over = n - (a.get(v) ?? 0);
        if (over > 0 && (x.mode === 'exactly-once' || !a.has(v))) extra += over;
        else if (over > 0) result.duplicateOutputs += over;
      }
      if (short + extra > 0)
        add(
          'output',
          `${name} (outputs from several tasks): ${short} model outputs missing, ${extra} not the model's`,
          k,
        );
      continue;
    }
    if (x.mode === 'exactly-once') {
      const i = firstDifference(want, got);
      if (i >= 0)
        add(
          'output',
          `${name}: ${got.length} outputs, the model ${want.length}; first difference at #${i}: ${showOut(got[i])} in the run, ${showOut(want[i])} in the model`,
          k,
        );
      continue;
    }
    const r = replayRuns(want, got);
    result.duplicateOutputs += r.duplicates;
    result.replays += r.replays;
    const parts = [
      ...(r.missing.length > 0
        ? [`${r.missing.length} model outputs missing (first ${showOut(r.missing[0])})`]
        : []),
      ...(r.strays.length > 0
        ? [`${r.strays.length} outputs not the model's (first ${showOut(r.strays[0])})`]
        : []),
    ];
    if (parts.length > 0) add('output', `${name}: ${parts.join(', ')}`, k);
  }
}

function firstDifference(a: readonly Out[], b: readonly Out[]): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const p = a[i];
    const q = b[i];
    if (p === undefined || q === undefined || !same(p, q)) return i;
  }
  return -1;
}

const int = (b: Buffer | undefined): number | undefined => {
  if (b === undefined) return undefined;
  if (b.length === 4) return b.readInt32BE(0);
  if (b.length === 8) return Number(b.readBigInt64BE(0));
  const n = Number(b.toString('utf8'));
  return Number.isInteger(n) ? n : undefined;
};

function judgeDeadLetters(
  x: TopologyVerdictInput,
  modelDeadLetters: readonly string[],
  result: TopologyResult,
  add: Add,
): void {
  result.modelDeadLetters = modelDeadLetters.length;
  const want = new Map<string, number>();
  for (const d of modelDeadLetters) want.set(d, (want.get(d) ?? 0) + 1);
  const got = new Map<string, number>();
  for (const m of x.deadLetters) {
    // the last of each (a record dead-lettered twice carries both hops' headers)
    const t = m.headers.get('kafka_dlt-original-topic')?.at(-1)?.toString('utf8');
    const p = int(m.headers.get('kafka_dlt-original-partition')?.at(-1));
    const o = int(m.headers.get('kafka_dlt-original-offset')?.at(-1));
    const reason = m.headers.get('redfence-reason')?.at(-1)?.toString('utf8') ?? '?';
    const k = `${t ?? '?'}/${p ?? '?'}/${o ?? '?'}/${reason}`;
    got.set(k, (got.get(k) ?? 0) + 1);
  }
  for (const [k, n] of want) {
    const g = got.get(k) ?? 0;
    if (g === 0) add('dead-letter', `record ${k}: the model dead-letters it, the run did not`);
    else if (g > n && x.mode === 'exactly-once')
      add('dead-letter', `record ${k}: ${g} dead letters, the model ${n}`);
    else if (g > n) result.duplicateDeadLetters += g - n;
  }
  for (const [k, g] of got)
    if (!want.has(k)) add('dead-letter', `record ${k}: ${g} dead letters, none in the model`);
}

/**
 * Each repartition topic against the model's records for it (src/chaos/topology-stages.ts), its
 * partitions committed past their last record, and the reader's failures.
 */
function judgeRepartitions(
  x: TopologyVerdictInput,
  r: RepartitionRead,
  modelRecords: readonly TaskOutput[],
  result: TopologyResult,
  add: Add,
): void {
  for (const f of r.failures) add('repartition', `the harness's reader of the repartition topics: ${f}`);
  const show = (o: { value: string; ts: number; key: string }) =>
    `${clip(shown(o.key), 60)} -> ${showOut({ value: o.value, ts: o.ts, task: '' })}`;
  for (const [topic, partitions] of r.counts) {
    const records = r.records.get(topic) ?? [];
    const want = modelRecords.filter((o) => o.topic === topic);
    const c = compareRepartition(x.mode, topic, partitions, want, records, show);
    result.repartitionRecords += c.records;
    result.modelRepartitionRecords += c.modelRecords;
    result.repartitionDuplicates += c.duplicates;
    result.repartitionAmbiguous += c.ambiguous;
    for (const d of c.differences) add('repartition', d);
    const committed = r.committed.get(topic);
    for (let p = 0; p < partitions; p++) {
      const last = records.filter((m) => m.partition === p).at(-1);
      if (last === undefined) continue;
      const at = committed?.get(p) ?? -1;
      if (at <= last.offset)
        add(
          'offsets',
          `repartition partition ${topic}/${p}: committed ${at}, its last record at ${last.offset}`,
        );
    }
  }
}
