/**
 * A topic a pattern reads, made while a topology chaos run lasts (`--late-topic`), and the running
 * instances picking it up on their own.
 *
 * A running instance lists the topics every `--pattern-refresh` ms (the harness gives its instances
 * LATE_REFRESH_MS) and, when a pattern matches a new topic, leaves the group and joins again with it,
 * logging the pattern resolved with the new topics (src/processor/topology/refresh.ts). When the feeder
 * reaches the topic's first record the harness makes the topic (its `--input-partitions` count, else
 * `--partitions`) and produces on; then it waits, with the schedule's faults going on, until every
 * live instance has logged the pattern resolved with it, restarting none. Instances started after the
 * topic was made (a fault's restart, a scale-up) resolve it at their start. The drain waits for the
 * group to commit the late topic's end offsets as any input's, and the verdict judges its partitions
 * as tasks.
 *
 * What the report keeps shows the order of things: when the first instance logged its start, when the
 * harness asked for the topic, when every live instance had resolved it, how many it restarted (none),
 * and which instances logged the pattern resolved with it.
 */
import { pollUntil } from '../harness/poll.js';
import type { Slot } from './faults.js';
import type { Instance } from './instances.js';
import type { ChaosKafka } from './kafka.js';

export interface LateTopicReport {
  /** The module's name for it (a name its records give a pattern) and the run's. */
  name: string;
  topic: string;
  partitions: number;
  /** Seconds since the run started: when the first instance logged its start. */
  firstStartedAt: number | undefined;
  /** Seconds since the run started: when the harness asked Kafka to make the topic (after the feeder reached its first record). */
  createdAt: number | undefined;
  /** Seconds since the run started: when every live instance had resolved the pattern to it. */
  pickedUpAt: number | undefined;
  /** Instances the harness restarted for it: none (the instances pick it up while they run). */
  restarted: number;
  /** The live instances, when it was picked up, that logged the pattern resolved with it. */
  resolvedBy: string[];
}

/** What the late topic's steps act through (src/chaos/run-context.ts ChaosRun). */
export interface LateTopicContext {
  /** When the run started (ms since the epoch). */
  readonly t0: number;
  readonly late: LateTopicReport | undefined;
  readonly kafka: Pick<ChaosKafka, 'createTopics'>;
  readonly slots: Slot[];
  readonly report: { harnessErrors: string[] };
  /** The pick-up, queued once the topic is made (the harness awaits it before the drain). */
  pickup: Promise<void> | undefined;
  live(): Slot[];
  log(line: string): void;
}

/** A late topic's report before the run: `name` the module's, `topic` the run's. */
export function lateTopic(name: string, topic: string, partitions: number): LateTopicReport {
  const at = { firstStartedAt: undefined, createdAt: undefined, pickedUpAt: undefined };
  return { name, topic, partitions, ...at, restarted: 0, resolvedBy: [] };
}

/** The runtime's line naming what a pattern matches, at start and at each change (src/processor/topology/sources.ts). */
const RESOLVED = 'topology source pattern resolved';

/** The instances' `--pattern-refresh` in a run with a late topic: each lists the topics once a second. */
export const LATE_REFRESH_MS = 1000;

/** Whether an instance resolved a pattern to `topic`, at its start or while it ran (its log line naming the topics). */
export function resolvedWith(inst: Instance, topic: string): boolean {
  return inst.seen(
    (l) => l.msg?.startsWith(RESOLVED) === true && Array.isArray(l.topics) && l.topics.includes(topic),
  );
}

/** How long the pick-up waits for every live instance (a fault's restart may be on its way meanwhile). */
const PICKUP_MS = 120_000;

/**
 * The feeder's hook before it sends to a topic: makes the late topic at its first record and queues
 * the instances' pick-up (`run.pickup`); nothing for any other topic or run.
 */
export function lateTopicHook(run: LateTopicContext): ((topic: string) => Promise<void>) | undefined {
  const late = run.late;
  if (late === undefined) return undefined;
  return async (topic) => {
    if (topic !== late.topic || late.createdAt !== undefined) return;
    const at = (Date.now() - run.t0) / 1000;
    await run.kafka.createTopics([{ topic, partitions: late.partitions }]);
    late.createdAt = at;
    run.log(
      `made ${topic} (${late.partitions} partitions) at its first record, ${(at - (late.firstStartedAt ?? 0)).toFixed(1)} s after the first instance started; waiting for the instances to read it`,
    );
    run.pickup = pickUp(run, late);
  };
}

/** Waits until every live instance (none starting) has resolved the pattern to the late topic (see the top). */
async function pickUp(run: LateTopicContext, late: LateTopicReport): Promise<void> {
  const started = Date.now();
  const everyOne = () =>
    run.slots.every((s) => !s.expecting || !s.inst.alive) &&
    run.live().every((s) => resolvedWith(s.inst, late.topic));
  try {
    await pollUntil(`every live instance resolving the pattern to ${late.topic}`, everyOne, PICKUP_MS, 200);
  } catch {
    // told below, by the instances that did not
  }
  const live = run.live().map((s) => s.inst);
  late.resolvedBy = live.filter((i) => resolvedWith(i, late.topic)).map((i) => i.name);
  late.pickedUpAt = (Date.now() - run.t0) / 1000;
  if (late.resolvedBy.length < live.length)
    run.report.harnessErrors.push(
      `${late.topic}: ${live.length - late.resolvedBy.length} of ${live.length} live instances never resolved the pattern to it`,
    );
  run.log(
    `${late.topic} read by every live instance (${late.resolvedBy.join(', ')}), ${late.restarted} restarted, after ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
}
