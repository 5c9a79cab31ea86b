/**
 * How long an instance may take to exit after SIGTERM before the harness SIGKILLs it and reports a
 * harness error (a close that hangs). An instance stopped while still starting finishes its start first
 * (loading, connecting, joining the group): on a loaded machine that alone took over 25 s.
 */
const STOP_TIMEOUT_MS = 60_000;

/**
 * One chaos run's state and the moves made on it: its names (topics, group, store), schedule and report,
 * its Kafka clients, the Redis and far side it starts, the instance slots and every instance that ever
 * ran, the feeder; starting, restarting and stopping instances, the supervisor's test for an exit no
 * fault caused, the context the faults act through (src/chaos/faults.ts) and whether the group has
 * committed the whole input. The steps that use it are src/chaos/run-steps.ts.
 */
import { randomBytes } from 'node:crypto';
import type { Exit } from '../harness/child.js';
import type { ModelInput } from '../topology/model.js';
import type { FarSide } from './far-side.js';
import type { FaultContext, Slot } from './faults.js';
import { type Instance, startInstance } from './instances.js';
import { ChaosKafka } from './kafka.js';
import { LATE_REFRESH_MS, type LateTopicReport, lateTopic } from './late-topic.js';
import { instanceRedisArgs, type RedisSide } from './redis-topology.js';
import type { RepartitionLog } from './repartition-log.js';
import { randomSeed } from './rng.js';
import type { ChaosOptions, ChaosReport, UserProcessor } from './run-options.js';
import { type Fault, makeSchedule } from './schedule.js';
import { checkTopicShape, inputCounts } from './topic-shape.js';
import { chaosTopics, onChaosTopics } from './topology-module.js';
import { asModelInput, pendingFinals, repartitionCounts, tasksOf } from './topology-stages.js';
import { chaosDeadLetter, runInputTopic, runInputTopics } from './topology-topics.js';
import type { Feeder } from './workload.js';

export class ChaosRun {
  readonly o: ChaosOptions;
  readonly seed: number;
  /** When the run started (ms since the epoch); log lines carry the seconds since. */
  readonly t0: number;
  /** A user's processor or handler (its module and records), or none: the packaged processor. */
  readonly user: UserProcessor | undefined;
  readonly names: ChaosReport['names'];
  /** The output topics: `names.output`, and a topology's further sinks (`<output>-1`, ...). */
  readonly outputTopics: string[];
  /**
   * The input topics: `names.input`, or a topology's (its listed inputs, `names.input` and
   * `<input>-1`, ..., then the topics its records name for its patterns: src/chaos/topology-topics.ts).
   */
  readonly inputTopics: string[];
  /**
   * A topology's repartition topics on the run's names -> partition count, in the order they are written
   * (the harness makes them before the instances start); empty for any other run.
   */
  readonly repartitionTopics: Map<string, number>;
  /** Each input topic's partition count (`partitions`, or its `inputPartitions`). */
  readonly inputPartitions: Map<string, number>;
  /** A topology's topic made while the run lasts (`lateTopic`: src/chaos/late-topic.ts), once it is made. */
  readonly late: LateTopicReport | undefined;
  /** The instances' pick-up of the late topic, queued once the harness has made it. */
  pickup: Promise<void> | undefined;
  /** The end of the last step that runs alone (a fault, the pick-up of a late topic): see exclusive(). */
  #turn: Promise<unknown> = Promise.resolve();
  /** The harness's reader of the repartition topics (src/chaos/repartition-log.ts), while the run lasts. */
  repartitionLog: RepartitionLog | undefined;
  readonly schedule: Fault[];
  readonly report: ChaosReport;
  readonly kafka: ChaosKafka;
  /** The Redis side's directory (made by the harness before anything starts). */
  dir = '';
  redis: RedisSide | undefined;
  farSide: FarSide | undefined;
  readonly slots: Slot[] = [];
  /** Customers the `repair` faults drifted (src/chaos/repair.ts), for the verifier. */
  readonly drifted = new Set<string>();
  /** Every instance of every slot and generation: the ones killed at the end and scraped for counts. */
  readonly everyInstance: Instance[] = [];
  feeder: Feeder | undefined;
  /**
   * When the first fault not yet started is due (ms since the epoch; infinite when none is left): the
   * feeder's input does not run ahead of it by more than a margin (run-steps.ts `productionLimit`).
   */
  nextFaultDue = Number.POSITIVE_INFINITY;
  scraper: NodeJS.Timeout | undefined;
  supervisor: NodeJS.Timeout | undefined;
  #nextId = 0;
  readonly #startLine: string;

