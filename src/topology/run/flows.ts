/**
 * Records in and out of each node of one batch's walk, for the per-node metrics of the topology
 * processor (docs/streams.md, "Metrics"). Counted in plain numbers as the walk goes, handed over once per
 * batch: no metric call per record. A node's `in` is the records that reached it; its `out` the records
 * it forwarded (a filter's passed records, each record of a flatMap, a split's routed records, an
 * aggregation's updates or final results, a sink's written records; a source's are its topic's records).
 */

/** One node's counts in a batch. */
export interface NodeFlow {
  readonly in: number;
  readonly out: number;
}

/** The counts of one batch, by node name (nodes nothing reached are absent). */
export type NodeFlows = ReadonlyMap<string, NodeFlow>;

/**
 * Counts a batch's records per node.
 *
 * @example
 * const tally = new FlowTally();
 * tally.in('KSTREAM-FILTER-0000000001');
 * tally.out('KSTREAM-FILTER-0000000001');
 * tally.flows().get('KSTREAM-FILTER-0000000001'); // { in: 1, out: 1 }
 */
export class FlowTally {
  readonly #counts = new Map<string, { in: number; out: number }>();

  /** A record reached `node`. */
  in(node: string): void {
    this.#of(node).in++;
  }

  /** `node` forwarded a record. */
  out(node: string): void {
    this.#of(node).out++;
  }

  /** The counts so far. */
  flows(): NodeFlows {
    return this.#counts;
  }

  /** `node`'s counts, to add to in place (a walk keeps them per node: one lookup per batch). */
  of(node: string): { in: number; out: number } {
    return this.#of(node);
  }

  #of(node: string): { in: number; out: number } {
    let c = this.#counts.get(node);
    if (c === undefined) {
      c = { in: 0, out: 0 };
      this.#counts.set(node, c);
    }
    return c;
  }
}
