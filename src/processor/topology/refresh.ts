/**
 * A topology reading a pattern picks up the topics it matches that are made while it runs, as Kafka
 * Streams does at a metadata refresh. Every `patternRefreshMs` the running processor lists the topics
 * (sources.ts lookAgain); when a pattern matches a topic it did not, the new match's executor is made
 * and checked as start() checks its own (the plan, the state layout, the topics, the tick writes, the
 * permissions: checkRun) while the old one runs on. Then the port leaves the group and joins again
 * with the new topics (KafkaPort.resubscribe): the batch in flight finishes, every owned partition is
 * revoked as a rebalance revokes it (the commit pipeline drained, so every applied batch is committed
 * with its stream time, then the partitions forgotten), and only then, with nothing owned, is the new
 * executor swapped in; the rebalance that follows assigns through onAssign (epochs acquired, stream
 * times read from the commit metadata). Nothing is lost or read twice: the group's committed offsets
 * are where every partition takes up, as after any rebalance.
 *
 * A new match the plan refuses (RF_TOPOLOGY_UNSUPPORTED: an aggregation fed by a pattern now matching
 * several topics), or one the start checks refuse with an error that does not pass (a topic missing, a
 * permission refused), is fatal with that error: the old plan never runs half-changed. A failed
 * listing or a passing error is looked at again at the next refresh.
 */
import { RedfenceError } from '../../errors/index.js';
import { checkPermissions, onTopic } from '../../kafka/permissions.js';
import type { KafkaPort } from '../../kafka/types.js';
import type { Logger } from '../../runtime/logger.js';
import type { TopologyExecutor } from '../../topology/run/executor.js';
import { layoutCheck } from '../../topology/run/stored.js';
import type { BuiltTopology } from '../../topology/types.js';
import type { ResolvedTopologyOptions } from './options.js';
import type { NextRun } from './sources.js';
import { checkTickWrite } from './ticks.js';
import { prepareTopics, topologyPermissions } from './topics.js';

/** What start()'s checks of an executor's plan need. */
export interface RunCheckContext {
  readonly kafka: KafkaPort;
  readonly topology: BuiltTopology;
  readonly deadLetterTopic: string;
  readonly groupId: string;
  readonly createTopics: boolean;
  readonly replicationFactor: number;
  /** `idleCloseMs` is set: the ticks' topics must be writable. */
  readonly ticks: boolean;
  /** The `snapshot` option's topic, which must be writable; undefined without snapshots. */
  readonly snapshotTopic: string | undefined;
  readonly log: Logger;
}

/** The checks' context from the processor's options. */
export function refreshChecks(
  o: Pick<
    ResolvedTopologyOptions,
    'topology' | 'createTopics' | 'replicationFactor' | 'idleCloseMs' | 'snapshot'
  >,
  kafka: KafkaPort,
  deadLetterTopic: string,
  groupId: string,
  log: Logger,
): RunCheckContext {
  const { topology, createTopics, replicationFactor } = o;
  const ticks = o.idleCloseMs !== undefined;
  const snapshotTopic = o.snapshot?.topic;
  return {
    kafka,
    topology,
    deadLetterTopic,
    groupId,
    createTopics,
    replicationFactor,
    ticks,
    snapshotTopic,
    log,
  };
}

/**
 * The checks of an executor's plan before any of its partitions is taken: state in another layout
 * (RF_STATE_LAYOUT), the topics (inputs exist, outputs and repartition topics exist or are made; an
 * existing repartition topic keeps its count), the tick writes and the brokers' ACLs. Returns the
 * first input's partition count.
 */
export async function checkRun(c: RunCheckContext, executor: TopologyExecutor): Promise<number> {
  const plan = executor.plan;
  await executor.store.checkLayout(layoutCheck(plan, true));
  const partitions = await prepareTopics(c.kafka, plan, {
    topology: c.topology,
    deadLetterTopic: c.deadLetterTopic,
    create: c.createTopics,
    replicationFactor: c.replicationFactor,
    log: c.log,
  });
  if (c.ticks) await checkTickWrite(c.kafka, plan);
  // what the brokers' ACLs refuse (docs/operations.md, "Kafka ACLs")
  const purges = typeof c.kafka.deleteRecords === 'function';
  const needs = topologyPermissions(c.topology, plan, c.deadLetterTopic, c.groupId, purges);
  if (c.snapshotTopic !== undefined) needs.push(onTopic('Write', c.snapshotTopic, 'the snapshot topic'));
  await checkPermissions(c.kafka, needs, c.groupId);
  return partitions;
}

