/**
 * The steps of a chaos run, in the order src/chaos/harness.ts takes them: start the Redis side, the far
 * side and the topics; start the instances, their supervisor and scraper; produce the input while the
 * schedule's faults run; drain (the group commits the input's end offsets); stop the instances (and, in
 * any case, kill every one); sum their last scrapes; read back what the run left (the verifier, a user's
 * processor's snapshot, or a handler's far-side calls judged); clean up; judge the run. Each step works
 * on the run's state (src/chaos/run-context.ts).
 */
import { rm } from 'node:fs/promises';
import { pollUntil } from '../harness/poll.js';
import { type FaultContext, inject } from './faults.js';
import { lateTopicHook } from './late-topic.js';
import { instanceRedisArgs, startRedisSide, stopRedisSide, verifierRedis } from './redis-topology.js';
import { DRIFT_TOTAL } from './repair.js';
import type { ChaosRun } from './run-context.js';
import type { ChaosReport } from './run-options.js';
import type { Fault } from './schedule.js';
import { type Injected, judge, judgeFault } from './verdict.js';
import { verify } from './verifier.js';
import { Feeder, RecordList, type RecordSource, Workload } from './workload.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function describeFault(f: Fault): string {
  if (f.kind === 'crash') return `crash:${f.point}#${f.after}`;
  if (f.kind === 'scale') return `scale->${f.to}`;
  return f.kind;
}

/** The Redis side, the far side (a handler run) and the topics; returns what the faults act through. */
export async function startServices(run: ChaosRun): Promise<FaultContext> {
  const { o, names, log } = run;
  const redis = await startRedisSide(o.redisTopology, run.dir, o.redisFailovers, o.replicaLagMs);
  run.redis = redis;
  if (o.handler) {
    const { FarSide } = await import('./far-side.js');
    const farSide = new FarSide({
      latencyMs: o.handler.latencyMs,
      failureRate: o.handler.failureRate,
      seed: run.seed,
    });
    run.farSide = farSide;
    log(
      `far side ${await farSide.start()}: latency ${o.handler.latencyMs.join('-')} ms, ${o.handler.failureRate} failing`,
    );
  }
  const faultContext = run.faultContext(redis);
  // a late topic is made while the run lasts (src/chaos/late-topic.ts)
  await run.kafka.createTopics([
    ...run.madeInputTopics().map((topic) => ({ topic, partitions: run.inputPartitions.get(topic) ?? 1 })),
    ...run.outputTopics.map((topic) => ({ topic, partitions: o.partitions })),
    { topic: names.deadLetter, partitions: 1 },
    // as the runtime makes them (records keep their own timestamps; the purge deletes what is committed)
    ...[...run.repartitionTopics].map(([topic, partitions]) => ({
      topic,
      partitions,
      config: { 'cleanup.policy': 'delete', 'retention.ms': '-1' },
    })),
  ]);
  // with ticks, the input too: the drain waits for them to close every window (ChaosRun.caughtUp)
  const live = new Map(run.repartitionTopics);
  if (run.ticking) for (const topic of run.inputTopics) live.set(topic, run.inputPartitions.get(topic) ?? 1);
  if (live.size > 0) {
    const { RepartitionLog } = await import('./repartition-log.js');
    run.repartitionLog = await RepartitionLog.open(
      o.brokers,
      live,
      o.mode === 'exactly-once' ? 'read_committed' : 'read_uncommitted',
      o.kafkaConfig,
    );
    log(`${[...live.keys()].join(', ')} read while the run lasts`);
  }
  const counts = new Set(run.inputPartitions.values()).size > 1 ? run.inputPartitions : undefined;
  log(
    `topics ${run
      .madeInputTopics()
      .map((t) => (counts ? `${t} (${counts.get(t)})` : t))
      .join(
        ', ',
      )}${run.late ? ` (${run.late.topic} to be made)` : ''} (+ ${run.user ? 'output' : 'totals'}, ${names.deadLetter}); Redis ${o.redisTopology} ${instanceRedisArgs(redis).join(' ')} ` +
      `(AOF, appendfsync always)${o.waitReplicas === undefined ? ', no WAIT' : `, WAIT ${o.waitReplicas}`}` +
      (!o.handler && o.commitIntervalMs ? `; instances commit every ${o.commitIntervalMs} ms at most` : ''),
  );
  return faultContext;
}

