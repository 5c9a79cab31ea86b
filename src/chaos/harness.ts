/**
 * (Over 400 lines: one run's lifecycle, start to cleanup, reads best in one place.)
 *
 * The chaos harness: real Kafka, a Redis of its own (one server, a Sentinel set or a cluster:
 * src/chaos/redis-topology.ts), instances of the package's customer-totals processor as child processes
 * (src/chaos/instances.ts), a skewed workload with poison produced while they run, and a seeded schedule
 * of faults (crash points, SIGKILLs, a zombie, Redis restarts and failovers, scaling; src/chaos/faults.ts
 * and src/chaos/failover.ts). When the input is all produced and every fault has run, it waits for the group
 * to commit the input's end offsets, stops the instances and hands everything to the verifier
 * (src/chaos/verifier.ts); the verdict (src/chaos/verdict.ts) also fails the run for a fault that did
 * not do what it is meant to and for an instance exit no fault caused.
 *
 * With `processor` (a user's module and its input records) the instances run that module instead, the
 * records are produced as given, and instead of the verifier the run's results are read back
 * (src/chaos/compare.ts) for the comparison with a fault-free run (src/chaos/any-module.ts).
 *
 * With `handler` (a handler module: the built-in webhook or a user's) the instances run that handler,
 * which calls a far side the harness starts (src/chaos/far-side.ts); after the drain the far side's calls
 * are judged against the input (src/chaos/handler-run.ts, handler-verdict.ts).
 *
 * Every wait is a poll or an awaited event with a timeout; the only sleeps are the schedule's pacing
 * (when a fault is due, how long a process stays down). Every child is killed and every topic deleted
 * at the end, whatever happens.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Exit } from '../harness/child.js';
import { pollUntil } from '../harness/poll.js';
import type { Comparison, Snapshot } from './compare.js';
import type { FarSide } from './far-side.js';
import { type FaultContext, inject, type Slot } from './faults.js';
import type { HandlerResult } from './handler-verdict.js';
import { type Instance, type Mode, startInstance } from './instances.js';
import { ChaosKafka, type ConnectionConfig } from './kafka.js';
import type { InputRecord } from './module.js';
import {
  instanceRedisArgs,
  type RedisSide,
  startRedisSide,
  stopRedisSide,
  type Topology,
  verifierRedis,
} from './redis-topology.js';
import { randomSeed } from './rng.js';
import { type Fault, type FaultKind, makeSchedule, type ScheduleOptions } from './schedule.js';
import { type FaultOutcome, type Injected, judge, judgeFault } from './verdict.js';
import { type VerifyResult, verify } from './verifier.js';
import { Feeder, RecordList, type RecordSource, Workload } from './workload.js';

export type { FaultOutcome };

/** The faults (kills, crashes, zombies, Redis restarts and failovers, scale) are the schedule's options. */
export interface ChaosOptions extends Omit<ScheduleOptions, 'seed' | 'mode'> {
  mode: Mode;
  /** Default: a random seed (printed; pass it back to reproduce the workload and the schedule). */
  seed?: number;
  brokers: string[];
  /** librdkafka properties of the harness's own clients (security, `--kafka-config`). */
  kafkaConfig?: ConnectionConfig;
  /** Environment of every instance that gives it the same Kafka connection (`REDFENCE_KAFKA_*`). */
  kafkaEnv?: Record<string, string>;
  records: number;
  customers: number;
  partitions: number;
  /** Production window in seconds: records are produced at records / durationS per second. */
  durationS: number;
  poisonRate: number;
  /** Valid orders padded to just under 1 MB. */
  large: number;
  skew: number;
  sessionTimeoutMs: number;
  /** Waiting for the group to commit the whole input after the last fault. */
  drainTimeoutMs: number;
  /** A crash-armed instance that has not crashed within this long is killed and noted. */
  crashTimeoutMs: number;
  /** The Redis the harness starts (src/chaos/redis-topology.ts); redis-failover faults fit it. */
  redisTopology: Topology;
  /** `redfence run --wait-replicas` (and `--wait-timeout`) for every instance; default: no WAIT. */
  waitReplicas?: number;
  waitTimeoutMs?: number;
  /** Processors: the instances' `--commit-interval` (least ms between two Kafka steps). Default 0. */
  commitIntervalMs?: number;
  /** Sentinel and cluster failovers: how long the replica is stopped before its primary dies. */
  replicaLagMs?: number;
  /** A user's processor module (absolute path) and the records to produce, instead of the orders workload. */
  processor?: UserProcessor;
  /** A handler module and its records, instead of a processor (src/chaos/handler-run.ts). */
  handler?: UserHandler;
  /** A word in the run's names (`ref`: the fault-free run of a comparison). */
  label?: string;
  /** Keep topics and the Redis directory (for a look afterwards). */
  keep?: boolean;
  /** Progress lines. */
  log?: (line: string) => void;
}