/** What the refresh acts through (processor.ts). */
export interface PatternRefreshContext extends RunCheckContext {
  readonly intervalMs: number;
  /** The executor's owner (sources.ts). */
  readonly run: {
    lookAgain(port: KafkaPort): Promise<NextRun | undefined>;
    swap(next: NextRun, log: Logger): void;
  };
  /** True while the processor runs (not starting, not closing). */
  running(): boolean;
  /** The new executor runs: its first input's partition count. */
  switched(inputPartitions: number): void;
  fatal(err: Error): void;
}

/**
 * The look every `intervalMs` and the switch it may make; one at a time.
 *
 * @example
 * const refresh = new PatternRefresh(ctx);
 * refresh.start(); // after the port's start()
 * await refresh.settle(); // on close, before the port stops
 */
export class PatternRefresh {
  readonly #c: PatternRefreshContext;
  #timer: NodeJS.Timeout | undefined;
  #busy: Promise<void> | undefined;
  #switches = 0;
  /** The topics warned of (#cannot). */
  readonly #warned = new Set<string>();

  constructor(c: PatternRefreshContext) {
    this.#c = c;
  }

  /** Switches made (the new executor running). */
  get switches(): number {
    return this.#switches;
  }

  /** What start()'s checks need (checkRun). */
  get checks(): RunCheckContext {
    return this.#c;
  }

  /** Looks every intervalMs; nothing for a port without listTopics. */
  start(): void {
    if (typeof this.#c.kafka.listTopics !== 'function') return;
    this.#timer = setInterval(() => {
      if (this.#busy === undefined && this.#c.running())
        this.#busy = this.look().finally(() => {
          this.#busy = undefined;
        });
    }, this.#c.intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  /** A look (and switch) in progress has ended. */
  async settle(): Promise<void> {
    await this.#busy;
  }

  /** One look: a switch when a pattern matches a new topic. Never rejects. */
  async look(): Promise<void> {
    const c = this.#c;
    let next: NextRun | undefined;
    let partitions: number;
    try {
      next = await c.run.lookAgain(c.kafka);
      if (next === undefined) return;
      if (typeof c.kafka.resubscribe !== 'function') return this.#cannot(next);
      partitions = await checkRun(c, next.executor);
    } catch (err) {
      if (RedfenceError.is(err) && !err.retriable) return this.#fail(err);
      c.log.debug({ err: (err as Error).message }, 'could not look for newer pattern matches');
      return;
    }
    if (!c.running()) return;
    const found = next;
    const topics = [...found.executor.plan.subs.keys()];
    c.log.info({ topics }, 'a pattern matches new topics: leaving the group to join again with them');
    try {
      await c.kafka.resubscribe?.(topics, async () => {
        if (!c.running()) throw new RedfenceError('RF_INVALID_STATE', 'closing: not joining again');
        c.run.swap(found, c.log);
        c.switched(partitions);
        this.#switches++;
      });
    } catch (err) {
      // the port has no consumer now: nothing more is read
      if (c.running()) this.#fail(err as Error);
    }
  }

  /**
   * A port that cannot change its subscription while it runs (KafkaPort.resubscribe absent): a warning,
   * once per new topic. Under static membership and the classic protocol a restart may not do either:
   * the member joining again is handed its last assignment (docs/streams.md says what to do).
   */
  #cannot(next: NextRun): void {
    for (const [i, m] of next.matches.entries()) {
      const fresh = (next.added[i] ?? []).filter((t) => !this.#warned.has(t));
      for (const t of fresh) this.#warned.add(t);
      if (fresh.length > 0)
        this.#c.log.warn(
          { node: m.node, pattern: m.pattern, topics: fresh },
          'topics made since the start match a pattern source: not read while it runs (the Kafka port cannot change its subscription: static membership under the classic group protocol, or a port without resubscribe)',
        );
    }
  }

  #fail(err: Error): void {
    if (this.#c.running()) this.#c.fatal(err);
  }
}
