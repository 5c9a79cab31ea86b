/**
 * Sources reading a pattern: the one rule of which topics a source reads (the reference model's and the
 * Redis runtime's), and a pattern's resolution to the topics it matches, as the topology processor
 * makes it at start.
 *
 * Kafka Streams matches a topic's whole name (`Pattern.matcher(topic).matches()`): the builder anchors
 * each pattern (`^(?:...)$`, topology.ts), so a test of it is a whole-name match. The resolution leaves
 * out the application's own topics (its repartition topics, the topics its sinks write, dead-letter
 * topics `*.DLT` and the names in `exclude`), sorts the rest and gives a built topology whose pattern
 * sources list them, their `pattern` kept for what describes them: planTopology runs it as if each
 * source had listed its topics. A topic made after the resolution is read after the next start (Kafka
 * Streams picks it up while it runs: docs/streams.md, "Sources reading a pattern").
 */
import { RedfenceError } from '../errors/index.js';
import type { BuiltTopology, SubTopology, TopologyNode } from './types.js';

type SourceNode = Extract<TopologyNode, { kind: 'source' }>;

/** What one pattern source matched at a resolution. */
export interface PatternMatch {
  /** The source node's name. */
  readonly node: string;
  /** The pattern as the user wrote it (`/orders-.*\/`). */
  readonly pattern: string;
  /** The topics it reads, sorted. */
  readonly topics: readonly string[];
}

/** A built topology whose pattern sources list the topics they matched, and what each matched. */
export interface ResolvedTopology {
  readonly built: BuiltTopology;
  readonly matches: readonly PatternMatch[];
}

/**
 * Whether a source reads `topic`: listed by name, or matched as a whole by its pattern.
 *
 * @example
 * readsTopic(source, 'orders-eu'); // true for t.stream(/orders-.*\/), false for 'old-orders-eu'
 */
export function readsTopic(source: SourceNode, topic: string): boolean {
  return (
    source.topics?.includes(topic) === true ||
    (source.pattern !== null && matchesWhole(source.pattern, topic))
  );
}

/**
 * Whether a source pattern (anchored by the builder, without `g` or `y`: test() keeps no position)
 * matches `topic` as a whole.
 *
 * @example
 * matchesWhole(built.subTopologies[0].sourcePatterns[0], 'orders-eu'); // true for /orders-.*\/
 */
export function matchesWhole(pattern: RegExp, topic: string): boolean {
  return pattern.test(topic);
}

/**
 * A source pattern as the user wrote it, without the builder's anchors.
 *
 * @example
 * patternText(source.pattern); // '/orders-.*\/' for t.stream(/orders-.*\/)
 */
export function patternText(pattern: RegExp): string {
  const s = pattern.source;
  const inner = s.startsWith('^(?:') && s.endsWith(')$') ? s.slice(4, -2) : s;
  return `/${inner}/${pattern.flags}`;
}

/**
 * True when some source reads a pattern not resolved yet (its `topics` is null).
 *
 * @example
 * hasPatterns(t.build()); // true after t.stream(/orders-.*\/)
 */
export function hasPatterns(built: BuiltTopology): boolean {
  return built.nodes.some((n) => n.kind === 'source' && n.topics === null);
}

/** `built` with each unresolved pattern source reading `topicsOf(source)` (frozen, as build() gives it). */
function withSourceTopics(
  built: BuiltTopology,
  topicsOf: (s: SourceNode) => readonly string[],
): BuiltTopology {
  const listed = new Map<string, readonly string[]>();
  const nodes = built.nodes.map((n) => {
    if (n.kind !== 'source' || n.topics !== null) return n;
    const topics = Object.freeze([...topicsOf(n)]);
    listed.set(n.name, topics);
    return Object.freeze({ ...n, topics });
  });
  const subTopologies = built.subTopologies.map(
    (sub): SubTopology =>
      Object.freeze({
        ...sub,
        sourceTopics: Object.freeze([...sub.sourceTopics, ...sub.nodes.flatMap((n) => listed.get(n) ?? [])]),
      }),
  );
  return Object.freeze({
    ...built,
    nodes: Object.freeze(nodes),
    subTopologies: Object.freeze(subTopologies),
  });
}

