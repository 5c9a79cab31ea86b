/**
 * A topology's sources as the topology processor runs them. A source reading a pattern is resolved at
 * start, before the plan is made: the cluster's topics (KafkaPort.listTopics) it matches as a whole,
 * the application's own left out, sorted (src/topology/patterns.ts); each pattern's topics are logged
 * by name. While it runs, the listing is looked at again (refresh.ts) and a new match gets an executor
 * of its own, swapped in while no partition is owned. What is checked before (at construction) is the plan with each pattern standing for one
 * topic. The default dead-letter topic is `<first input>.DLT`; when the first input is a pattern's, it is
 * `<applicationId>.DLT` instead: the first of a pattern's topics changes when a topic sorting before it
 * is made, and the dead letters would move with it from one start to the next.
 */
import { RedfenceError } from '../../errors/index.js';
import type { KafkaPort } from '../../kafka/types.js';
import { invalid } from '../../options/checks.js';
import type { Logger } from '../../runtime/logger.js';
import {
  hasPatterns,
  matchesWhole,
  type PatternMatch,
  patternStandIns,
  type ResolvedTopology,
  resolvePatterns,
} from '../../topology/patterns.js';
import { TopologyExecutor, type TopologyExecutorOptions } from '../../topology/run/executor.js';
import { planTopology, type RunPlan } from '../../topology/run/plan.js';
import type { BuiltTopology } from '../../topology/types.js';
import type { ResolvedTopologyOptions } from './options.js';

/**
 * The dead-letter topic when none is given, from the plan checked at construction.
 *
 * @example
 * defaultDeadLetterTopic(planTopology(patternStandIns(built))); // 'orders.DLT', or 'fraud.DLT' for t.stream(/orders-.*\/)
 */
export function defaultDeadLetterTopic(checked: RunPlan): string {
  const pattern = checked.sources.some((s) => s.pattern !== null);
  return `${pattern ? checked.built.applicationId : checked.topic}.DLT`;
}

/**
 * `built` with each pattern source reading the topics it matches now (RF_TOPIC_PATTERN_UNMATCHED when
 * one matches none); the topology itself when it has no pattern. RF_INVALID_OPTIONS for a port of one's
 * own without listTopics.
 *
 * @example
 * const resolved = await resolveSources(port, built, 'fraud.DLT', log);
 * // log: { node: 'KSTREAM-SOURCE-0000000000', pattern: '/orders-.*\/', topics: ['orders-eu', 'orders-us'] }
 */
export async function resolveSources(
  port: KafkaPort,
  built: BuiltTopology,
  deadLetterTopic: string,
  log: Logger,
): Promise<ResolvedTopology> {
  if (!hasPatterns(built)) return { built, matches: [] };
  if (typeof port.listTopics !== 'function')
    throw invalid(
      'option "kafka" is a port without listTopics: a topology source reading a pattern lists the topics at start',
    );
  const resolved = resolvePatterns(built, await port.listTopics(), { exclude: [deadLetterTopic] });
  for (const m of resolved.matches)
    log.info({ node: m.node, pattern: m.pattern, topics: m.topics }, RESOLVED);
  return resolved;
}

/**
 * The processor's executor: made at construction for a topology that lists its topics, at start() for
 * one reading a pattern (after the resolution). `checked` is the plan checked at construction.
 *
 * @example
 * const run = new ExecutorAtStart(built, { redis }); // and the processor's tenant, retentionMs and ownerCache
 * await run.start(port, 'fraud.DLT', log); // resolves the patterns, if any
 * run.executor.plan.inputs; // ['orders-eu', 'orders-us']
 */
export class ExecutorAtStart {
  readonly checked: RunPlan;
  readonly #built: BuiltTopology;
  readonly #options: TopologyExecutorOptions;
  #executor: TopologyExecutor | undefined;
  /** What each pattern matches (at start, then at each change), and the dead-letter topic left out. */
  #matches: readonly PatternMatch[] = [];
  #deadLetterTopic = '';