/** The first scale's instances, and a supervisor that restarts any that dies without the harness causing it. */
export async function startInstances(run: ChaosRun): Promise<void> {
  const { o, slots, log, report } = run;
  for (let i = 0; i < (o.scale[0] ?? 1); i++) await run.addInstance();
  run.supervisor = setInterval(() => {
    for (const s of slots) {
      if (!run.unexpected(s)) continue;
      log(`restarting ${s.id}`);
      void run
        .restart(s)
        .catch((err: Error) => report.harnessErrors.push(`restart of ${s.id}: ${err.message}`));
    }
  }, 500);
  run.scraper = setInterval(() => {
    for (const s of run.live()) void s.inst.scrape();
  }, 1000);
}

export interface Production {
  /** The orders workload (the packaged processor), or none: a user's records. */
  workload: Workload | undefined;
  source: RecordSource;
  feeder: Feeder;
  /** When producing started: the schedule's times count from here. */
  startedAt: number;
}

/** The workload (or the user's records), produced while faults run. */
export function startProduction(run: ChaosRun): Production {
  const { o, user, seed } = run;
  const workload = user
    ? undefined
    : new Workload({
        seed,
        records: o.records,
        customers: o.customers,
        partitions: o.partitions,
        poisonRate: o.poisonRate,
        large: o.large,
        skew: o.skew,
      });
  // a topology's record naming its module's topic goes to the run's (src/chaos/topology-topics.ts)
  const records = (user?.records ?? []).map((r) =>
    r.topic === undefined ? r : { ...r, topic: run.inputTopicOf(r.topic) },
  );
  const partitions = (topic: string | undefined) =>
    run.inputPartitions.get(topic ?? run.names.input) ?? o.partitions;
  const source: RecordSource = workload ?? new RecordList(records, partitions, user?.timestampBase ?? 0);
  const total = user?.records.length ?? o.records;
  const windowMs = o.durationS * 1000;
  const feeder: Feeder = new Feeder(
    run.kafka.producer(),
    run.names.input,
    source,
    0, // paced by the limit alone: on time it is the schedule's rate, total / durationS
    (): number => productionLimit(total, windowMs, feeder.startedAt, run.nextFaultDue, Date.now()),
    lateTopicHook(run),
  );
  run.feeder = feeder;
  feeder.start();
  return { workload, source, feeder, startedAt: Date.now() };
}

/** How fast the schedule's clock runs while a fault is overdue (the one before it still running). */
export const LATE_CLOCK_RATE = 0.25;

/**
 * How many of `total` records may have been produced by `now`: the input is paced by the schedule's
 * clock, which runs with the wall clock while the faults are on time and at {@link LATE_CLOCK_RATE} of it
 * once the first fault not yet started is overdue. On a loaded machine the faults run late (each waits
 * for the one before it, and a zombie or a Redis restart takes several seconds); paced by the wall clock
 * alone, the input would all be produced and consumed before a late crash fault armed its instance, which
 * then never reaches its point. It never stops: a running fault (a crash waiting for its instance to pass
 * its point) still gets records to process.
 */
export function productionLimit(
  total: number,
  windowMs: number,
  startedAt: number,
  nextFaultDue: number,
  now: number,
): number {
  if (!Number.isFinite(nextFaultDue) || now <= nextFaultDue)
    return Math.min(total, Math.floor((total * Math.max(0, now - startedAt)) / windowMs));
  const clock = nextFaultDue - startedAt + (now - nextFaultDue) * LATE_CLOCK_RATE;
  return Math.min(total, Math.floor((total * Math.max(0, clock)) / windowMs));
}

