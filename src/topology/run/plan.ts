/**
 * What the batch executor needs of a built topology, checked once: its sub-topologies, each reading
 * its topics (the user's inputs, or a repartition topic `<applicationId>-<name>-repartition` another
 * sub-topology writes), the graph as children per node, and per aggregation its store ids in the key
 * call (from the store's name: {@link storeIdOf}). A sub-topology reading several topics runs when it
 * keeps no state: a key's fence holds one partition's offset order, so an aggregation reads one topic
 * (`merge(...).repartition()` before the grouping gives it one). Anything the Redis runtime does not run
 * yet is RF_TOPOLOGY_UNSUPPORTED naming the node, before any record is read. A source reading a pattern
 * runs once resolved (patterns.ts: its `topics` are then the ones it matched, sorted), as if it listed them.
 *
 * Fence spaces: each stateful sub-topology's keys follow the offset order of the one topic it reads, so
 * each has its own fence hashes. The first one in plan order (inputs first, then repartition topics as
 * they are written) keeps the application's own, `rf:{<app>:<key>}` (the names every version wrote);
 * each later one has `rf:{<app>@<topic>:<key>}`, its topic naming the space: the space changes exactly
 * when the offset order does (a renamed repartition topic is a new order).
 */
import { RedfenceError } from '../../errors/index.js';
import type { AggregateNode } from '../model-io.js';
import { patternText } from '../patterns.js';
import type { BuiltTopology, TopologyNode } from '../types.js';

/** An aggregation as the key calls see it. */
export interface AggregatePlan {
  readonly node: AggregateNode;
  /** The store id of its values (counts, sessions, serialized aggregates) in the key call. */
  readonly valueStore: number;
  /**
   * The store id of its timestamps (the largest record timestamp per key or sliding window), beside
   * `valueStore`: unwindowed field `v:<timeStore>`, sliding windows hash `:h:<timeStore>`; a time
   * window keeps its timestamp in its own key (field `t`), sessions their end.
   */
  readonly timeStore: number;
  /** The one topic its sub-topology reads: its stamps' partitions and offsets are that topic's. */
  readonly topic: string;
  /** Its fence space (KeyStoreOptions.space): null for the application's own, else `topic`. */
  readonly space: string | null;
}

export type SourceNode = Extract<TopologyNode, { kind: 'source' }>;

/** One topic of a sub-topology as the executor runs it: the sources reading it, and the sub-topology's writes. */
export interface SubPlan {
  readonly id: number;
  readonly topic: string;
  /** Every topic the sub-topology reads (`topic` among them). */
  readonly topics: readonly string[];
  /** True when `topic` is a repartition topic (written by another sub-topology). */
  readonly internal: boolean;
  /** The sources reading `topic`. */
  readonly sources: readonly SourceNode[];
  /** The repartition topics this sub-topology writes. */
  readonly writes: readonly string[];
  /** True when it holds an aggregation (it then reads `topic` alone). */
  readonly stateful: boolean;
  /** The fence space of its key calls: null for the application's own (see above), else `topic`. */
  readonly space: string | null;
}

export interface RunPlan {
  readonly built: BuiltTopology;
  /** The user's first input topic (`inputs[0]`). */
  readonly topic: string;
  /** The user's input topics (those no sub-topology writes), in the order of their sources. */
  readonly inputs: readonly string[];
  /** Every topic the topology reads, by topic: the inputs first, then repartition topics in the order they are written. */
  readonly subs: ReadonlyMap<string, SubPlan>;
  /** The first input's sources (those of `subs.get(topic)`). */
  readonly sources: readonly SourceNode[];
  readonly byName: ReadonlyMap<string, TopologyNode>;
  readonly children: ReadonlyMap<string, readonly string[]>;
  readonly aggregates: ReadonlyMap<string, AggregatePlan>;
}