  /** `o`: the processor's options the executor takes. */
  constructor(
    built: BuiltTopology,
    o: Pick<ResolvedTopologyOptions, 'redis'> &
      Partial<Pick<ResolvedTopologyOptions, 'tenant' | 'retentionMs' | 'ownerCache'>>,
  ) {
    // RF_TOPOLOGY_UNSUPPORTED now, but for what the patterns' topics decide (checked again at start)
    this.checked = planTopology(patternStandIns(built));
    this.#built = built;
    const options: TopologyExecutorOptions = {
      redis: o.redis,
      ...(o.tenant === undefined ? {} : { tenant: o.tenant }),
      ...(o.retentionMs === undefined ? {} : { retentionMs: o.retentionMs }),
      ...(o.ownerCache === undefined ? {} : { ownerCache: o.ownerCache }),
    };
    this.#options = options;
    if (!hasPatterns(built)) this.#executor = new TopologyExecutor(built, options);
  }

  /** There from start() on (a processor takes partitions after it). */
  get executor(): TopologyExecutor {
    if (this.#executor === undefined)
      throw new RedfenceError('RF_INVALID_STATE', 'topology processor: the executor is made at start()');
    return this.#executor;
  }

  /** Resolves the patterns (if any: resolveSources) and makes the executor. */
  async start(port: KafkaPort, deadLetterTopic: string, log: Logger): Promise<TopologyExecutor> {
    if (this.#executor === undefined) {
      const { built, matches } = await resolveSources(port, this.#built, deadLetterTopic, log);
      this.#executor = new TopologyExecutor(built, this.#options);
      this.#matches = matches;
      this.#deadLetterTopic = deadLetterTopic;
    }
    return this.#executor;
  }

  /**
   * The executor of what the patterns match now, when a pattern matches a topic it did not: the listing
   * (KafkaPort.listTopics) resolved as at start (a topic deleted meanwhile leaves the match then), or
   * undefined when nothing new matches. Throws what start() would for it (RF_TOPOLOGY_UNSUPPORTED from
   * the plan, RF_TOPOLOGY_INVALID for a topic two sources read, RF_TOPIC_PATTERN_UNMATCHED) and a
   * failed listing's error.
   *
   * @example
   * const next = await run.lookAgain(port); // { executor, matches: [{ node, pattern, topics: ['orders-ca', 'orders-eu', 'orders-us'] }] }
   */
  async lookAgain(port: KafkaPort): Promise<NextRun | undefined> {
    if (this.#matches.length === 0 || typeof port.listTopics !== 'function') return undefined;
    const listed = await port.listTopics();
    const had = new Set(this.#matches.flatMap((m) => m.topics));
    // only a topic matched anew makes a change (one deleted alone is left to the consumer, as before);
    // the application's own never (resolvePatterns' rule)
    const own = new Set([...this.#built.subTopologies.flatMap((s) => s.sinkTopics), this.#deadLetterTopic]);
    const fresh = this.#built.nodes.some(
      (n) =>
        n.kind === 'source' &&
        n.pattern !== null &&
        n.topics === null &&
        listed.some(
          (t) => !had.has(t) && !own.has(t) && !t.endsWith('.DLT') && matchesWhole(n.pattern as RegExp, t),
        ),
    );
    if (!fresh) return undefined;
    const { built, matches } = resolvePatterns(this.#built, listed, { exclude: [this.#deadLetterTopic] });
    const added = matches.map((m) => m.topics.filter((t) => !had.has(t)));
    // RF_TOPOLOGY_UNSUPPORTED here: the plan of the new match, made before anything changes
    return { executor: new TopologyExecutor(built, this.#options), matches, added };
  }

  /** Runs `next` from now on (no partition is owned: KafkaPort.resubscribe's `between`) and logs what each pattern matches now. */
  swap(next: NextRun, log: Logger): void {
    for (const [i, m] of next.matches.entries())
      log.info({ node: m.node, pattern: m.pattern, topics: m.topics, added: next.added[i] ?? [] }, RESOLVED);
    this.#executor = next.executor;
    this.#matches = next.matches;
  }
}

/** An executor made for what the patterns match now, and those matches (ExecutorAtStart.lookAgain). */
export interface NextRun {
  readonly executor: TopologyExecutor;
  readonly matches: readonly PatternMatch[];
  /** Each match's topics the running executor does not read (by the index of `matches`). */
  readonly added: readonly (readonly string[])[];
}

/** The line naming what a pattern matches, at start and at each change (operators and the chaos harness read it). */
export const RESOLVED = 'topology source pattern resolved';