/** Every fault of the schedule at its time in the production window, each judged as it ends. */
export async function runFaults(
  run: ChaosRun,
  faultContext: FaultContext,
  produceStart: number,
): Promise<void> {
  const windowMs = run.o.durationS * 1000;
  const dueOf = (i: number) => {
    const f = run.schedule[i];
    return f === undefined ? Number.POSITIVE_INFINITY : produceStart + f.at * windowMs;
  };
  for (const [i, f] of run.schedule.entries()) {
    const due = dueOf(i);
    run.nextFaultDue = due;
    if (Date.now() < due) await sleep(due - Date.now()); // pacing: the fault's due time
    run.nextFaultDue = dueOf(i + 1);
    let startedAt = Date.now();
    // alone: a late topic's pick-up (src/chaos/late-topic.ts) restarts instances between faults
    const done: Injected = await run
      .exclusive(() => {
        startedAt = Date.now();
        return inject(faultContext, f);
      })
      .catch((err: Error) => {
        const first = err.message.split('\n')[0] ?? '';
        return { outcome: `failed: ${first}`, facts: { error: err.message } };
      });
    const failure = judgeFault(f, done.facts);
    run.report.faults.push({
      fault: f,
      ...done,
      ...(failure === undefined ? {} : { failure }),
      startedAt: startedAt - run.t0,
      tookMs: Date.now() - startedAt,
    });
    run.log(
      `fault #${f.index} ${describeFault(f)} on ${done.target ?? '-'}: ${done.outcome} (${Date.now() - startedAt} ms)` +
        (failure === undefined ? '' : ` -- NOT AS EXPECTED: ${failure}`),
    );
  }
}

/** Waits for the last record to be produced and counts what was. */
export async function finishProduction(run: ChaosRun, p: Production): Promise<void> {
  const { report } = run;
  await p.feeder.finished();
  report.produceSeconds = (p.feeder.finishedAt - p.feeder.startedAt) / 1000;
  if (p.workload) for (const [k, v] of p.workload.counts) report.produced.set(k, v);
  else report.produced.set('records', p.source.produced);
  run.log(`produced ${p.source.produced} records in ${report.produceSeconds.toFixed(1)} s`);
}

/** Every instance alive, the group's commits reach the end offsets (or a harness error says where they stopped). */
export async function drain(run: ChaosRun): Promise<void> {
  const { o, kafka, names, report, log } = run;
  const drainStart = Date.now();
  // a slow drain is worth a look while it lasts: the instances' last lines, once
  const slow = setTimeout(() => {
    for (const s of run.live()) log(`still draining after 30 s; ${s.inst.name}:${s.inst.tail(6)}`);
  }, 30_000);
  await pollUntil(
    'the group to commit the end offsets of the input',
    run.caughtUp,
    o.drainTimeoutMs,
    500,
  ).catch(async (err: Error) => {
    const where: string[] = [];
    for (const topic of run.inputTopics) {
      const committed = await kafka.committedOffsets(names.group, topic).catch(() => new Map());
      const ends = await kafka.endOffsets(topic).catch(() => new Map());
      where.push(
        `${run.inputTopics.length > 1 ? `${topic}: ` : ''}committed ${JSON.stringify([...committed])}, ends ${JSON.stringify([...ends])}`,
      );
    }
    report.harnessErrors.push(
      `${err.message}: ${where.join('; ')}` +
        run
          .live()
          .map((s) => s.inst.tail(8))
          .join(''),
    );
  });
  clearTimeout(slow);
  report.drainSeconds = (Date.now() - drainStart) / 1000;
  log(
    `drained in ${report.drainSeconds.toFixed(1)} s${run.ticking ? ' (every window closed by ticks)' : ''}`,
  );
}

/** No more restarts or scrapes; a last scrape of every live instance, then SIGTERM to each. */
export async function stopInstances(run: ChaosRun): Promise<void> {
  clearInterval(run.supervisor);
  clearInterval(run.scraper);
  for (const s of run.slots) run.unexpected(s);
  for (const s of run.live()) await s.inst.scrape();
  await Promise.all(run.live().map((s) => run.stopGracefully(s)));
}

/** Whatever happened: the timers stop, the feeder closes, and every instance this run started is killed. */
export async function killInstances(run: ChaosRun): Promise<void> {
  clearInterval(run.supervisor);
  clearInterval(run.scraper);
  await run.feeder?.close();
  for (const s of run.slots) s.expecting = true;
  // this run's children only: another run in the same process keeps its own
  await Promise.all(run.everyInstance.map((i) => i.kill()));
}

