/**
 * A topic a pattern reads, made while a topology chaos run lasts (`--late-topic`), and the instances
 * brought to read it.
 *
 * The runtime resolves a pattern when an instance starts; a topic made later is read from the next
 * start (src/processor/topology/sources.ts: a running instance warns of it, at most once a minute, and
 * docs/streams.md tells the operator to restart every instance). The harness does what the operator
 * does: when the feeder reaches the topic's first record it makes the topic (its `--input-partitions`
 * count, else `--partitions`) and produces on; then, between the schedule's faults (ChaosRun.exclusive),
 * it restarts each live instance whose start did not resolve the pattern to it, one after another: a
 * graceful stop (SIGTERM: the instance finishes its batch, commits and leaves the group) and a start,
 * which lists the topics again and logs what each pattern matched. Instances started after the topic
 * was made (a fault's restart, a scale-up) resolve it on their own. The drain waits for the group to
 * commit the late topic's end offsets as any input's, and the verdict judges its partitions as tasks.
 *
 * What the report keeps shows the order of things: when the first instance logged its start, when the
 * harness asked for the topic, when every live instance had resolved it, how many it restarted, and
 * which instances logged the pattern resolved with the topic.
 */
import type { Exit } from '../harness/child.js';
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
  /** Instances the harness restarted for it (gracefully). */
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
  stopGracefully(slot: Slot): Promise<{ exit: Exit; forced: boolean }>;
  restart(slot: Slot): Promise<void>;
  exclusive<T>(step: () => Promise<T>): Promise<T>;
  log(line: string): void;
}

/** A late topic's report before the run: `name` the module's, `topic` the run's. */
export function lateTopic(name: string, topic: string, partitions: number): LateTopicReport {
  const at = { firstStartedAt: undefined, createdAt: undefined, pickedUpAt: undefined };
  return { name, topic, partitions, ...at, restarted: 0, resolvedBy: [] };
}

/** The runtime's line naming what a pattern matched at an instance's start (src/processor/topology/sources.ts). */
const RESOLVED = 'topology source pattern resolved';

/** Whether an instance's start resolved a pattern to `topic` (its log line naming the topics). */
export function resolvedWith(inst: Instance, topic: string): boolean {
  return inst.seen(
    (l) => l.msg?.startsWith(RESOLVED) === true && Array.isArray(l.topics) && l.topics.includes(topic),
  );
}

/** How long a restart in progress (a fault's, the supervisor's) may take before the pick-up gives up on it. */
const SETTLE_MS = 120_000;

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
      `made ${topic} (${late.partitions} partitions) at its first record, ${(at - (late.firstStartedAt ?? 0)).toFixed(1)} s after the first instance started; restarting the instances that do not read it`,
    );
    run.pickup = run.exclusive(() => pickUp(run, late));
  };
}

/** Restarts every live instance whose start did not resolve the pattern to the late topic (see the top). */
async function pickUp(run: LateTopicContext, late: LateTopicReport): Promise<void> {
  const started = Date.now();
  for (let pass = 0; pass < 3; pass++) {
    // an instance starting (the supervisor's restart) lists the topics again at its start
    await pollUntil(
      'instances starting to have started',
      () => run.slots.every((s) => !s.expecting || !s.inst.alive),
      SETTLE_MS,
      200,
    );
    const stale = run.live().filter((s) => !resolvedWith(s.inst, late.topic));
    if (stale.length === 0) break;
    for (const s of stale) {
      const name = s.inst.name;
      const { exit, forced } = await run.stopGracefully(s);
      if (!forced && exit.code !== 0)
        run.report.harnessErrors.push(
          `${name}, stopped to read ${late.topic}, exited ${JSON.stringify(exit)} instead of 0`,
        );
      await run.restart(s);
      late.restarted++;
      run.log(
        `restarted ${name} as ${s.inst.name}: ${resolvedWith(s.inst, late.topic) ? 'its pattern resolved to' : 'its pattern did NOT resolve to'} ${late.topic}`,
      );
    }
  }
  const live = run.live().map((s) => s.inst);
  late.resolvedBy = live.filter((i) => resolvedWith(i, late.topic)).map((i) => i.name);
  late.pickedUpAt = (Date.now() - run.t0) / 1000;
  if (late.resolvedBy.length < live.length)
    run.report.harnessErrors.push(
      `${late.topic}: ${live.length - late.resolvedBy.length} of ${live.length} live instances never resolved the pattern to it`,
    );
  run.log(
    `${late.topic} read by every live instance (${late.resolvedBy.join(', ')}) after ${late.restarted} restarts in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
}
