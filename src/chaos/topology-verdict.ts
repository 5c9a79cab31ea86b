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
 *
 * Ticks (`redfence chaos --idle-close`: src/topology/tick.ts) are records of their partitions: the model
 * takes them as the instances did, so the final results of the windows they close are judged like any.
 * A tick at or past its partition's committed offset (made after the drain, before the instances
 * stopped) was never read: it is left out (`ticksUnread`), and an input partition is then committed
 * to past its last record taken (a tick's transaction marker may follow it) instead of its end offset.
 */
import type { ModelInput } from '../topology/model.js';
import { isTick } from '../topology/tick.js';
import type { BuiltTopology } from '../topology/types.js';
import type { ReadMessage } from './kafka.js';
import { firstDifference, multiset, type Out, replayRuns } from './output-runs.js';
import {
  asModelInput,
  compareRepartition,
  isTickMessage,
  runStaged,
  type StagedModel,
  type TaskOutput,
  taken,
  taskOf,
  tasksOf,
  tickFinals,
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
  /**
   * The input topic read back (read_committed in exactly-once mode), in partition and offset order, with
   * the records' headers (a tick is known by its header).
   */
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
  /** Records of the input topic read back, ticks not counted. */
  inputRecords: number;
  /**
   * Ticks of `idleCloseMs` (src/topology/tick.ts) in the input and repartition topics, judged as the
   * records they are; `ticksUnread`: those at or past the group's committed offset (produced after the
   * drain), left out of the model.
   */
  ticks: number;
  ticksUnread: number;
  /** The model's outputs (and repartition records) written when it took a tick: the windows ticks closed. */
  tickOutputs: number;
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

const id = (b: Buffer | null) => (b === null ? 'null' : b.toString('hex'));
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

/**
 * Each task's records the run took (`taken`: ticks left unread aside): the input topic's partitions,
 * then each repartition partition as read.
 */
function takenTasks(x: TopologyVerdictInput): Map<string, ModelInput[]> {
  const tasks = new Map<string, ModelInput[]>();
  const add = (records: readonly ModelInput[], committed: ReadonlyMap<number, number> | undefined) => {
    for (const [task, list] of tasksOf(records))
      tasks.set(task, taken(list, committed?.get(list[0]?.partition ?? -1) ?? 0));
  };
  add(x.input, x.committed);
  for (const [topic, records] of x.repartition?.records ?? [])
    add(asModelInput(topic, records), x.repartition?.committed.get(topic));
  return tasks;
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
  const tasks = takenTasks(x);
  const ticks =
    x.input.filter(isTick).length +
    [...(x.repartition?.records.values() ?? [])].flat().filter(isTickMessage).length;
  const result: TopologyResult = {
    inputRecords: x.input.length - x.input.filter(isTick).length,
    ticks,
    ticksUnread: ticks - [...tasks.values()].flat().filter(isTick).length,
    tickOutputs: 0,
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
  if (result.inputRecords !== x.produced)
    add('input', `the input topic holds ${result.inputRecords} records, ${x.produced} were produced`);
  let m: StagedModel;
  try {
    m = runStaged(x.built, tasks);
  } catch (err) {
    add('model', `the reference model refused the input: ${(err as Error).message}`);
    m = { outputs: [], repartition: [], deadLetters: [] };
  }
  result.modelOutputs = m.outputs.length;
  if (ticks > result.ticksUnread) result.tickOutputs = tickFinals(x.built, tasks);
  if (x.repartition) judgeRepartitions(x, x.repartition, tasks, m.repartition, result, add);
  judgeOutputs(x, m.outputs, result, add);
  judgeDeadLetters(x, m.deadLetters, result, add);
  // committed past the last record taken: the end offset, unless a tick's transaction marker (exactly-
  // once) or a tick left unread follows it
  for (const [p, end] of x.ends) {
    const c = x.committed.get(p) ?? (end === 0 ? 0 : -1);
    result.endOffsets += end;
    result.committed += Math.max(0, c);
    const need = Math.min(end, (tasks.get(taskOf(x.input[0]?.topic ?? '', p))?.at(-1)?.offset ?? -1) + 1);
    if (c < need || c > end)
      add(
        'offsets',
        need === end
          ? `input partition ${p}: committed ${c}, end offset ${end}`
          : `input partition ${p}: committed ${c}, its last record read at ${need - 1} (end offset ${end})`,
      );
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
  tasks: ReadonlyMap<string, readonly ModelInput[]>,
  modelRecords: readonly TaskOutput[],
  result: TopologyResult,
  add: Add,
): void {
  for (const f of r.failures) add('repartition', `the harness's reader of the repartition topics: ${f}`);
  const show = (o: { value: string; ts: number; key: string }) =>
    `${clip(shown(o.key), 60)} -> ${showOut({ value: o.value, ts: o.ts, task: '' })}`;
  for (const [topic, partitions] of r.counts) {
    // a tick in a repartition topic is no task's record: its owner made it (judged by what it closes)
    const want = modelRecords.filter((o) => o.topic === topic);
    const written = (r.records.get(topic) ?? []).filter((m) => !isTickMessage(m));
    const c = compareRepartition(x.mode, topic, partitions, want, written, show);
    result.repartitionRecords += c.records;
    result.modelRepartitionRecords += c.modelRecords;
    result.repartitionDuplicates += c.duplicates;
    result.repartitionAmbiguous += c.ambiguous;
    for (const d of c.differences) add('repartition', d);
    const committed = r.committed.get(topic);
    for (let p = 0; p < partitions; p++) {
      const last = tasks.get(taskOf(topic, p))?.at(-1);
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
