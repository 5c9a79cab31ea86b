/**
 * build(): the checks of a whole topology (RF_TOPOLOGY_INVALID, the message and details naming the
 * node) and its split into sub-topologies at repartition topics. A stateful step after a key change
 * never lacks its repartition: the builder inserts it, so there is no check for it.
 */
import { RedfenceError } from '../errors/index.js';
import type { Graph } from './graph.js';
import { readsTopic } from './patterns.js';
import type { BuiltTopology, StoreSpec, SubTopology, TopologyNode } from './types.js';
import { windowProblem } from './windows.js';

function invalid(node: string | null, message: string): RedfenceError {
  const where = node === null ? 'topology' : `topology node ${node}`;
  return new RedfenceError('RF_TOPOLOGY_INVALID', `${where}: ${message}`, { details: { node } });
}

/** A `repartition()` topic has one writer, and a positive integer partition count when one is given. */
function checkRepartitions(graph: Graph): void {
  const writers = new Map<string, { node: string; operator: boolean }>();
  for (const n of graph.nodes) {
    if (n.kind !== 'sink' || !n.internal) continue;
    const other = writers.get(n.topic);
    if (other !== undefined && (other.operator || n.repartition !== null))
      throw invalid(
        n.name,
        `the repartition topic ${n.topic} is already written by node ${other.node}: give each repartition() a name of its own`,
      );
    writers.set(n.topic, { node: n.name, operator: n.repartition !== null });
    const count = n.repartition?.partitions ?? null;
    if (count !== null && !(Number.isSafeInteger(count) && count >= 1))
      throw invalid(
        n.name,
        `repartition() numberOfPartitions must be a positive integer, not ${String(count)}`,
      );
  }
}

function check(graph: Graph): void {
  checkRepartitions(graph);
  const names = new Set<string>();
  const stores = new Map<string, string>();
  for (const n of graph.nodes) {
    if (typeof n.name !== 'string' || n.name === '')
      throw invalid(null, 'a node name must be a non-empty string');
    if (names.has(n.name)) throw invalid(n.name, `the node name ${n.name} is used twice`);
    names.add(n.name);
    if (n.kind === 'aggregate') {
      if (n.window !== null) {
        const problem = windowProblem(n.window);
        if (problem !== null) throw invalid(n.name, `${n.window.kind} window: ${problem}`);
      }
      const other = stores.get(n.store);
      if (other !== undefined)
        throw invalid(n.name, `the store name ${n.store} is already used by node ${other}`);
      stores.set(n.store, n.name);
    }
  }
  const sources = graph.nodes.filter((n) => n.kind === 'source' && !n.internal);
  const sinks = graph.nodes.filter((n) => n.kind === 'sink' && !n.internal);
  if (sources.length === 0) throw invalid(null, 'it has no source (call stream() first)');
  if (sinks.length === 0) throw invalid(null, 'it has no sink: end a stream with to(topic)');
  for (const sink of sinks) {
    if (sink.kind !== 'sink') continue;
    for (const src of sources) {
      if (src.kind !== 'source') continue;
      if (readsTopic(src, sink.topic)) {
        throw invalid(sink.name, `writes to ${sink.topic}, which source ${src.name} reads`);
      }
    }
  }
}

/** Connected parts of the graph, edges only (a repartition sink and its source are in different parts). */
function split(graph: Graph): SubTopology[] {
  const parent = new Map<string, string>(graph.nodes.map((n) => [n.name, n.name]));
  const find = (x: string): string => {
    let r = x;
    while (parent.get(r) !== r) r = parent.get(r) as string;
    parent.set(x, r);
    return r;
  };
  for (const e of graph.edges) parent.set(find(e.from), find(e.to));
  const groups = new Map<string, TopologyNode[]>();
  for (const n of graph.nodes) {
    const root = find(n.name);
    groups.set(root, [...(groups.get(root) ?? []), n]);
  }
  return [...groups.values()].map((nodes, id) => {
    const sourceTopics: string[] = [];
    const sourcePatterns: RegExp[] = [];
    const sinkTopics: string[] = [];
    for (const n of nodes) {
      if (n.kind === 'source') {
        if (n.topics !== null) sourceTopics.push(...n.topics);
        if (n.pattern !== null) sourcePatterns.push(n.pattern);
      } else if (n.kind === 'sink') sinkTopics.push(n.topic);
    }
    return Object.freeze({
      id,
      nodes: Object.freeze(nodes.map((n) => n.name)),
      sourceTopics: Object.freeze(sourceTopics),
      sourcePatterns: Object.freeze(sourcePatterns),
      sinkTopics: Object.freeze(sinkTopics),
    });
  });
}

export function checkAndBuild(graph: Graph): BuiltTopology {
  check(graph);
  const stores: StoreSpec[] = [];
  const repartitionTopics: string[] = [];
  for (const n of graph.nodes) {
    if (n.kind === 'aggregate') {
      const kind = n.window === null ? 'key-value' : n.window.kind === 'session' ? 'session' : 'window';
      stores.push(Object.freeze({ name: n.store, node: n.name, kind }));
    }
    if (n.kind === 'sink' && n.internal) repartitionTopics.push(n.topic);
  }
  return Object.freeze({
    applicationId: graph.applicationId,
    nodes: Object.freeze([...graph.nodes]),
    edges: Object.freeze([...graph.edges]),
    subTopologies: Object.freeze(split(graph)),
    stores: Object.freeze(stores),
    repartitionTopics: Object.freeze(repartitionTopics),
  });
}

/**
 * The repartition topics whose partition count the topology fixes (`repartition({ numberOfPartitions })`).
 *
 * @example
 * fixedPartitionCounts(built); // Map { 'app-by-region-repartition' => 6 }
 */
export function fixedPartitionCounts(built: BuiltTopology): Map<string, number> {
  const out = new Map<string, number>();
  for (const n of built.nodes)
    if (n.kind === 'sink' && n.repartition !== null && n.repartition.partitions !== null)
      out.set(n.topic, n.repartition.partitions);
  return out;
}

/** True for what `topology(...).build()` returns (frozen, with its applicationId, nodes and sub-topologies). */
export function isBuiltTopology(x: unknown): x is BuiltTopology {
  const t = x as Partial<BuiltTopology> | null;
  return (
    typeof t === 'object' &&
    t !== null &&
    typeof t.applicationId === 'string' &&
    Array.isArray(t.nodes) &&
    Array.isArray(t.subTopologies) &&
    Object.isFrozen(t)
  );
}
