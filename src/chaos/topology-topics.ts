/**
 * A topology module's topics on a chaos run's own names (src/chaos/any-topology.ts runs the module on
 * them; the harness makes them, produces to them and judges them):
 *
 * - its listed input topics, in the order of their sources: the first `<input>`, the next `<input>-1`,
 *   `<input>-2`, ...;
 * - a source reading a pattern: the pattern made to match `<input>-m-<name>` for every name it matched
 *   (`/orders-.*\/` becomes `^(?:<input>-m-(?:orders-.*))$`), so each run's instances resolve it to
 *   that run's topics only; the harness makes `<input>-m-<name>` for each name its records give
 *   (a record's `topic`), which the module's pattern must match;
 * - its sink topics: the first `<output>`, the next `<output>-1`, ...; a repartition topic
 *   `<applicationId>-<name>-repartition` becomes `<app>-<name>-repartition`.
 *
 * The dead-letter topic is the runtime's default for the renamed topology (`<first input>.DLT`, or
 * `<app>.DLT` when its first input is a pattern's: src/processor/topology/sources.ts).
 */
import { RedfenceError } from '../errors/index.js';
import { defaultDeadLetterTopic } from '../processor/topology/sources.js';
import { patternStandIns, patternText, resolvePatterns } from '../topology/patterns.js';
import { planTopology } from '../topology/run/plan.js';
import type { BuiltTopology, TopologyNode } from '../topology/types.js';

const moduleError = (message: string) => new RedfenceError('RF_MODULE_INVALID', message);

/** The run's names for a topology's topics. */
export interface TopologyTopics {
  /** The run's name of the first listed input topic (`<input>`). */
  input: string;
  /** The module's listed input topic -> the run's (in the order of their sources). */
  inputs: Map<string, string>;
  /** A pattern source matches `<patternPrefix><name>` for each name its module pattern matches. */
  patternPrefix: string;
  /** The module's sink topic -> the run's (in the order the sinks were built). */
  outputs: Map<string, string>;
}

/** The module's listed input topics and sink topics, in build order; its pattern sources' patterns. */
export function topicsOf(built: BuiltTopology): { input: string[]; sinks: string[]; patterns: RegExp[] } {
  const input: string[] = [];
  const sinks: string[] = [];
  const patterns: RegExp[] = [];
  for (const n of built.nodes) {
    if (n.kind === 'source' && !n.internal) {
      for (const t of n.topics ?? []) if (!input.includes(t)) input.push(t);
      if (n.pattern !== null) patterns.push(n.pattern);
    }
    if (n.kind === 'sink' && !n.internal && !sinks.includes(n.topic)) sinks.push(n.topic);
  }
  return { input, sinks, patterns };
}

/** The run's topic names (see the top of this file). */
export function chaosTopics(built: BuiltTopology, input: string, output: string): TopologyTopics {
  const t = topicsOf(built);
  const numbered = (base: string) => (_: string, i: number) => (i === 0 ? base : `${base}-${i}`);
  return {
    input,
    inputs: new Map(t.input.map((x, i) => [x, numbered(input)(x, i)])),
    patternPrefix: `${input}-m-`,
    outputs: new Map(t.sinks.map((x, i) => [x, numbered(output)(x, i)])),
  };
}

const literal = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** A source's pattern on the run's names: it matches `<prefix><name>` for each name the module's matches. */
export function runPattern(pattern: RegExp, prefix: string): RegExp {
  const s = pattern.source;
  // the builder anchors a pattern as ^(?:...)$ (src/topology/topology.ts)
  const inner = s.startsWith('^(?:') && s.endsWith(')$') ? s.slice(4, -2) : s;
  return new RegExp(`^(?:${literal(prefix)}(?:${inner}))$`, pattern.flags);
}

/**
 * The same topology on the run's topics, with `applicationId` (the Redis keys' prefix) the run's store
 * name: every node, edge, store and function is the module's; only topic names and source patterns change.
 */
