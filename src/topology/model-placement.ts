/**
 * The reference model's partition check (the processor's, docs/streams.md "The partition check"): a
 * keyed record read by a sub-topology that keeps state per key, or from a repartition topic, whose key
 * murmur2 places on another partition of its topic's count is refused before it is walked. A stateful
 * sub-topology's fence is per key, so a key read from two partitions would be written by two owners.
 */
import { misplacedKey } from '../partitioner/index.js';
import type { ModelInput, ModelMisplaced } from './model-types.js';
import type { BuiltTopology, TopologyNode } from './types.js';

export class Placement {
  /** The first node of each sub-topology holding an aggregation, by every node's name. */
  readonly #stateful = new Set<string>();

  constructor(
    built: BuiltTopology,
    /** The input topics whose partition count was given (ModelOptions.partitions): only those are checked. */
    private readonly counted: ReadonlySet<string>,
  ) {
    const kinds = new Map(built.nodes.map((n) => [n.name, n.kind]));
    for (const s of built.subTopologies)
      if (s.nodes.some((n) => kinds.get(n) === 'aggregate')) for (const n of s.nodes) this.#stateful.add(n);
  }

  /** The record's dead letter when the check refuses it; null when it passes or is not checked. */
  check(rec: ModelInput, sources: readonly TopologyNode[], count: number | undefined): ModelMisplaced | null {
    const source = sources[0];
    if (rec.key === null || count === undefined || source?.kind !== 'source') return null;
    if (!source.internal && !(this.counted.has(rec.topic) && this.#stateful.has(source.name))) return null;
    const expected = misplacedKey(rec.key, rec.partition, count);
    if (expected === null) return null;
    return { reason: 'wrong-partition', node: source.name, expected, partitions: count, source: rec };
  }
}
