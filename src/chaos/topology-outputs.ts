/**
 * A topology chaos run's outputs against the model's, per output topic and key (bytes), each output a
 * record (value bytes and timestamp): src/chaos/topology-verdict.ts calls it with the model's outputs
 * per task (src/chaos/topology-stages.ts).
 *
 * - A key whose model outputs come from one task: exactly-once (read_committed), the model's sequence in
 *   order, each once; at-least-once (read_uncommitted), runs of contiguous stretches of it with replays
 *   allowed (src/chaos/output-runs.ts).
 * - A key whose model outputs come from several tasks (a key changed by map or selectKey with no
 *   repartition after it; a merge of several input topics, whose sub-topology keeps no state, so each
 *   topic's partition is a task of its own; a null key): the tasks run side by side, so only each task's
 *   own order is fixed. Exactly-once: the run's sequence must be an interleaving of the tasks'
 *   sequences, each task's in its order and each output once (as a repartition partition is judged);
 *   when two tasks' next outputs are the same the first task is taken, and a key that then does not
 *   pass is compared as a multiset (counted as ambiguous). At-least-once: a multiset, each model output
 *   at least as often, more of one the model has a replay's (allowed).
 */
import type { ReadMessage } from './kafka.js';
import { firstDifference, multiset, type Out, replayRuns } from './output-runs.js';
import { interleaving, type TaskOutput } from './topology-stages.js';

const id = (b: Buffer | null) => (b === null ? 'null' : b.toString('hex'));
export const clip = (s: string, n = 120) => (s.length <= n ? s : `${s.slice(0, n)}... (${s.length} chars)`);
export const shown = (hex: string): string => {
  if (hex === 'null') return '<null>';
  const b = Buffer.from(hex, 'hex');
  const text = b.toString('utf8');
  return Buffer.from(text, 'utf8').equals(b) ? text : `<base64:${b.toString('base64')}>`;
};
export const showOut = (o: Out | undefined) => (o ? `${clip(shown(o.value))} @${o.ts}` : 'none');
const sameOut = (a: Out, b: Out) => a.value === b.value && a.ts === b.ts;

function push<T>(m: Map<string, T[]>, k: string, v: T): void {
  const list = m.get(k);
  if (list) list.push(v);
  else m.set(k, [v]);
}

/** What the comparison counted (the verdict's result takes these fields). */
export interface OutputCounts {
  outputRecords: number;
  /**
   * Output keys (topic and key) compared; of them from several tasks (no order across them), and of those
   * compared as multisets (at-least-once, or exactly-once when two tasks' next outputs were the same and
   * the interleaving did not pass: ambiguous).
   */
  keys: number;
  keysUnordered: number;
  keysAmbiguous: number;
  /** At-least-once: outputs in replays (allowed), and the replays. */
  duplicateOutputs: number;
  replays: number;
}

/**
 * Compares `outputs` (each output topic as read) with the model's `modelOutputs`; `add(message, key)`
 * takes each difference, `key` naming the topic and key.
 */
export function judgeOutputs(
  mode: 'exactly-once' | 'at-least-once',
  outputs: ReadonlyMap<string, readonly ReadMessage[]>,
  modelOutputs: readonly TaskOutput[],
  add: (message: string, key: string) => void,
): OutputCounts {
  const c: OutputCounts = {
    outputRecords: 0,
    keys: 0,
    keysUnordered: 0,
    keysAmbiguous: 0,
    duplicateOutputs: 0,
    replays: 0,
  };
  const expected = new Map<string, Out[]>();
  for (const o of modelOutputs)
    push(expected, `${o.topic}\u0000${id(o.key)}`, { value: id(o.value), ts: o.timestamp, task: o.task });
  const actual = new Map<string, Out[]>();
  for (const [topic, records] of outputs)
    for (const r of records) {
      c.outputRecords++;
      push(actual, `${topic}\u0000${id(r.key)}`, { value: id(r.value), ts: r.timestamp, task: '' });
    }
  const keys = new Set([...expected.keys(), ...actual.keys()]);
  c.keys = keys.size;
  for (const k of [...keys].sort()) {
    const [topic, key] = k.split('\u0000') as [string, string];
    const name = `${topic} key ${clip(shown(key), 60)}`;
    const want = expected.get(k) ?? [];
    const got = actual.get(k) ?? [];
    const tasks = new Map<string, Out[]>();
    for (const o of want) push(tasks, o.task, o);
    if (tasks.size > 1 || key === 'null') {
      c.keysUnordered++;
      const message = severalTasks(mode, tasks, want, got, c);
      if (message !== undefined) add(`${name} (outputs from ${tasks.size} tasks): ${message}`, k);
      continue;
    }
    if (mode === 'exactly-once') {
      const i = firstDifference(want, got);
      if (i >= 0)
        add(
          `${name}: ${got.length} outputs, the model ${want.length}; first difference at #${i}: ${showOut(got[i])} in the run, ${showOut(want[i])} in the model`,
          k,
        );
      continue;
    }
    const r = replayRuns(want, got);
    c.duplicateOutputs += r.duplicates;
    c.replays += r.replays;
    const parts = [
      ...(r.missing.length > 0
        ? [`${r.missing.length} model outputs missing (first ${showOut(r.missing[0])})`]
        : []),
      ...(r.strays.length > 0
        ? [`${r.strays.length} outputs not the model's (first ${showOut(r.strays[0])})`]
        : []),
    ];
    if (parts.length > 0) add(`${name}: ${parts.join(', ')}`, k);
  }
  return c;
}

/** A key with outputs from several tasks (see the top of this file): what differs, or undefined. */
function severalTasks(
  mode: 'exactly-once' | 'at-least-once',
  tasks: ReadonlyMap<string, readonly Out[]>,
  want: readonly Out[],
  got: readonly Out[],
  c: OutputCounts,
): string | undefined {
  let order = '';
  if (mode === 'exactly-once') {
    const r = interleaving(tasks, got, sameOut);
    if (r.ok) return undefined;
    if (r.ambiguous) c.keysAmbiguous++;
    else if (r.bad) order = `output #${r.bad.at} (${showOut(r.bad.rec)}) is out of its task's order`;
  }
  const a = multiset(want);
  const b = multiset(got);
  let extra = 0;
  let short = 0;
  for (const [v, n] of a) short += Math.max(0, n - (b.get(v) ?? 0));
  for (const [v, n] of b) {
    const over = n - (a.get(v) ?? 0);
    if (over > 0 && (mode === 'exactly-once' || !a.has(v))) extra += over;
    else if (over > 0) c.duplicateOutputs += over;
  }
  if (short + extra > 0)
    return `${got.length} outputs, the model ${want.length}; ${short} model outputs missing, ${extra} not the model's${mode === 'exactly-once' ? ' or repeated' : ''}`;
  return order === '' ? undefined : order;
}
