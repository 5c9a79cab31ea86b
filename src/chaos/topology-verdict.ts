/**
 * The verdict of a topology chaos run: what the run's output topics, dead-letter topic and committed
 * offsets hold, against the reference model (src/topology/model.ts `runModel`) over the input as it was
 * actually written (read back from the input topic, with its partitions, offsets and timestamps).
 *
 * The model runs once per input partition (one task each: without a repartition topic, which the harness
 * refuses, a task's outputs depend on its partition's records only, so this is the model over the whole
 * input, with each output's input partition known). Per output topic and key (bytes), the outputs are
 * compared as records (value bytes and timestamp):
 *
 * - exactly-once (read_committed): the run's sequence equals the model's, in order, each once;
 * - at-least-once (read_uncommitted): the run's sequence splits into runs, each a contiguous stretch of
 *   the model's sequence; together they hold every model output; a run that starts at or before the
 *   furthest point reached is a replay (its outputs are counted as duplicates, allowed); an output no
 *   run can hold (a value the model never gives that key) is a difference.
 *
 * A key whose model outputs come from more than one input partition (a key changed by map or selectKey)
 * has no order across partitions: its outputs are compared as a multiset (counted apart). Dead letters
 * are compared by (input partition, offset, `redfence-reason`): exactly-once each of the model's once and
 * nothing else; at-least-once the same set, repeats counted as duplicates. Every input partition must be
 * committed to its end offset, and the input topic must hold every record produced.
 */
import { type ModelInput, type ModelOutput, runModel } from '../topology/model.js';
import type { BuiltTopology } from '../topology/types.js';
import type { ReadMessage } from './kafka.js';

export type TopologyCheck = 'input' | 'model' | 'output' | 'dead-letter' | 'offsets';
export const TOPOLOGY_CHECKS: readonly TopologyCheck[] = [
  'input',
  'model',
  'output',
  'dead-letter',
  'offsets',
];

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
}

export interface TopologyResult {
  inputRecords: number;
  modelOutputs: number;
  outputRecords: number;
  /** Output keys (topic and key) compared; in order, and as multisets (outputs from several partitions). */
  keys: number;
  keysUnordered: number;
  /** At-least-once: outputs in replays (allowed), and the replays. */
  duplicateOutputs: number;
  replays: number;
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

type Out = { value: string; ts: number; partition: number };
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

/** The model's outputs and dead letters over the input, task (input partition) by task. */
function model(built: BuiltTopology, input: readonly ModelInput[]) {
  const byPartition = new Map<number, ModelInput[]>();
  for (const r of input) {
    const list = byPartition.get(r.partition) ?? [];
    if (list.length === 0) byPartition.set(r.partition, list);
    list.push(r);
  }
  const outputs: Array<ModelOutput & { partition: number }> = [];
  const deadLetters: string[] = [];
  for (const [partition, records] of [...byPartition].sort((a, b) => a[0] - b[0])) {
    const result = runModel(built, records);
    for (const o of result.outputs) outputs.push({ ...o, partition });
    for (const d of result.deadLetters)
      deadLetters.push(`${d.source.partition}/${d.source.offset}/${d.reason}`);
  }
  return { outputs, deadLetters };
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
  let m: ReturnType<typeof model>;
  try {
    m = model(x.built, x.input);
  } catch (err) {
    add('model', `the reference model refused the input: ${(err as Error).message}`);
    m = { outputs: [], deadLetters: [] };
  }
  result.modelOutputs = m.outputs.length;
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
  modelOutputs: ReadonlyArray<ModelOutput & { partition: number }>,
  result: TopologyResult,
  add: Add,
): void {
  const expected = new Map<string, Out[]>();
  for (const o of modelOutputs)
    push(expected, `${o.topic}\u0000${id(o.key)}`, {
      value: id(o.value),
      ts: o.timestamp,
      partition: o.partition,
    });
  const actual = new Map<string, Out[]>();
  for (const [topic, records] of x.outputs)
    for (const r of records) {
      result.outputRecords++;
      push(actual, `${topic}\u0000${id(r.key)}`, {
        value: id(r.value),
        ts: r.timestamp,
        partition: r.partition,
      });
    }
  const keys = new Set([...expected.keys(), ...actual.keys()]);
  result.keys = keys.size;
  for (const k of [...keys].sort()) {
    const [topic, key] = k.split('\u0000') as [string, string];
    const name = `${topic} key ${clip(shown(key), 60)}`;
    const want = expected.get(k) ?? [];
    const got = actual.get(k) ?? [];
    const ordered = new Set(want.map((o) => o.partition)).size <= 1 && key !== 'null';
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
          `${name} (outputs from several input partitions): ${short} model outputs missing, ${extra} not the model's`,
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
    const p = int(m.headers.get('kafka_dlt-original-partition')?.[0]);
    const o = int(m.headers.get('kafka_dlt-original-offset')?.[0]);
    const reason = m.headers.get('redfence-reason')?.[0]?.toString('utf8') ?? '?';
    const k = `${p ?? '?'}/${o ?? '?'}/${reason}`;
    got.set(k, (got.get(k) ?? 0) + 1);
  }
  for (const [k, n] of want) {
    const g = got.get(k) ?? 0;
    if (g === 0) add('dead-letter', `input record ${k}: the model dead-letters it, the run did not`);
    else if (g > n && x.mode === 'exactly-once')
      add('dead-letter', `input record ${k}: ${g} dead letters, the model ${n}`);
    else if (g > n) result.duplicateDeadLetters += g - n;
  }
  for (const [k, g] of got)
    if (!want.has(k)) add('dead-letter', `input record ${k}: ${g} dead letters, none in the model`);
}