/**
 * `built` with each pattern source standing for one topic named by its pattern (`/orders-.*\/`, a name
 * no Kafka topic has): what can be checked of a topology before its patterns are resolved
 * (planTopology's refusals but the one a resolution decides: several topics into an aggregation).
 *
 * @example
 * planTopology(patternStandIns(t.build())).inputs; // ['/orders-.*\/']
 */
export function patternStandIns(built: BuiltTopology): BuiltTopology {
  if (!hasPatterns(built)) return built;
  return withSourceTopics(built, (s) => [patternText(s.pattern as RegExp)]);
}

function unmatched(node: string, pattern: string): RedfenceError {
  return new RedfenceError(
    'RF_TOPIC_PATTERN_UNMATCHED',
    `topology node ${node}: its pattern ${pattern} matches no topic (the application's own repartition, sink and *.DLT topics left out): ` +
      'create a topic it matches (redfence never creates the topics it reads), or fix the pattern, then start again',
    { details: { node, pattern } },
  );
}

function readTwice(node: string, pattern: string, topic: string, other: string): RedfenceError {
  return new RedfenceError(
    'RF_TOPOLOGY_INVALID',
    `topology node ${node}: its pattern ${pattern} matches topic ${topic}, which source ${other} reads too: ` +
      'Kafka Streams refuses a topic read by two sources; make the pattern leave it out',
    { details: { node, pattern, topic, other } },
  );
}

/** Options of {@link resolvePatterns}. */
export interface ResolveOptions {
  /** More topics of the application's own to leave out (a dead-letter topic not named `*.DLT`). */
  readonly exclude?: readonly string[];
}

/**
 * Resolves each pattern source against the cluster's topics (`await port.listTopics()`):
 * RF_TOPIC_PATTERN_UNMATCHED naming the node and the pattern when one matches none, RF_TOPOLOGY_INVALID
 * when a matched topic is read by another source too (by name or by another pattern), as Kafka Streams
 * refuses it.
 *
 * @example
 * const { built: resolved, matches } = resolvePatterns(t.build(), ['orders-eu', 'orders-us', 'refunds']);
 * matches; // [{ node: 'KSTREAM-SOURCE-0000000000', pattern: '/orders-.*\/', topics: ['orders-eu', 'orders-us'] }]
 * planTopology(resolved).inputs; // ['orders-eu', 'orders-us']
 */
export function resolvePatterns(
  built: BuiltTopology,
  listed: readonly string[],
  options: ResolveOptions = {},
): ResolvedTopology {
  if (!hasPatterns(built)) return { built, matches: [] };
  const own = new Set([...built.subTopologies.flatMap((s) => s.sinkTopics), ...(options.exclude ?? [])]);
  const candidates = [...new Set(listed)].filter((t) => !own.has(t) && !t.endsWith('.DLT')).sort();
  const readBy = new Map<string, string>();
  for (const n of built.nodes)
    if (n.kind === 'source' && n.topics !== null) for (const t of n.topics) readBy.set(t, n.name);
  const matches: PatternMatch[] = [];
  for (const n of built.nodes) {
    if (n.kind !== 'source' || n.topics !== null || n.pattern === null) continue;
    const pattern = patternText(n.pattern);
    const topics = candidates.filter((t) => matchesWhole(n.pattern as RegExp, t));
    if (topics.length === 0) throw unmatched(n.name, pattern);
    for (const t of topics) {
      const other = readBy.get(t);
      if (other !== undefined) throw readTwice(n.name, pattern, t, other);
      readBy.set(t, n.name);
    }
    matches.push(Object.freeze({ node: n.name, pattern, topics: Object.freeze(topics) }));
  }
  const byNode = new Map(matches.map((m) => [m.node, m.topics]));
  return {
    built: withSourceTopics(built, (s) => byNode.get(s.name) ?? []),
    matches: Object.freeze(matches),
  };
}
