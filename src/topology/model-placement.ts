/**
 * The reference model's partition check (the processor's, docs/streams.md "The partition check"): a
 * keyed record read by a sub-topology that keeps state per key, or from a repartition topic, whose key
 * murmur2 places on another partition of its topic's count is refused before it is walked. A stateful
 * sub-topology's fence is per key, so a key read from two partitions would be written by two owners.
 * And where the model places a repartition record: its topic's partition count.
 */
import { misplacedKey } from '../partitioner/index.js';
import type { ModelInput, ModelMisplaced } from './model-types.js';
import { matchesWhole } from './patterns.js';
import type { BuiltTopology, SubTopology, TopologyNode } from './types.js';

export class Placement {
  /** The first node of each sub-topology holding an aggregation, by every node's name. */
  readonly #stateful = new Set<string>();
  /** Each node's sub-topology. */
  readonly #subOf = new Map<string, SubTopology>();

  constructor(
    built: BuiltTopology,
    /** The input topics whose partition count was given (ModelOptions.partitions): only those are checked. */
    private readonly counted: ReadonlySet<string>,
  ) {
    const kinds = new Map(built.nodes.map((n) => [n.name, n.kind]));
    for (const s of built.subTopologies) {
      for (const n of s.nodes) this.#subOf.set(n, s);
      if (s.nodes.some((n) => kinds.get(n) === 'aggregate')) for (const n of s.nodes) this.#stateful.add(n);
    }
  }

  /**
   * A repartition topic's partition count: repartition()'s numberOfPartitions, else the largest count
   * among the inputs of the sink's sub-topology (kept in `partitions` as the topic's count).
   */
  repartitionCount(sink: Extract<TopologyNode, { kind: 'sink' }>, partitions: Map<string, number>): number {
    const fixed = sink.repartition?.partitions ?? null;
    if (fixed !== null) return fixed;
    const known = partitions.get(sink.topic);
    if (known !== undefined) return known;
    const sub = this.#subOf.get(sink.name);
    let count = 1;
    for (const [topic, n] of partitions) {
      const reads =
        sub?.sourceTopics.includes(topic) === true ||
        sub?.sourcePatterns.some((p) => matchesWhole(p, topic)) === true;
      if (reads) count = Math.max(count, n);
    }
    partitions.set(sink.topic, count);
    return count;
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
