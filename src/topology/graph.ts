/**
 * The mutable graph a topology builder fills: nodes in creation order, edges, and the Kafka Streams style
 * name generator (`KSTREAM-FILTER-0000000001`: one counter for nodes and stores, as Kafka Streams keeps).
 */
import { RedfenceError } from '../errors/index.js';
import { type Serde, serdes } from './serdes.js';
import type { TopologyEdge, TopologyNode } from './types.js';

export class Graph {
  readonly nodes: TopologyNode[] = [];
  readonly edges: TopologyEdge[] = [];
  /**
   * The source reading a named grouping's repartition topic, by the grouped node and the topic: every
   * aggregation of that grouped stream reads it (aggregation.ts).
   */
  readonly groupedSources = new Map<string, string>();
  private index = 0;

  constructor(readonly applicationId: string) {}

  /** The next generated name with a prefix, e.g. `KSTREAM-MAP-0000000003`. */
  newName(prefix: string): string {
    const n = String(this.index++).padStart(10, '0');
    return `${prefix}-${n}`;
  }

  /** Adds a node fed by `parents` (in order); returns its name. */
  add(node: TopologyNode, parents: readonly string[]): string {
    this.nodes.push(Object.freeze(node));
    for (const from of parents) this.edges.push(Object.freeze({ from, to: node.name }));
    return node.name;
  }

  /** The name a user gave (`{ name }`) or a generated one. */
  nameOr(given: string | undefined, prefix: string): string {
    return given ?? this.newName(prefix);
  }
}

/** The default serde of keys, values and stores. */
export const DEFAULT_SERDE: Serde<unknown> = serdes.json();

/** Refuses an operator argument that is not a function (at the call, before any build). */
export function mustBeFunction(operator: string, value: unknown): void {
  if (typeof value !== 'function') {
    throw new RedfenceError('RF_INVALID_ARGUMENT', `${operator}: expects a function`);
  }
}
