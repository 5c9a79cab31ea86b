/**
 * The stateless part of a sub-topology, record by record, as the reference model walks it (depth first,
 * children in the order they were attached): filters, maps, splits, peeks, merges and sinks run here;
 * an aggregation is handed to the caller, which runs it through the key call and then walks on from it.
 * The graph is looked up once per plan (nodes with their children and split branches in place), and a
 * record's walk allocates only the records its maps make: no closure or lookup per node.
 */

import type { AggregateNode, ModelRecord } from '../model-io.js';
import { toBytes } from '../serdes.js';
import type { TopologyNode } from '../types.js';
import type { FlowTally } from './flows.js';
import type { RunPlan } from './plan.js';

/** What a walk meets: a sink record (also to a repartition topic), or a record reaching an aggregation. */
export interface WalkSink {
  /** A sink's record (its fields, not an object: the sink makes the one it keeps). */
  output(topic: string, key: Buffer | null, value: Buffer | null, timestamp: number): void;
  aggregate(node: AggregateNode, r: ModelRecord): void;
  /** A record a grouping's repartition sink drops: its key is null (its aggregation would drop it). */
  dropNullKey(node: string): void;
  /** Counts each node's records in and out (per-node metrics). */
  readonly tally: FlowTally;
  /** The node whose code (a user function or a serde) runs: the one a throw names. */
  at: string;
}

/** A node of the plan's graph with its children (and a split's branches) in place. */
export interface GraphNode {
  readonly name: string;
  readonly node: TopologyNode;
  readonly children: GraphNode[];
  /** A split's branches, in order: the first whose predicate holds (null: the default) takes the record. */
  readonly branches: {
    readonly predicate: ((k: unknown, v: unknown) => unknown) | null;
    target: GraphNode;
  }[];
  /** The tally this node counted in last and its counts there ({@link flowOf}: no lookup per record). */
  tally: FlowTally | null;
  flow: { in: number; out: number };
}

/** Node `g`'s counts in `tally` (looked up when the tally is not the one it counted in last). */
export function flowOf(g: GraphNode, tally: FlowTally): { in: number; out: number } {
  if (g.tally !== tally) {
    g.flow = tally.of(g.name);
    g.tally = tally;
  }
  return g.flow;
}

const graphs = new WeakMap<RunPlan, ReadonlyMap<string, GraphNode>>();

/** The plan's nodes with their children in place (once per plan). */
function graphOf(plan: RunPlan): ReadonlyMap<string, GraphNode> {
  let g = graphs.get(plan);
  if (g !== undefined) return g;
  const nodes = new Map<string, GraphNode>();
  for (const [name, node] of plan.byName)
    nodes.set(name, { name, node, children: [], branches: [], tally: null, flow: { in: 0, out: 0 } });
  const at = (name: string) => {
    const n = nodes.get(name);
    if (n === undefined) throw new TypeError(`no node ${name}`);
    return n;
  };
  for (const n of nodes.values()) {
    for (const child of plan.children.get(n.name) ?? []) n.children.push(at(child));
    if (n.node.kind === 'split')
      for (const b of n.node.branches) n.branches.push({ predicate: b.predicate, target: at(b.name) });
  }
  g = nodes;
  graphs.set(plan, g);
  return g;
}

/** Node `name` of the plan's graph (to walk from with {@link children}, to count with {@link flowOf}); none: undefined. */
export function graphNode(plan: RunPlan, name: string): GraphNode | undefined {
  return graphOf(plan).get(name);
}

/** Node `n` forwards `r` to its children (counted as one record out of `n`). */
function forward(n: GraphNode, r: ModelRecord, to: WalkSink): void {
  flowOf(n, to.tally).out++;
  children(n, r, to);
}

/** Walks `r` on from node `n` (its children and on). */
export function children(n: GraphNode, r: ModelRecord, to: WalkSink): void {
  const kids = n.children;
  for (let i = 0; i < kids.length; i++) visit(kids[i] as GraphNode, r, to);
}

function visit(g: GraphNode, r: ModelRecord, to: WalkSink): void {
  const n = g.node;
  const name = g.name;
  flowOf(g, to.tally).in++;
  to.at = name;
  switch (n.kind) {
    case 'source':
      return;
    case 'filter':
      if (Boolean(n.predicate(r.key, r.value)) !== n.not) forward(g, r, to);
      return;
    case 'map': {
      const [key, value] = n.mapper(r.key, r.value) as readonly [unknown, unknown];
      forward(g, { key, value, timestamp: r.timestamp }, to);
      return;
    }
    case 'mapValues':
      forward(g, { key: r.key, value: n.mapper(r.key, r.value), timestamp: r.timestamp }, to);
      return;
    case 'selectKey':
      forward(g, { key: n.mapper(r.key, r.value), value: r.value, timestamp: r.timestamp }, to);
      return;
    case 'flatMap':
      // the mapper's iterable runs between its records' walks: `at` names it again for each
      for (const [key, value] of n.mapper(r.key, r.value) as Iterable<readonly [unknown, unknown]>) {
        forward(g, { key, value, timestamp: r.timestamp }, to);
        to.at = name;
      }
      return;
    case 'flatMapValues':
      for (const value of n.mapper(r.key, r.value) as Iterable<unknown>) {
        forward(g, { key: r.key, value, timestamp: r.timestamp }, to);
        to.at = name;
      }
      return;
    case 'peek':
      n.action(r.key, r.value);
      forward(g, r, to);
      return;
    case 'branch':
    case 'merge':
    case 'toStream':
      forward(g, r, to);
      return;
    case 'split': {
      for (const b of g.branches)
        if (b.predicate === null || b.predicate(r.key, r.value)) {
          flowOf(g, to.tally).out++;
          visit(b.target, r, to);
          return;
        }
      return;
    }
    case 'sink': {
      // an output topic, or a repartition topic (placed by the key's murmur2 when produced)
      const key = toBytes(n.keySerde, r.key, n.topic);
      const value = toBytes(n.valueSerde, r.value, n.topic);
      // a grouping's repartition drops a null key (its aggregation would); repartition() writes it on
      if (n.internal && n.repartition === null && key === null) to.dropNullKey(name);
      else {
        flowOf(g, to.tally).out++;
        to.output(n.topic, key, value, r.timestamp);
      }
      return;
    }
    case 'aggregate':
      // its out: the updates and final results forward.ts walks on from it
      to.aggregate(n, r);
      return;
  }
}