/**
 * A store's ids in the key call, from its name alone (FNV-1a, odd: the value store; +1: its
 * timestamps; 0 is the processor's own value), so adding, removing or reordering other aggregations
 * never moves a store's state. Renaming a store starts it empty: name your stores, as Kafka Streams
 * advises (a generated name follows the node's position).
 */
export function storeIdOf(name: string): number {
  let h = 0x811c9dc5;
  for (const byte of Buffer.from(name, 'utf8')) {
    h ^= byte;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return 2 * (h % 32_767) + 1;
}

function unsupported(node: string | null, message: string): RedfenceError {
  const where = node === null ? 'topology' : `topology node ${node}`;
  return new RedfenceError('RF_TOPOLOGY_UNSUPPORTED', `${where}: ${message}`, { details: { node } });
}

/**
 * Refuses an aggregation fed (through stateless nodes) by another one in the same sub-topology: a
 * batch makes one round of key calls, and the second's effects follow from the first's results. With
 * repartition() between them each is in its own sub-topology (and fence space), which runs.
 */
function checkChain(
  children: ReadonlyMap<string, readonly string[]>,
  agg: string,
  byName: ReadonlyMap<string, TopologyNode>,
): void {
  const seen = new Set<string>();
  const todo = [...(children.get(agg) ?? [])];
  while (todo.length > 0) {
    const name = todo.pop() as string;
    if (seen.has(name)) continue;
    seen.add(name);
    const n = byName.get(name);
    if (n?.kind === 'aggregate')
      throw unsupported(
        name,
        `an aggregation of ${agg}'s updates in the same sub-topology does not run on Redis yet: ` +
          'put repartition() between them (each aggregation then runs in its own sub-topology)',
      );
    if (n?.kind === 'split') for (const b of n.branches) todo.push(b.name);
    todo.push(...(children.get(name) ?? []));
  }
}

/** An aggregation in a sub-topology reading several topics (a pattern's matches among them, named). */
function severalTopics(
  agg: string,
  sources: readonly SourceNode[],
  topics: readonly string[],
): RedfenceError {
  const patterns = sources.flatMap((s) =>
    s.pattern === null || s.topics === null
      ? []
      : [
          `the pattern ${patternText(s.pattern)} of ${s.name} matched ${s.topics.length} topic${s.topics.length === 1 ? '' : 's'}`,
        ],
  );
  return unsupported(
    agg,
    `an aggregation in a sub-topology reading several topics (${topics.join(', ')}${patterns.length > 0 ? `: ${patterns.join(', ')}` : ''}) does not run on Redis yet: ` +
      "a key's fence holds one offset order; put repartition() between the merge and the grouping, so the aggregation reads one topic",
  );
}

/**
 * Each topic a sub-topology reads, as the sub-topology's view of it; RF_TOPOLOGY_UNSUPPORTED for a pattern
 * not resolved yet (patterns.ts) and for an aggregation in a sub-topology reading several topics.
 */
function subPlansOf(built: BuiltTopology, byName: ReadonlyMap<string, TopologyNode>): SubPlan[] {
  return built.subTopologies.flatMap((sub) => {
    const nodes = sub.nodes.map((n) => byName.get(n) as TopologyNode);
    const sources = nodes.filter((n): n is SourceNode => n.kind === 'source');
    const topics: string[] = [];
    for (const s of sources) {
      if (s.topics === null)
        throw unsupported(
          s.name,
          `its pattern ${patternText(s.pattern as RegExp)} is not resolved: the Redis runtime runs a pattern as the topics it matches at start ` +
            '(TopologyProcessor lists them; patterns.ts resolvePatterns)',
        );
      for (const t of s.topics) if (!topics.includes(t)) topics.push(t);
    }
    const agg = nodes.find((n) => n.kind === 'aggregate');
    if (topics.length > 1 && agg !== undefined) throw severalTopics(agg.name, sources, topics);
    const writes = nodes.flatMap((n) => (n.kind === 'sink' && n.internal ? [n.topic] : []));
    return topics.map((topic) => {
      const reading = sources.filter((s) => s.topics?.includes(topic));
      return {
        id: sub.id,
        topic,
        topics,
        internal: reading.some((s) => s.internal),
        sources: reading,
        writes,
        stateful: agg !== undefined,
        space: null,
      };
    });
  });
}

/** The inputs' views first, then each repartition topic's reader once its writer is placed. */
function ordered(subs: readonly SubPlan[]): Map<string, SubPlan> {
  const out = new Map<string, SubPlan>();
  const todo = subs.filter((s) => !s.internal);
  if (todo.length === 0)
    throw unsupported(null, 'no source reads a topic the topology does not write itself');
  while (todo.length > 0) {
    const sub = todo.shift() as SubPlan;
    if (out.has(sub.topic)) continue;
    out.set(sub.topic, sub);
    for (const t of sub.writes) todo.push(...subs.filter((x) => x.topic === t));
  }
  return out;
}

/** The fence spaces: the first stateful sub-topology keeps the application's own, each later one its topic's. */
function withSpaces(subs: Map<string, SubPlan>): Map<string, SubPlan> {
  let first = true;
  for (const [topic, sub] of subs) {
    if (!sub.stateful) continue;
    if (!first) subs.set(topic, { ...sub, space: topic });
    first = false;
  }
  return subs;
}

/**
 * Checks that the executor can run `built` and returns its plan.
 *
 * @example
 * const plan = planTopology(t.build()); // RF_TOPOLOGY_UNSUPPORTED naming the node otherwise
 * plan.topic; // 'orders'
 * [...plan.subs.keys()]; // ['orders', 'fraud-by-region-repartition'] with a groupBy
 * plan.subs.get('fraud-by-region-repartition')?.space; // null, or the topic after a count on 'orders'
 * plan.inputs; // ['orders', 'refunds'] for t.stream(['orders', 'refunds'])
 */
export function planTopology(built: BuiltTopology): RunPlan {
  const byName = new Map<string, TopologyNode>(built.nodes.map((n) => [n.name, n]));
  const children = new Map<string, string[]>();
  for (const e of built.edges) children.set(e.from, [...(children.get(e.from) ?? []), e.to]);
  const subs = withSpaces(ordered(subPlansOf(built, byName)));
  const subOf = new Map<string, SubPlan>();
  for (const sub of subs.values())
    for (const name of built.subTopologies.find((x) => x.id === sub.id)?.nodes ?? []) subOf.set(name, sub);
  const aggregates = new Map<string, AggregatePlan>();
  for (const n of built.nodes) {
    if (n.kind !== 'aggregate') continue;
    checkChain(children, n.name, byName);
    const valueStore = storeIdOf(n.store);
    const clash = [...aggregates.values()].find((a) => a.valueStore === valueStore);
    if (clash !== undefined)
      throw new RedfenceError(
        'RF_TOPOLOGY_INVALID',
        `store "${n.store}" of ${n.name} has the same id in Redis as store "${clash.node.store}" of ${clash.node.name}: rename one of them`,
        { details: { node: n.name } },
      );
    const sub = subOf.get(n.name); // a stateful sub-topology reads one topic: one view
    if (sub === undefined)
      throw unsupported(
        n.name,
        'its sub-topology reads a repartition topic another sub-topology reads too (a grouping of one grouped stream used twice): ' +
          'repartition() once and aggregate the groupByKey() after it',
      );
    aggregates.set(n.name, {
      node: n,
      valueStore,
      timeStore: valueStore + 1,
      topic: sub.topic,
      space: sub.space,
    });
  }
  const inputs = [...subs.values()].filter((s) => !s.internal).map((s) => s.topic);
  const first = subs.get(inputs[0] as string) as SubPlan;
  return { built, topic: first.topic, inputs, subs, sources: first.sources, byName, children, aggregates };
}
