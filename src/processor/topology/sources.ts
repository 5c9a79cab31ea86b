/**
 * A topology's sources as the topology processor runs them. A source reading a pattern is resolved at
 * start, before the plan is made: the cluster's topics (KafkaPort.listTopics) it matches as a whole,
 * the application's own left out, sorted (src/topology/patterns.ts); each pattern's topics are logged
 * by name. What is checked before (at construction) is the plan with each pattern standing for one
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
    log.info(
      { node: m.node, pattern: m.pattern, topics: m.topics },
      'topology source pattern resolved: topics made later are read after a restart',
    );
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
  /** What each pattern matched at start, the dead-letter topic left out then, and the topics warned of since. */
  #matches: readonly PatternMatch[] = [];
  #deadLetterTopic = '';
  readonly #warned = new Set<string>();
  #lastLook = Number.NEGATIVE_INFINITY;

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
   * A warning, once per topic, for a topic a pattern matches now that it did not match at start (read
   * from the next start); at most one listing per LOOK_EVERY_MS. Never throws: a failed listing is
   * looked at again next time.
   *
   * @example
   * await run.newer(port, log); // warn: topics made since the start match a pattern source ...
   */
  async newer(port: KafkaPort, log: Logger, now = Date.now()): Promise<void> {
    if (
      this.#matches.length === 0 ||
      typeof port.listTopics !== 'function' ||
      now - this.#lastLook < LOOK_EVERY_MS
    )
      return;
    this.#lastLook = now;
    try {
      const listed = await port.listTopics();
      const { matches } = resolvePatterns(this.#built, listed, { exclude: [this.#deadLetterTopic] });
      for (const m of matches) {
        const had = this.#matches.find((x) => x.node === m.node)?.topics ?? [];
        const fresh = m.topics.filter((t) => !had.includes(t) && !this.#warned.has(t));
        for (const t of fresh) this.#warned.add(t);
        if (fresh.length > 0)
          log.warn(
            { node: m.node, pattern: m.pattern, topics: fresh },
            'topics made since the start match a pattern source: they are read from the next start (restart every instance)',
          );
      }
    } catch (err) {
      log.debug({ err: (err as Error).message }, 'could not look for newer pattern matches');
    }
  }
}

/** How often a running processor lists the topics to look for newer pattern matches (a full metadata request). */
export const LOOK_EVERY_MS = 60_000;
