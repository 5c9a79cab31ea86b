/**
 * The verdict of a topology chaos run: what the run's output topics, dead-letter topic, repartition
 * topics and committed offsets hold, against the reference model (src/topology/model.ts `runModel`) over
 * the input as it was actually written (read back from the input topics, with their partitions, offsets
 * and timestamps).
 *
 * The model runs once per task (src/chaos/topology-stages.ts): each partition of each input topic, and
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
 * repartition after it, or a merge of several input topics: a sub-topology reading several topics
 * keeps no state, so each topic's partition is a task of its own) has no order across tasks: exactly-
 * once, its outputs must be an interleaving of the tasks' sequences, each task's in order and each
 * output once; at-least-once, a multiset (src/chaos/topology-outputs.ts). Dead letters are compared by
 * (topic, partition, offset, `redfence-reason`) of the record they carry (an input record, or a
 * repartition record): exactly-once each of the model's once and nothing else; at-least-once the same
 * set, repeats counted as duplicates. Every partition of every input topic must be committed to its
 * end offset, every repartition partition past its last record, and the input topics must hold every
 * record produced.
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
import { clip, judgeOutputs, type OutputCounts, shown, showOut } from './topology-outputs.js';
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
   * The input topics read back (read_committed in exactly-once mode), topic by topic in partition and
   * offset order, with the records' headers (a tick is known by its header).
   */
  input: readonly ModelInput[];
  /** Each output topic read back (read_committed or read_uncommitted by mode), partition by partition. */
  outputs: ReadonlyMap<string, readonly ReadMessage[]>;
  deadLetters: readonly ReadMessage[];
  /** Each input topic's committed offsets (the group's) and end offsets, per partition. */
  offsets: ReadonlyMap<string, InputOffsets>;
  /** With repartition topics: what they held. */
  repartition?: RepartitionRead;
}

export interface InputOffsets {
  committed: ReadonlyMap<number, number>;
  ends: ReadonlyMap<number, number>;
}

/** The run's counts; the output comparison's (OutputCounts: keys compared, unordered, ambiguous, replays) among them. */
export interface TopologyResult extends OutputCounts {
  /** Records of the input topics read back, ticks not counted; and per topic. */
  inputRecords: number;
  inputTopics: Map<string, number>;
  /** Each input topic's partition count (as read back) and the model's outputs of its tasks. */
  inputPartitions: Map<string, number>;
  modelOutputsByInput: Map<string, number>;
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

/**
 * Each task's records the run took (`taken`: ticks left unread aside): the input topics' partitions,
 * then each repartition partition as read.
 */
function takenTasks(x: TopologyVerdictInput): Map<string, ModelInput[]> {
  const tasks = new Map<string, ModelInput[]>();
  const add = (
    records: readonly ModelInput[],
    committed: (topic: string) => ReadonlyMap<number, number> | undefined,
  ) => {
    for (const [task, list] of tasksOf(records)) {
      const first = list[0];
      tasks.set(task, taken(list, (first && committed(first.topic)?.get(first.partition)) ?? 0));
    }
  };
  add(x.input, (topic) => x.offsets.get(topic)?.committed);
  for (const [topic, records] of x.repartition?.records ?? [])
    add(asModelInput(topic, records), () => x.repartition?.committed.get(topic));
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
  const inputTopics = new Map<string, number>([...x.offsets.keys()].map((t) => [t, 0]));
  for (const r of x.input) if (!isTick(r)) inputTopics.set(r.topic, (inputTopics.get(r.topic) ?? 0) + 1);
  const result: TopologyResult = {
    inputRecords: x.input.length - x.input.filter(isTick).length,
    inputTopics,
    inputPartitions: new Map([...x.offsets].map(([t, o]) => [t, o.ends.size])),
    modelOutputsByInput: new Map([...x.offsets.keys()].map((t) => [t, 0])),
    ticks,
    ticksUnread: ticks - [...tasks.values()].flat().filter(isTick).length,
    tickOutputs: 0,
    modelOutputs: 0,
    outputRecords: 0,
    keys: 0,
    keysUnordered: 0,
    keysAmbiguous: 0,
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
    add(
      'input',
      `the input topic${inputTopics.size > 1 ? 's hold' : ' holds'} ${result.inputRecords} records, ${x.produced} were produced`,
    );
  let m: StagedModel;
  try {
    m = runStaged(x.built, tasks);
  } catch (err) {
    add('model', `the reference model refused the input: ${(err as Error).message}`);
    m = { outputs: [], repartition: [], deadLetters: [] };
  }
  result.modelOutputs = m.outputs.length;
  for (const o of m.outputs) {
    const topic = o.task.slice(0, o.task.lastIndexOf('/'));
    const n = result.modelOutputsByInput.get(topic);
    if (n !== undefined) result.modelOutputsByInput.set(topic, n + 1);
  }
  if (ticks > result.ticksUnread) result.tickOutputs = tickFinals(x.built, tasks);
  if (x.repartition) judgeRepartitions(x, x.repartition, tasks, m.repartition, result, add);
  const o = judgeOutputs(x.mode, x.outputs, m.outputs, (message, key) => add('output', message, key));
  Object.assign(result, o);
  judgeDeadLetters(x, m.deadLetters, result, add);
  // committed past the last record taken: the end offset, unless a tick's transaction marker (exactly-
  // once) or a tick left unread follows it
  for (const [topic, { committed, ends }] of x.offsets)
    for (const [p, end] of ends) {
      const c = committed.get(p) ?? (end === 0 ? 0 : -1);
      result.endOffsets += end;
      result.committed += Math.max(0, c);
      const need = Math.min(end, (tasks.get(taskOf(topic, p))?.at(-1)?.offset ?? -1) + 1);
      const where = x.offsets.size > 1 ? `${topic}/${p}` : `${p}`;
      if (c < need || c > end)
        add(
          'offsets',
          need === end
            ? `input partition ${where}: committed ${c}, end offset ${end}`
            : `input partition ${where}: committed ${c}, its last record read at ${need - 1} (end offset ${end})`,
        );
    }
  result.keysDiffering = differing.size;
  return result;
}

type Add = (check: TopologyCheck, message: string, key?: string) => void;

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