  constructor(o: ChaosOptions) {
    this.o = o;
    const seed = o.seed ?? randomSeed();
    this.seed = seed;
    this.t0 = Date.now();
    const user = o.handler ?? o.processor ?? o.topology;
    this.user = user;
    const modeTag = o.handler ? 'hdl' : o.mode === 'exactly-once' ? 'eos' : 'alo';
    const tag = `${o.label === undefined ? '' : `${o.label}-`}${modeTag}-${seed}-${randomBytes(3).toString('hex')}`;
    const [inName, outName] = user ? ['input', 'output'] : ['orders', 'totals'];
    this.names = {
      input: `chaos-${tag}-${inName}`,
      output: `chaos-${tag}-${outName}`,
      deadLetter: `chaos-${tag}-${inName}.DLT`,
      group: `chaos-${tag}-group`,
      store: `chaos_${tag.replace(/-/g, '_')}`,
    };
    this.outputTopics = o.topology
      ? [...chaosTopics(o.topology.built, this.names.input, this.names.output).outputs.values()]
      : [this.names.output];
    this.inputTopics = o.topology
      ? runInputTopics(
          o.topology.module,
          o.topology.built,
          o.topology.records.map((r) => r.topic),
          this.names,
        )
      : [this.names.input];
    // the runtime's default for the topology on these topics (`<app>.DLT` when a pattern reads first)
    if (o.topology) this.names.deadLetter = chaosDeadLetter(this.topology(o.topology.built));
    const t = o.topology;
    if (t) checkTopicShape(t.module, t.built, new Set(t.records.map((r) => r.topic)), o);
    this.inputPartitions = inputCounts(this.inputTopics, o, (x) => this.inputTopicOf(x));
    this.repartitionTopics = o.topology
      ? repartitionCounts(this.topology(o.topology.built), o.partitions, this.inputPartitions)
      : new Map();
    const late = o.lateTopic === undefined || !t ? undefined : this.inputTopicOf(o.lateTopic);
    this.late =
      late === undefined ? late : lateTopic(o.lateTopic as string, late, this.inputPartitions.get(late) ?? 1);
    const schedule = makeSchedule({ ...o, seed });
    this.schedule = schedule;
    this.report = {
      seed,
      startedAt: new Date(this.t0).toISOString(),
      options: o,
      schedule,
      names: this.names,
      faults: [],
      unexpectedExits: [],
      verdicts: new Map(),
      deadLetterMetrics: new Map(),
      tickMetrics: new Map(),
      produced: new Map(),
      produceSeconds: 0,
      drainSeconds: 0,
      totalSeconds: 0,
      verify: undefined,
      harnessErrors: [],
      failures: [],
      ok: false,
      ...(this.late ? { lateTopic: this.late } : {}),
    };
    this.#startLine = o.handler
      ? 'handler started'
      : o.topology
        ? 'topology processor started'
        : 'processor started';
    this.log(
      `${o.label === undefined ? '' : `${o.label}: `}seed ${seed}, ${o.handler ? 'handler' : `mode ${o.mode}`}, ${user?.records.length ?? o.records} records over ${o.durationS}s, ${schedule.length} faults: ` +
        schedule
          .map((f) =>
            f.kind === 'crash' ? `crash:${f.point}` : f.kind === 'scale' ? `scale:${f.to}` : f.kind,
          )
          .join(' '),
    );
    this.kafka = new ChaosKafka(o.brokers, o.kafkaConfig);
  }

  /** A topology on the run's topics and applicationId (what the instances run). */
  topology(built: NonNullable<ChaosOptions['topology']>['built']) {
    return onChaosTopics(built, chaosTopics(built, this.names.input, this.names.output), this.names.store);
  }

  /** The run's topic of a topology record naming the module's `topic` (src/chaos/topology-topics.ts). */
  inputTopicOf(topic: string | undefined): string {
    const t = this.o.topology;
    if (t === undefined || topic === undefined) return this.names.input;
    return runInputTopic(chaosTopics(t.built, this.names.input, this.names.output), topic);
  }

  /** A progress line, stamped with the seconds since the run started. */
  log = (s: string): void => {
    this.o.log?.(`[${((Date.now() - this.t0) / 1000).toFixed(1)}s] ${s}`);
  };

  live = (): Slot[] => this.slots.filter((s) => s.inst.alive);

