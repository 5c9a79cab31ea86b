/**
 * A topology module under the chaos harness (`redfence chaos <module>` when the module's default export
 * is a built topology): loading and checking it in the harness's process, the run's topic names in place
 * of the module's (the instances run the same topology on the run's own topics: src/chaos/any-topology.ts),
 * and the default input when the module exports no `chaosInput`.
 *
 * The default input: `n` orders `{ "amount": <1..1000>, "seq": <i> }` keyed by the JSON string `"k-<r>"`
 * (JSON text, so a JSON and a string key serde both read it) over 20 keys
 * (a few hot: Zipf 1.1), record i with the timestamp `<base> + i * 100 ms`, 10% of them up to 5 s
 * early (out of order within a window), 1% six minutes early (late for a 5-minute window with no grace:
 * dead-lettered `late` by such a topology). JSON values, so a topology reading JSON reads them all.
 */
import { RedfenceError } from '../errors/index.js';
import type { BuiltTopology, TopologyNode } from '../topology/index.js';
import {
  type ChaosRandom,
  type ChaosRecord,
  generateInput,
  generatorOf,
  type InputRecord,
  toInputRecord,
} from './module.js';
import { Rng, Zipf } from './rng.js';

const moduleError = (message: string) => new RedfenceError('RF_MODULE_INVALID', message);

/** The run's names for a topology's topics: its one input topic and each external sink topic. */
export interface TopologyTopics {
  input: string;
  /** The module's sink topic -> the run's (in the order the sinks were built). */
  outputs: Map<string, string>;
}

/** The module's external input topic and sink topics, in build order. */
export function topicsOf(built: BuiltTopology): { input: string[]; sinks: string[]; patterns: number } {
  const input: string[] = [];
  const sinks: string[] = [];
  let patterns = 0;
  for (const n of built.nodes) {
    if (n.kind === 'source' && !n.internal) {
      for (const t of n.topics ?? []) if (!input.includes(t)) input.push(t);
      if (n.pattern !== null) patterns++;
    }
    if (n.kind === 'sink' && !n.internal && !sinks.includes(n.topic)) sinks.push(n.topic);
  }
  return { input, sinks, patterns };
}

/**
 * RF_MODULE_INVALID for a topology the harness cannot judge: more than one input topic or a pattern (the
 * run has one input topic), or a repartition topic whose name does not start with the applicationId
 * (the run renames `<applicationId>-<name>-repartition` to its own; src/chaos/topology-stages.ts judges
 * the stages on both sides of a repartition topic).
 */
export function checkChaosTopology(file: string, built: BuiltTopology): void {
  const { input, patterns } = topicsOf(built);
  if (input.length !== 1 || patterns > 0)
    throw moduleError(
      `${file}: redfence chaos runs a topology with one input topic (this one reads ${input.length} topics${patterns > 0 ? ' and a pattern' : ''})`,
    );
  const foreign = built.repartitionTopics.filter((t) => !t.startsWith(`${built.applicationId}-`));
  if (foreign.length > 0)
    throw moduleError(
      `${file}: redfence chaos renames repartition topics <applicationId>-<name>-repartition to the run's; ${foreign.join(', ')} does not start with ${built.applicationId}-`,
    );
}

/** The run's topic names: the input, then the first sink topic as `output`, the next ones `output-<i>`. */
export function chaosTopics(built: BuiltTopology, input: string, output: string): TopologyTopics {
  const { sinks } = topicsOf(built);
  return { input, outputs: new Map(sinks.map((t, i) => [t, i === 0 ? output : `${output}-${i}`])) };
}

/**
 * The same topology on the run's topics, with `applicationId` (the Redis keys' prefix) the run's store
 * name: every node, edge, store and function is the module's; only topic names change (a repartition
 * topic `<module's applicationId>-<name>-repartition` becomes `<app>-<name>-repartition`, as the
 * runtime would name it for that applicationId).
 */
export function onChaosTopics(built: BuiltTopology, topics: TopologyTopics, app: string): BuiltTopology {
  const [from] = topicsOf(built).input;
  const internal = new Set(built.repartitionTopics);
  const rename = (t: string) =>
    t === from
      ? topics.input
      : internal.has(t)
        ? `${app}${t.slice(built.applicationId.length)}`
        : (topics.outputs.get(t) ?? t);
  const nodes = built.nodes.map((n): TopologyNode => {
    if (n.kind === 'source' && n.topics !== null)
      return Object.freeze({ ...n, topics: Object.freeze(n.topics.map(rename)) });
    if (n.kind === 'sink') return Object.freeze({ ...n, topic: rename(n.topic) });
    return n;
  });
  const subTopologies = built.subTopologies.map((s) =>
    Object.freeze({
      ...s,
      sourceTopics: Object.freeze(s.sourceTopics.map(rename)),
      sinkTopics: Object.freeze(s.sinkTopics.map(rename)),
    }),
  );
  return Object.freeze({
    ...built,
    applicationId: app,
    nodes: Object.freeze(nodes),
    subTopologies: Object.freeze(subTopologies),
    repartitionTopics: Object.freeze(built.repartitionTopics.map(rename)),
  });
}

const KEYS = 20;
const STEP_MS = 100;

/** The default input of a topology module without `chaosInput` (see the top of this file). */
export function defaultTopologyInput(rng: Rng, n: number): ChaosRecord[] {
  const zipf = new Zipf(KEYS, 1.1);
  const out: ChaosRecord[] = [];
  for (let i = 0; i < n; i++) {
    const r = zipf.sample(rng);
    const roll = rng.next();
    const early = roll < 0.01 ? 6 * 60_000 : roll < 0.11 ? rng.int(5000) : 0;
    out.push({
      key: JSON.stringify(`k-${r}`),
      value: { amount: rng.range(1, 1000), seq: i },
      timestamp: Math.max(0, i * STEP_MS - early),
    });
  }
  return out;
}

/** A topology module as the harness holds it: where it is, its topology, its records' generator. */
export interface LoadedTopology {
  path: string;
  built: BuiltTopology;
  generator?: (rng: ChaosRandom, n: number) => Iterable<ChaosRecord>;
}

/**
 * Loads `file` as `redfence run` does; undefined when its default export is not a built topology (a
 * processor or handler module), RF_MODULE_INVALID when it is one the harness cannot run or judge.
 */
export async function loadChaosTopology(file: string): Promise<LoadedTopology | undefined> {
  const { loadRunnable } = await import('../loader/load.js');
  const { isBuiltTopology } = await import('../topology/build.js');
  const loaded = await loadRunnable(file);
  if (!isBuiltTopology(loaded)) return undefined;
  checkChaosTopology(file, loaded);
  const { planTopology } = await import('../topology/run/plan.js');
  try {
    planTopology(loaded);
  } catch (err) {
    throw moduleError(`${file}: ${(err as Error).message}`);
  }
  return { ...(await generatorOf(file)), built: loaded };
}

/** The records of a topology run: its `chaosInput` (seeded), or the default input. */
export function topologyInput(m: LoadedTopology, seed: number, n: number): InputRecord[] {
  if (m.generator) return generateInput(m, seed, n);
  const where = (i: number) => `default input record ${i}`;
  return defaultTopologyInput(new Rng(seed, 'module-input'), n).map((r, i) =>
    toInputRecord(r, where(i), moduleError),
  );
}