export function onChaosTopics(built: BuiltTopology, topics: TopologyTopics, app: string): BuiltTopology {
  const internal = new Set(built.repartitionTopics);
  const rename = (t: string) =>
    topics.inputs.get(t) ??
    (internal.has(t) ? `${app}${t.slice(built.applicationId.length)}` : (topics.outputs.get(t) ?? t));
  const patterns = new Map<RegExp, RegExp>();
  const pattern = (p: RegExp) => {
    const known = patterns.get(p) ?? runPattern(p, topics.patternPrefix);
    patterns.set(p, known);
    return known;
  };
  const nodes = built.nodes.map((n): TopologyNode => {
    if (n.kind === 'source' && n.topics !== null)
      return Object.freeze({ ...n, topics: Object.freeze(n.topics.map(rename)) });
    if (n.kind === 'source' && n.pattern !== null)
      return Object.freeze({ ...n, pattern: pattern(n.pattern) });
    if (n.kind === 'sink') return Object.freeze({ ...n, topic: rename(n.topic) });
    return n;
  });
  const subTopologies = built.subTopologies.map((s) =>
    Object.freeze({
      ...s,
      sourceTopics: Object.freeze(s.sourceTopics.map(rename)),
      sourcePatterns: Object.freeze(s.sourcePatterns.map(pattern)),
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

/**
 * The run's topic of a record naming the module's topic `topic` (a listed input, else a name a pattern
 * matches: `<patternPrefix><topic>`); a record naming none goes to the first listed input.
 */
export function runInputTopic(topics: TopologyTopics, topic: string | undefined): string {
  if (topic === undefined) return topics.input;
  return topics.inputs.get(topic) ?? `${topics.patternPrefix}${topic}`;
}

/** The dead-letter topic the instances write: the runtime's default for the topology on the run's topics. */
export function chaosDeadLetter(onRun: BuiltTopology): string {
  return defaultDeadLetterTopic(planTopology(patternStandIns(onRun)));
}

/** Names to check a module's records with before a run has its own. */
const CHECK = { input: 'chaos-check-input', output: 'chaos-check-output', store: 'chaos_check' };

/**
 * The run's input topics for records naming `recordTopics` (the module's names; undefined: the first
 * listed input): every listed input, then each name a pattern matches, in first-seen order.
 * RF_MODULE_INVALID (before any connection) for a name that is no listed input and that no pattern
 * matches, a pattern no record's topic matches (the instances would find no topic for it), a topology
 * with no listed input whose records do not all name their topic, and a topology the runtime refuses
 * once its patterns are resolved to the run's topics (several topics into an aggregation).
 */
export function runInputTopics(
  file: string,
  built: BuiltTopology,
  recordTopics: Iterable<string | undefined>,
  run: { input: string; output: string; store: string } = CHECK,
): string[] {
  const { input, patterns } = topicsOf(built);
  const names = new Set<string | undefined>(recordTopics);
  const topics = chaosTopics(built, run.input, run.output);
  const out = [...topics.inputs.values()];
  if (names.has(undefined) && input.length === 0)
    throw moduleError(
      `${file}: its sources read patterns only, so each record names its topic ("topic": a name the pattern matches, in chaosInput's records or --input's lines)`,
    );
  const matched = new Set<RegExp>();
  for (const name of names) {
    if (name === undefined || input.includes(name)) continue;
    const by = patterns.filter((p) => p.test(name));
    if (by.length === 0)
      throw moduleError(
        `${file}: a record names topic ${name}, which no source reads (its inputs: ${[...input, ...patterns.map(patternText)].join(', ')})`,
      );
    const onRun = runInputTopic(topics, name);
    if (onRun.length > 249)
      throw moduleError(
        `${file}: topic ${name} is too long for the run's name for it (${onRun.length} > 249)`,
      );
    for (const p of by) {
      matched.add(p);
      if (!runPattern(p, topics.patternPrefix).test(onRun))
        throw moduleError(
          `${file}: the pattern ${patternText(p)} matches ${name} but not the run's name for it (${onRun}): redfence chaos runs patterns without anchors or lookbehinds inside`,
        );
    }
    out.push(onRun);
  }
  for (const p of patterns)
    if (!matched.has(p))
      throw moduleError(
        `${file}: no record names a topic its pattern ${patternText(p)} matches; give records a "topic" it matches (the harness makes those topics)`,
      );
  try {
    planTopology(resolvePatterns(onChaosTopics(built, topics, run.store), out).built);
  } catch (err) {
    throw moduleError(`${file}: on the records' topics: ${(err as Error).message}`);
  }
  return out;
}