  /** The input topics that exist now (a late topic only once the harness has made it). */
  madeInputTopics(): string[] {
    const late = this.late;
    return late === undefined || late.createdAt !== undefined
      ? this.inputTopics
      : this.inputTopics.filter((t) => t !== late.topic);
  }

  /**
   * Runs `step` once every step queued before it has ended, and no other such step beside it: the
   * schedule's faults and the pick-up of a late topic (src/chaos/late-topic.ts) act on the same slots.
   */
  exclusive<T>(step: () => Promise<T>): Promise<T> {
    const run = this.#turn.then(step);
    this.#turn = run.catch(() => undefined);
    return run;
  }

  async #spawnSlot(
    slot: Omit<Slot, 'inst' | 'generation'> & { generation?: number },
    env?: Record<string, string>,
  ): Promise<Slot> {
    const { o, names, farSide } = this;
    const generation = slot.generation ?? 0;
    const inst = await startInstance({
      id: slot.id,
      generation,
      mode: o.mode,
      brokers: o.brokers,
      redisArgs: instanceRedisArgs(this.redis as RedisSide),
      runArgs: o.handler
        ? ['--commit-interval', String(o.handler.commitIntervalMs)]
        : [
            ...(o.waitReplicas === undefined ? [] : ['--wait-replicas', String(o.waitReplicas)]),
            ...(o.waitTimeoutMs === undefined ? [] : ['--wait-timeout', String(o.waitTimeoutMs)]),
            ...(o.commitIntervalMs === undefined ? [] : ['--commit-interval', String(o.commitIntervalMs)]),
            ...(o.idleCloseMs === undefined ? [] : ['--idle-close', String(o.idleCloseMs)]),
            ...(this.late === undefined ? [] : ['--pattern-refresh', String(LATE_REFRESH_MS)]),
          ],
      orders: names.input,
      totals: names.output,
      store: names.store,
      group: names.group,
      sessionTimeoutMs: o.sessionTimeoutMs,
      ...(this.user ? { userModule: this.user.module } : {}),
      ...(o.handler ? { handler: true } : {}),
      ...(o.topology ? { topology: true } : {}),
      ...(env || o.kafkaEnv || farSide
        ? { env: { ...o.kafkaEnv, ...(farSide ? { REDFENCE_CHAOS_FAR_SIDE: farSide.url } : {}), ...env } }
        : {}),
    });
    this.everyInstance.push(inst);
    const full: Slot = { ...slot, generation, inst };
    return full;
  }

  /**
   * Waits for the slot's instance to log its start line; a failure names its exit (or the bound) and
   * carries its last log and output lines (the log book's own message has only the JSON log lines).
   */
  async #started(s: Slot): Promise<void> {
    const inst = s.inst;
    try {
      await inst.waitFor(this.#startLine, (l) => l.msg === this.#startLine, 90_000);
    } catch {
      const line = JSON.stringify(this.#startLine);
      const why = inst.alive
        ? `logged no ${line} within 90000 ms`
        : `exited ${JSON.stringify(inst.exit)} before logging ${line}`;
      throw new Error(`${inst.name} (pid ${inst.pid}) ${why}${inst.lastLines(12)}`);
    }
  }

  addInstance = async (): Promise<Slot> => {
    const slot = await this.#spawnSlot({ id: `i${this.#nextId++}`, expecting: false });
    this.slots.push(slot);
    await this.#started(slot);
    if (this.late) this.late.firstStartedAt ??= (Date.now() - this.t0) / 1000;
    this.log(`started ${slot.inst.name} (pid ${slot.inst.pid}); ${this.live().length} live`);
    return slot;
  };

  restart = async (slot: Slot, env?: Record<string, string>): Promise<void> => {
    const next = await this.#spawnSlot(
      { id: slot.id, expecting: false, generation: slot.generation + 1 },
      env,
    );
    slot.inst = next.inst;
    slot.generation = next.generation;
    // An armed instance (env) is meant to die; any other is left alone by the faults until it has
    // started (a fault stopping it mid-start would fail the restart).
    slot.expecting = true;
    if (env) return;
    await this.#started(slot);
    slot.expecting = false;
  };

  stopGracefully = async (slot: Slot): Promise<{ exit: Exit; forced: boolean }> => {
    slot.expecting = true;
    await slot.inst.scrape();
    const stopped = await slot.inst.child.terminate(STOP_TIMEOUT_MS);
    if (stopped.forced)
      this.report.harnessErrors.push(
        `${slot.inst.name} did not exit within ${STOP_TIMEOUT_MS / 1000} s of SIGTERM: SIGKILLed`,
      );
    return stopped;
  };

  /** What the faults act through (src/chaos/faults.ts). */
  faultContext(r: RedisSide): FaultContext {
    const { o } = this;
    return {
      sessionTimeoutMs: o.sessionTimeoutMs,
      crashTimeoutMs: o.crashTimeoutMs,
      redis: r,
      ...(this.user
        ? {}
        : {
            repair: {
              brokers: o.brokers,
              ...(o.kafkaConfig ? { kafkaConfig: o.kafkaConfig } : {}),
              names: this.names,
              committed: () => this.kafka.committedOffsets(this.names.group, this.names.input),
              drifted: (customers) => {
                for (const c of customers) this.drifted.add(c);
              },
            },
          }),
      slots: this.slots,
      live: this.live,
      addInstance: this.addInstance,
      restart: this.restart,
      stopGracefully: this.stopGracefully,
      inputDone: async () => (this.feeder?.done ?? false) && (await this.caughtUp()),
      // produced, or about to be: the feeder paces the input over the run's duration
      inputProduced: () =>
        (this.feeder?.done ?? false) ||
        (this.feeder !== undefined && (Date.now() - this.feeder.startedAt) / 1000 > o.durationS - 10),
    };
  }

  /** Any exit the harness did not cause is listed (it fails the run); the supervisor restarts it. */
  unexpected(s: Slot): boolean {
    if (s.inst.alive || s.expecting) return false;
    s.expecting = true;
    const what = `${s.inst.name} exited on its own ${JSON.stringify(s.inst.exit)}`;
    this.report.unexpectedExits.push(`${what}${s.inst.lastLines(8)}`);
    this.log(what);
    return true;
  }

  /**
   * The group has committed the end offsets of every input topic's partitions, and then (a topology's) every
   * repartition partition past its last record, in the order they are written: a task's records are
   * written before its commit, so a topic checked after the ones its writers read has all of them.
   */
  caughtUp = async (): Promise<boolean> => {
    const { kafka, names } = this;
    const log = this.repartitionLog;
    // a late topic not made yet has records to come
    if (this.late !== undefined && this.late.createdAt === undefined) return false;
    if (!this.ticking)
      for (const topic of this.inputTopics) {
        const [committed, ends] = await Promise.all([
          kafka.committedOffsets(names.group, topic),
          kafka.endOffsets(topic),
        ]);
        if (!committedToEnd(committed, ends)) return false;
      }
    // a reader that fell behind the purge never reaches the end: the verdict fails the run for it
    if (log === undefined || log.failures.length > 0) return true;
    const topics = [...(this.ticking ? this.inputTopics : []), ...this.repartitionTopics.keys()];
    for (const topic of topics) {
      const [done, high] = await Promise.all([
        kafka.committedOffsets(names.group, topic),
        kafka.endOffsets(topic),
      ]);
      for (const [p, end] of high) {
        // read to the end (its markers too), and the group committed past the last record read
        if (log.position(topic, p) < end && end > 0) return false;
        const next = log.next(topic, p);
        if (next > 0 && (done.get(p) ?? -1) < next) return false;
      }
    }
    return !this.ticking || this.#windowsClosed(log);
  };

  /** With `idleCloseMs` (a topology's): the instances get `--idle-close`, and ticks are waited for. */
  get ticking(): boolean {
    return this.o.topology !== undefined && this.o.idleCloseMs !== undefined;
  }

  /**
   * Whether the ticks made so far have closed every window the records opened: the model over every
   * partition as read gives no further final result for a tick far past them (pendingFinals). Each
   * instance keeps making ticks into a partition until then (src/processor/topology/ticks.ts).
   */
  #windowsClosed(log: RepartitionLog): boolean {
    const built = this.topology((this.o.topology as NonNullable<ChaosOptions['topology']>).built);
    const tasks = new Map<string, ModelInput[]>();
    for (const topic of [...this.inputTopics, ...this.repartitionTopics.keys()])
      for (const [task, list] of tasksOf(asModelInput(topic, log.records(topic)))) tasks.set(task, list);
    return pendingFinals(built, tasks) === 0;
  }
}

/**
 * Whether a group's commits reach every partition's end. A partition that never held a record (end 0)
 * needs no commit: a group never commits what it never read (an input with fewer keys than partitions).
 */
export function committedToEnd(
  committed: ReadonlyMap<number, number>,
  ends: ReadonlyMap<number, number>,
): boolean {
  for (const [p, end] of ends) if ((committed.get(p) ?? (end === 0 ? 0 : -1)) !== end) return false;
  return true;
}
