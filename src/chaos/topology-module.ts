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
 * A topology listing several input topics gets each record on one of them, drawn evenly, and each
 * topic its own event time: topic j's records `j * 2 s` behind the first topic's (per-topic clocks, so
 * where their records meet, behind a merge and a repartition, their order in event time is the run's).
 */
import { RedfenceError } from '../errors/index.js';
import type { BuiltTopology } from '../topology/index.js';
import {
  type ChaosRandom,
  type ChaosRecord,
  generateInput,
  generatorOf,
  type InputRecord,
  toInputRecord,
} from './module.js';
import { Rng, Zipf } from './rng.js';
import { topicsOf } from './topology-topics.js';

const moduleError = (message: string) => new RedfenceError('RF_MODULE_INVALID', message);

export {
  chaosTopics,
  onChaosTopics,
  runInputTopics,
  type TopologyTopics,
  topicsOf,
} from './topology-topics.js';

/**
 * RF_MODULE_INVALID for a topology the harness cannot judge: a repartition topic whose name does not
 * start with the applicationId (the run renames `<applicationId>-<name>-repartition` to its own;
 * src/chaos/topology-stages.ts judges the stages on both sides of a repartition topic). Several input
 * topics and patterns run on the run's own topics (src/chaos/topology-topics.ts), checked with the
 * records (runInputTopics).
 */
export function checkChaosTopology(file: string, built: BuiltTopology): void {
  const foreign = built.repartitionTopics.filter((t) => !t.startsWith(`${built.applicationId}-`));
  if (foreign.length > 0)
    throw moduleError(
      `${file}: redfence chaos renames repartition topics <applicationId>-<name>-repartition to the run's; ${foreign.join(', ')} does not start with ${built.applicationId}-`,
    );
}

const KEYS = 20;
const STEP_MS = 100;
/** How far each further input topic's event time is behind the one before it (the default input). */
export const TOPIC_LAG_MS = 2000;

/**
 * The default input of a topology module without `chaosInput` (see the top of this file); `topics`:
 * its listed input topics (with more than one, each record names one of them).
 */
export function defaultTopologyInput(rng: Rng, n: number, topics: readonly string[] = []): ChaosRecord[] {
  const zipf = new Zipf(KEYS, 1.1);
  const out: ChaosRecord[] = [];
  for (let i = 0; i < n; i++) {
    const r = zipf.sample(rng);
    const roll = rng.next();
    const early = roll < 0.01 ? 6 * 60_000 : roll < 0.11 ? rng.int(5000) : 0;
    const amount = rng.range(1, 1000);
    // drawn only with several topics: one topic's input stays what it was for every seed
    const j = topics.length > 1 ? rng.int(topics.length) : 0;
    out.push({
      key: JSON.stringify(`k-${r}`),
      value: { amount, seq: i },
      timestamp: Math.max(0, i * STEP_MS - early - j * TOPIC_LAG_MS),
      ...(topics.length > 1 ? { topic: topics[j] as string } : {}),
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
  const { patternStandIns } = await import('../topology/patterns.js');
  try {
    // a pattern stands for one topic here; runInputTopics checks it on the records' topics
    planTopology(patternStandIns(loaded));
  } catch (err) {
    throw moduleError(`${file}: ${(err as Error).message}`);
  }
  return { ...(await generatorOf(file)), built: loaded };
}

/** The records of a topology run: its `chaosInput` (seeded), or the default input. */
export function topologyInput(m: LoadedTopology, seed: number, n: number): InputRecord[] {
  if (m.generator) return generateInput(m, seed, n);
  const where = (i: number) => `default input record ${i}`;
  return defaultTopologyInput(new Rng(seed, 'module-input'), n, topicsOf(m.built).input).map((r, i) =>
    toInputRecord(r, where(i), moduleError),
  );
}