/** Verdict and dead-letter counts: the last scrape of every instance that ever ran. */
export function sumScrapes(run: ChaosRun): void {
  const { report } = run;
  for (const inst of run.everyInstance) {
    for (const [k, v] of inst.lastScrape?.verdicts ?? [])
      report.verdicts.set(k, (report.verdicts.get(k) ?? 0) + v);
    for (const [k, v] of inst.lastScrape?.deadLetters ?? [])
      report.deadLetterMetrics.set(k, (report.deadLetterMetrics.get(k) ?? 0) + v);
    for (const [k, v] of inst.lastScrape?.ticks ?? [])
      report.tickMetrics.set(k, (report.tickMetrics.get(k) ?? 0) + v);
  }
}

/**
 * What the run left, read back into the report: a handler's far-side calls judged against the input, a
 * user's processor's snapshot (outputs, dead letters, state), or the packaged processor's verification.
 */
export async function readBack(run: ChaosRun): Promise<void> {
  const { o, names, redis, farSide, report, log } = run;
  if (!redis) return;
  const kafkaConfig = o.kafkaConfig ? { kafkaConfig: o.kafkaConfig } : {};
  if (o.topology) {
    log('judging outputs and dead letters against the model');
    const { judgeTopology } = await import('./topology-run.js');
    const t = await judgeTopology({
      brokers: o.brokers,
      ...kafkaConfig,
      mode: o.mode,
      built: run.topology(o.topology.built),
      repartition: run.repartitionLog,
      inputs: run.inputTopics,
      outputs: run.outputTopics,
      deadLetter: names.deadLetter,
      group: names.group,
      produced: report.produced.get('records') ?? 0,
    });
    report.topology = t;
    // the repartition topics' reader's failures are the verdict's; with no repartition topic, the input's
    if (run.ticking && o.topology.built.repartitionTopics.length === 0)
      for (const f of run.repartitionLog?.failures ?? [])
        report.harnessErrors.push(`the harness's reader of the input: ${f}`);
    if (run.ticking)
      log(
        `ticks: ${t.ticks} read back (${t.ticksUnread} made after the drain, unread), ${t.tickOutputs} of the model's outputs theirs; ` +
          `the instances' redfence_topology_ticks_total: ${report.tickMetrics.get('produced') ?? 0} produced, ` +
          `${report.tickMetrics.get('consumed') ?? 0} consumed`,
      );
  } else if (o.handler && farSide) {
    log("judging the far side's calls");
    const { judgeHandler } = await import('./handler-run.js');
    report.handler = await judgeHandler({
      brokers: o.brokers,
      ...kafkaConfig,
      input: names.input,
      deadLetter: names.deadLetter,
      group: names.group,
      calls: farSide.calls,
      instances: run.everyInstance,
      returns: farSide.returns,
    });
  } else {
    // what both readers of a processor run take: the run's topics, group, store and Redis
    const where = {
      brokers: o.brokers,
      ...kafkaConfig,
      ...verifierRedis(redis),
      mode: o.mode,
      input: names.input,
      output: names.output,
      deadLetter: names.deadLetter,
      group: names.group,
      store: names.store,
    };
    if (o.processor) {
      log('reading back outputs, dead letters and state');
      const { snapshot } = await import('./compare.js');
      report.snapshot = await snapshot(where);
      return;
    }
    log('verifying');
    report.verify = await verify({
      ...where,
      partitions: o.partitions,
      produced: report.produced,
      verdicts: report.verdicts,
      ...(run.drifted.size > 0 ? { drifted: { customers: run.drifted, total: DRIFT_TOTAL } } : {}),
    });
  }
}

/** Whatever happened: the Redis side and far side stop, the topics and directory go (unless kept). */
export async function cleanup(run: ChaosRun): Promise<void> {
  const { o, names, kafka } = run;
  if (run.redis) await stopRedisSide(run.redis);
  await run.farSide?.stop();
  await run.repartitionLog?.close();
  if (!o.keep) {
    await kafka.deleteTopics([
      ...run.madeInputTopics(),
      ...run.outputTopics,
      names.deadLetter,
      ...run.repartitionTopics.keys(),
    ]);
    await rm(run.dir, { recursive: true, force: true });
  }
  await kafka.close();
}

/** The run's duration and verdict (src/chaos/verdict.ts). */
export function finish(run: ChaosRun): ChaosReport {
  const { report } = run;
  report.totalSeconds = (Date.now() - run.t0) / 1000;
  report.failures = judge(report);
  report.ok = report.failures.length === 0;
  return report;
}