export interface UserProcessor {
  module: string;
  records: readonly InputRecord[];
  /** Record i is produced with CreateTime timestampBase + i (the same in both runs). */
  timestampBase: number;
}

export interface UserHandler extends UserProcessor {
  /** The far side's latency of every call, uniform in [min, max] ms. */
  latencyMs: readonly [number, number];
  /** The fraction of far-side calls answered 503. */
  failureRate: number;
  /** The instances' `--commit-interval`. */
  commitIntervalMs: number;
}

export const DEFAULTS: Omit<ChaosOptions, 'mode' | 'brokers'> = {
  records: 20_000,
  customers: 500,
  partitions: 6,
  durationS: 60,
  poisonRate: 0.005,
  large: 2,
  skew: 1.1,
  kills: 5,
  crashes: 0,
  zombies: 1,
  redisRestarts: 1,
  redisFailovers: 0,
  scale: [1, 3, 2],
  sessionTimeoutMs: 6000,
  drainTimeoutMs: 300_000,
  crashTimeoutMs: 60_000,
  redisTopology: 'standalone',
};

export interface ChaosReport {
  seed: number;
  /** When the run started (ISO 8601). */
  startedAt: string;
  options: ChaosOptions;
  /** Every fault scheduled; `faults` has the outcome of each that ran. */
  schedule: Fault[];
  names: { input: string; output: string; deadLetter: string; group: string; store: string };
  faults: FaultOutcome[];
  unexpectedExits: string[];
  verdicts: Map<string, number>;
  deadLetterMetrics: Map<string, number>;
  produced: Map<string, number>;
  produceSeconds: number;
  drainSeconds: number;
  totalSeconds: number;
  verify: VerifyResult | undefined;
  /** A user's processor: what the run left (read back after the drain). */
  snapshot?: Snapshot;
  /** A user's processor: the comparison with the fault-free run (src/chaos/any-module.ts). */
  comparison?: Comparison;
  /** A handler: the far side's calls judged against the input (src/chaos/handler-verdict.ts). */
  handler?: HandlerResult;
  /** A user's processor: the fault-free run's names, duration and failures. */
  reference?: { names: ChaosReport['names']; totalSeconds: number; failures: string[] };
  /** Harness problems (no drain, an instance that would not stop): each fails the run. */
  harnessErrors: string[];
  /** Why the run fails (src/chaos/verdict.ts); empty when it is OK. */
  failures: string[];
  ok: boolean;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runChaos(input: Partial<ChaosOptions> & Pick<ChaosOptions, 'mode' | 'brokers'>) {
  const o: ChaosOptions = { ...DEFAULTS, ...input };
  const seed = o.seed ?? randomSeed();
  const t0 = Date.now();
  const at = () => `${((Date.now() - t0) / 1000).toFixed(1)}s`;
  const log = (s: string) => o.log?.(`[${at()}] ${s}`);
  const user = o.handler ?? o.processor;
  const modeTag = o.handler ? 'hdl' : o.mode === 'exactly-once' ? 'eos' : 'alo';
  const tag = `${o.label === undefined ? '' : `${o.label}-`}${modeTag}-${seed}-${randomBytes(3).toString('hex')}`;
  const [inName, outName] = user ? ['input', 'output'] : ['orders', 'totals'];
  const names = {
    input: `chaos-${tag}-${inName}`,
    output: `chaos-${tag}-${outName}`,
    deadLetter: `chaos-${tag}-${inName}.DLT`,
    group: `chaos-${tag}-group`,
    store: `chaos_${tag.replace(/-/g, '_')}`,
  };
  const schedule = makeSchedule({ ...o, seed });
  const report: ChaosReport = {
    seed,
    startedAt: new Date(t0).toISOString(),
    options: o,
    schedule,
    names,
    faults: [],
    unexpectedExits: [],
    verdicts: new Map(),
    deadLetterMetrics: new Map(),
    produced: new Map(),
    produceSeconds: 0,
    drainSeconds: 0,
    totalSeconds: 0,
    verify: undefined,
    harnessErrors: [],
    failures: [],
    ok: false,
  };
  log(
    `${o.label === undefined ? '' : `${o.label}: `}seed ${seed}, ${o.handler ? 'handler' : `mode ${o.mode}`}, ${user?.records.length ?? o.records} records over ${o.durationS}s, ${schedule.length} faults: ` +
      schedule
        .map((f) => (f.kind === 'crash' ? `crash:${f.point}` : f.kind === 'scale' ? `scale:${f.to}` : f.kind))
        .join(' '),
  );

  const kafka = new ChaosKafka(o.brokers, o.kafkaConfig);
  const dir = await mkdtemp(join(tmpdir(), 'redfence-chaos-'));
  let redis: RedisSide | undefined;
  let farSide: FarSide | undefined;
  const slots: Slot[] = [];
  const everyInstance: Instance[] = [];
  let feeder: Feeder | undefined;
  let scraper: NodeJS.Timeout | undefined;
  let supervisor: NodeJS.Timeout | undefined;
  let nextId = 0;
  let failed: Error | undefined;

  const live = () => slots.filter((s) => s.inst.alive);
  const spawnSlot = async (
    slot: Omit<Slot, 'inst' | 'generation'> & { generation?: number },
    env?: Record<string, string>,
  ) => {
    const generation = slot.generation ?? 0;
    const inst = await startInstance({
      id: slot.id,
      generation,
      mode: o.mode,
      brokers: o.brokers,
      redisArgs: instanceRedisArgs(redis as RedisSide),
      runArgs: o.handler
        ? ['--commit-interval', String(o.handler.commitIntervalMs)]
        : [
            ...(o.waitReplicas === undefined ? [] : ['--wait-replicas', String(o.waitReplicas)]),
            ...(o.waitTimeoutMs === undefined ? [] : ['--wait-timeout', String(o.waitTimeoutMs)]),
            ...(o.commitIntervalMs ? ['--commit-interval', String(o.commitIntervalMs)] : []),
          ],
      orders: names.input,
      totals: names.output,
      store: names.store,
      group: names.group,
      sessionTimeoutMs: o.sessionTimeoutMs,
      ...(user ? { userModule: user.module } : {}),
      ...(o.handler ? { handler: true } : {}),
      ...(env || o.kafkaEnv || farSide
        ? { env: { ...o.kafkaEnv, ...(farSide ? { REDFENCE_CHAOS_FAR_SIDE: farSide.url } : {}), ...env } }
        : {}),
    });
    everyInstance.push(inst);
    const full: Slot = { ...slot, generation, inst };
    return full;
  };
  const startLine = o.handler ? 'handler started' : 'processor started';
  const started = (s: Slot) => s.inst.waitFor(startLine, (l) => l.msg === startLine, 90_000);
  const addInstance = async () => {
    const slot = await spawnSlot({ id: `i${nextId++}`, expecting: false });
    slots.push(slot);
    await started(slot);
    log(`started ${slot.inst.name} (pid ${slot.inst.pid}); ${live().length} live`);
    return slot;
  };
  const restart = async (slot: Slot, env?: Record<string, string>) => {
    const next = await spawnSlot({ id: slot.id, expecting: false, generation: slot.generation + 1 }, env);
    slot.inst = next.inst;
    slot.generation = next.generation;
    // An armed instance (env) is meant to die; any other is left alone by the faults until it has
    // started (a fault stopping it mid-start would fail the restart).
    slot.expecting = true;
    if (env) return;
    await started(slot);
    slot.expecting = false;
  };
  const stopGracefully = async (slot: Slot): Promise<{ exit: Exit; forced: boolean }> => {
    slot.expecting = true;
    await slot.inst.scrape();
    const stopped = await slot.inst.child.terminate(25_000);
    if (stopped.forced)
      report.harnessErrors.push(`${slot.inst.name} did not exit within 25 s of SIGTERM: SIGKILLed`);
    return stopped;
  };
  const inputDone = async () => (feeder?.done ?? false) && (await caughtUp());
  const context = (r: RedisSide): FaultContext => ({
    sessionTimeoutMs: o.sessionTimeoutMs,
    crashTimeoutMs: o.crashTimeoutMs,
    redis: r,
    slots,
    live,
    addInstance,
    restart,
    stopGracefully,
    inputDone,
    // produced, or about to be: the feeder paces the input over the run's duration
    inputProduced: () =>
      (feeder?.done ?? false) ||
      (feeder !== undefined && (Date.now() - feeder.startedAt) / 1000 > o.durationS - 10),
  });
  /** Any exit the harness did not cause is listed (it fails the run); the supervisor restarts it. */
  const unexpected = (s: Slot): boolean => {
    if (s.inst.alive || s.expecting) return false;
    s.expecting = true;
    const what = `${s.inst.name} exited on its own ${JSON.stringify(s.inst.exit)}`;
    report.unexpectedExits.push(`${what}${s.inst.tail(6)}`);
    log(what);
    return true;
  };

  try {
    redis = await startRedisSide(o.redisTopology, dir, o.redisFailovers, o.replicaLagMs);
    if (o.handler) {
      const { FarSide } = await import('./far-side.js');
      farSide = new FarSide({ latencyMs: o.handler.latencyMs, failureRate: o.handler.failureRate, seed });
      log(
        `far side ${await farSide.start()}: latency ${o.handler.latencyMs.join('-')} ms, ${o.handler.failureRate} failing`,
      );
    }
    const faultContext = context(redis);
    await kafka.createTopics([
      { topic: names.input, partitions: o.partitions },
      { topic: names.output, partitions: o.partitions },
      { topic: names.deadLetter, partitions: 1 },
    ]);
    log(
      `topics ${names.input} (+ ${user ? 'output' : 'totals'}, .DLT); Redis ${o.redisTopology} ${instanceRedisArgs(redis).join(' ')} ` +
        `(AOF, appendfsync always)${o.waitReplicas === undefined ? ', no WAIT' : `, WAIT ${o.waitReplicas}`}` +
        (!o.handler && o.commitIntervalMs ? `; instances commit every ${o.commitIntervalMs} ms at most` : ''),
    );

    // Instances, and a supervisor that restarts any that dies without the harness causing it.
    for (let i = 0; i < (o.scale[0] ?? 1); i++) await addInstance();
    supervisor = setInterval(() => {
      for (const s of slots) {
        if (!unexpected(s)) continue;
        log(`restarting ${s.id}`);
        void restart(s).catch((err: Error) =>
          report.harnessErrors.push(`restart of ${s.id}: ${err.message}`),
        );
      }
    }, 500);
    scraper = setInterval(() => {
      for (const s of live()) void s.inst.scrape();
    }, 1000);

    // The workload (or the user's records), produced while faults run.
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
    const source: RecordSource =
      workload ?? new RecordList(user?.records ?? [], o.partitions, user?.timestampBase ?? 0);
    const total = user?.records.length ?? o.records;
    feeder = new Feeder(kafka.producer(), names.input, source, total / o.durationS);
    feeder.start();
    const windowMs = o.durationS * 1000;
    const produceStart = Date.now();

    for (const f of schedule) {
      const due = produceStart + f.at * windowMs;
      if (Date.now() < due) await sleep(due - Date.now()); // pacing: the fault's due time
      const startedAt = Date.now();
      const done: Injected = await inject(faultContext, f).catch((err: Error) => {
        const first = err.message.split('\n')[0] ?? '';
        return { outcome: `failed: ${first}`, facts: { error: err.message } };
      });
      const failure = judgeFault(f, done.facts);
      report.faults.push({
        fault: f,
        ...done,
        ...(failure === undefined ? {} : { failure }),
        startedAt: startedAt - t0,
        tookMs: Date.now() - startedAt,
      });
      log(
        `fault #${f.index} ${describeFault(f)} on ${done.target ?? '-'}: ${done.outcome} (${Date.now() - startedAt} ms)` +
          (failure === undefined ? '' : ` -- NOT AS EXPECTED: ${failure}`),
      );
    }
    await feeder.finished();
    report.produceSeconds = (feeder.finishedAt - feeder.startedAt) / 1000;
    if (workload) for (const [k, v] of workload.counts) report.produced.set(k, v);
    else report.produced.set('records', source.produced);
    log(`produced ${source.produced} records in ${report.produceSeconds.toFixed(1)} s`);

    // Drain: every instance alive, the group's commits reach the end offsets.
    const drainStart = Date.now();
    // a slow drain is worth a look while it lasts: the instances' last lines, once
    const slow = setTimeout(() => {
      for (const s of live()) log(`still draining after 30 s; ${s.inst.name}:${s.inst.tail(6)}`);
    }, 30_000);
    await pollUntil(
      'the group to commit the end offsets of the input',
      caughtUp,
      o.drainTimeoutMs,
      500,
    ).catch(async (err: Error) => {
      const committed = await kafka.committedOffsets(names.group, names.input).catch(() => new Map());
      const ends = await kafka.endOffsets(names.input).catch(() => new Map());
      report.harnessErrors.push(
        `${err.message}: committed ${JSON.stringify([...committed])}, ends ${JSON.stringify([...ends])}` +
          live()
            .map((s) => s.inst.tail(8))
            .join(''),
      );
    });
    clearTimeout(slow);
    report.drainSeconds = (Date.now() - drainStart) / 1000;
    log(`drained in ${report.drainSeconds.toFixed(1)} s`);
    clearInterval(supervisor);
    clearInterval(scraper);
    for (const s of slots) unexpected(s);
    for (const s of live()) await s.inst.scrape();
    await Promise.all(live().map((s) => stopGracefully(s)));
  } catch (err) {
    failed = err as Error;
    report.harnessErrors.push(`harness: ${(err as Error).stack ?? err}`);
  } finally {
    clearInterval(supervisor);
    clearInterval(scraper);
    await feeder?.close();
    for (const s of slots) s.expecting = true;
    // this run's children only: another run in the same process keeps its own
    await Promise.all(everyInstance.map((i) => i.kill()));
  }

  // Verdict and dead-letter counts: the last scrape of every instance that ever ran.
  for (const inst of everyInstance) {
    for (const [k, v] of inst.lastScrape?.verdicts ?? [])
      report.verdicts.set(k, (report.verdicts.get(k) ?? 0) + v);
    for (const [k, v] of inst.lastScrape?.deadLetters ?? [])
      report.deadLetterMetrics.set(k, (report.deadLetterMetrics.get(k) ?? 0) + v);
  }

  try {
    if (!failed && redis && o.handler && farSide) {
      log("judging the far side's calls");
      const { judgeHandler } = await import('./handler-run.js');
      report.handler = await judgeHandler({
        brokers: o.brokers,
        ...(o.kafkaConfig ? { kafkaConfig: o.kafkaConfig } : {}),
        input: names.input,
        deadLetter: names.deadLetter,
        group: names.group,
        calls: farSide.calls,
        instances: everyInstance,
        returns: farSide.returns,
      });
    } else if (!failed && redis && o.processor) {
      log('reading back outputs, dead letters and state');
      const { snapshot } = await import('./compare.js');
      report.snapshot = await snapshot({
        brokers: o.brokers,
        ...(o.kafkaConfig ? { kafkaConfig: o.kafkaConfig } : {}),
        ...verifierRedis(redis),
        mode: o.mode,
        input: names.input,
        output: names.output,
        deadLetter: names.deadLetter,
        group: names.group,
        store: names.store,
      });
    } else if (!failed && redis) {
      log('verifying');
      report.verify = await verify({
        brokers: o.brokers,
        ...(o.kafkaConfig ? { kafkaConfig: o.kafkaConfig } : {}),
        ...verifierRedis(redis),
        mode: o.mode,
        input: names.input,
        output: names.output,
        deadLetter: names.deadLetter,
        group: names.group,
        store: names.store,
        partitions: o.partitions,
        produced: report.produced,
        verdicts: report.verdicts,
      });
    }
  } catch (err) {
    report.harnessErrors.push(`verifier: ${(err as Error).message}`);
  } finally {
    if (redis) await stopRedisSide(redis);
    await farSide?.stop();
    if (!o.keep) {
      await kafka.deleteTopics([names.input, names.output, names.deadLetter]);
      await rm(dir, { recursive: true, force: true });
    }
    await kafka.close();
  }
  report.totalSeconds = (Date.now() - t0) / 1000;
  report.failures = judge(report);
  report.ok = report.failures.length === 0;
  return report;

  async function caughtUp(): Promise<boolean> {
    const [committed, ends] = await Promise.all([
      kafka.committedOffsets(names.group, names.input),
      kafka.endOffsets(names.input),
    ]);
    for (const [p, end] of ends) if ((committed.get(p) ?? -1) !== end) return false;
    return true;
  }
}

export function describeFault(f: Fault): string {
  if (f.kind === 'crash') return `crash:${f.point}#${f.after}`;
  if (f.kind === 'scale') return `scale->${f.to}`;
  return f.kind;
}

export function faultKinds(): readonly FaultKind[] {
  return ['crash', 'kill', 'zombie', 'redis-restart', 'redis-failover', 'scale'];
}
