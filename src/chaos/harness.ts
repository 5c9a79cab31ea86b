/**
 * The chaos harness: real Kafka, a redis-server of its own, `redfence run examples/customer-totals.ts`
 * instances as child processes, a skewed workload with poison produced while they run, and a seeded
 * schedule of faults (crash points, SIGKILLs, a zombie, Redis restarts, scaling). When the input is all
 * produced and every fault has run, it waits for the group to commit the input's end offsets, stops
 * the instances and hands everything to the verifier (src/chaos/verifier.ts).
 *
 * Every wait is a poll or an awaited event with a timeout; the only sleeps are the schedule's pacing
 * (when a fault is due, how long a process stays down). Every child is killed and every topic deleted
 * at the end, whatever happens.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Exit, freePort, type Instance, type Mode, pollUntil, startInstance } from './instances.js';
import { ChaosKafka } from './kafka.js';
import { ChaosRedisServer, redisCommand, redisInfo } from './redis-server.js';
import { randomSeed } from './rng.js';
import { type Fault, type FaultKind, makeSchedule, type ScheduleOptions } from './schedule.js';
import { type VerifyResult, verify } from './verifier.js';
import { Feeder, Workload } from './workload.js';

/** The faults (kills, crashes, zombies, Redis restarts and failovers, scale) are the schedule's options. */
export interface ChaosOptions extends Omit<ScheduleOptions, 'seed' | 'mode'> {
  mode: Mode;
  /** Default: a random seed (printed; pass it back to reproduce the workload and the schedule). */
  seed?: number;
  brokers: string[];
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
  /** Keep topics and the Redis directory (for a look afterwards). */
  keep?: boolean;
  /** Progress lines. */
  log?: (line: string) => void;
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
};

export interface FaultOutcome {
  fault: Fault;
  target?: string;
  outcome: string;
  startedAt: number;
  tookMs: number;
}

export interface ChaosReport {
  seed: number;
  options: ChaosOptions;
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
  /** Harness problems (a fault that could not finish, no drain): counted as violations. */
  harnessErrors: string[];
  ok: boolean;
}

interface Slot {
  id: string;
  generation: number;
  inst: Instance;
  /** An exit the harness caused (or awaits): the supervisor leaves it alone. */
  expecting: boolean;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function runChaos(input: Partial<ChaosOptions> & Pick<ChaosOptions, 'mode' | 'brokers'>) {
  const o: ChaosOptions = { ...DEFAULTS, ...input };
  const seed = o.seed ?? randomSeed();
  const t0 = Date.now();
  const at = () => `${((Date.now() - t0) / 1000).toFixed(1)}s`;
  const log = (s: string) => o.log?.(`[${at()}] ${s}`);
  const tag = `${o.mode === 'exactly-once' ? 'eos' : 'alo'}-${seed}-${randomBytes(3).toString('hex')}`;
  const names = {
    input: `chaos-${tag}-orders`,
    output: `chaos-${tag}-totals`,
    deadLetter: `chaos-${tag}-orders.DLT`,
    group: `chaos-${tag}-group`,
    store: `chaos_${tag.replace(/-/g, '_')}`,
  };
  const schedule = makeSchedule({ ...o, seed });
  const report: ChaosReport = {
    seed,
    options: o,
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
    ok: false,
  };
  log(
    `seed ${seed}, mode ${o.mode}, ${o.records} records over ${o.durationS}s, ${schedule.length} faults: ` +
      schedule
        .map((f) => (f.kind === 'crash' ? `crash:${f.point}` : f.kind === 'scale' ? `scale:${f.to}` : f.kind))
        .join(' '),
  );

  const kafka = new ChaosKafka(o.brokers);
  const dir = await mkdtemp(join(tmpdir(), 'redfence-chaos-'));
  const redisPort = await freePort();
  const redis = new ChaosRedisServer({ port: redisPort, dir: join(dir, 'primary'), persistent: true });
  let replica: ChaosRedisServer | undefined;
  let proxy: RedisProxy | undefined;
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
      redisUrl: proxy?.url ?? redis.url,
      orders: names.input,
      totals: names.output,
      store: names.store,
      group: names.group,
      sessionTimeoutMs: o.sessionTimeoutMs,
      ...(env ? { env } : {}),
    });
    everyInstance.push(inst);
    const full: Slot = { ...slot, generation, inst };
    return full;
  };
  const started = (s: Slot) =>
    s.inst.waitFor('processor started', (l) => l.msg === 'processor started', 90_000);
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
    slot.expecting = false;
    if (!env) await started(slot);
  };
  const stopGracefully = async (slot: Slot): Promise<Exit> => {
    slot.expecting = true;
    await slot.inst.scrape();
    slot.inst.signal('SIGCONT');
    slot.inst.signal('SIGTERM');
    return slot.inst.waitExit(25_000).catch(async () => {
      report.harnessErrors.push(`${slot.inst.name} did not exit within 25 s of SIGTERM: SIGKILLed`);
      return slot.inst.kill();
    });
  };
  const pickLive = (f: Fault): Slot => {
    const l = live().filter((s) => !s.expecting);
    if (l.length === 0) throw new Error('no live instance to inject a fault into');
    return l[f.pick % l.length] as Slot;
  };

  try {
    await redis.start();
    if (o.redisFailovers > 0) {
      replica = new ChaosRedisServer({
        port: await freePort(),
        dir: join(dir, 'replica'),
        persistent: true,
        replicaOf: redisPort,
      });
      await replica.start();
      proxy = new RedisProxy(redis);
      await proxy.listen();
    }
    await kafka.createTopics([
      { topic: names.input, partitions: o.partitions },
      { topic: names.output, partitions: o.partitions },
      { topic: names.deadLetter, partitions: 1 },
    ]);
    log(`topics ${names.input} (+ totals, .DLT); Redis ${redis.url} (AOF, appendfsync always)`);

    // Instances, and a supervisor that restarts any that dies without the harness causing it.
    for (let i = 0; i < (o.scale[0] ?? 1); i++) await addInstance();
    supervisor = setInterval(() => {
      for (const s of slots) {
        if (s.inst.alive || s.expecting) continue;
        s.expecting = true;
        const what = `${s.inst.name} exited on its own ${JSON.stringify(s.inst.exit)}`;
        report.unexpectedExits.push(`${what}${s.inst.tail(6)}`);
        log(`${what}: restarting it`);
        void restart(s).catch((err: Error) =>
          report.harnessErrors.push(`restart of ${s.id}: ${err.message}`),
        );
      }
    }, 500);
    scraper = setInterval(() => {
      for (const s of live()) void s.inst.scrape();
    }, 1000);

    // The workload, produced while faults run.
    const workload = new Workload({
      seed,
      records: o.records,
      customers: o.customers,
      partitions: o.partitions,
      poisonRate: o.poisonRate,
      large: o.large,
      skew: o.skew,
    });
    feeder = new Feeder(kafka.producer(), names.input, workload, o.records / o.durationS);
    feeder.start();
    const windowMs = o.durationS * 1000;
    const produceStart = Date.now();

    for (const f of schedule) {
      const due = produceStart + f.at * windowMs;
      if (Date.now() < due) await sleep(due - Date.now()); // pacing: the fault's due time
      const startedAt = Date.now();
      const outcome = await inject(f).catch((err: Error) => {
        report.harnessErrors.push(`fault #${f.index} ${f.kind}: ${err.message}`);
        return { target: undefined, outcome: `failed: ${err.message.split('\n')[0]}` };
      });
      report.faults.push({ fault: f, ...outcome, startedAt: startedAt - t0, tookMs: Date.now() - startedAt });
      log(
        `fault #${f.index} ${describeFault(f)} on ${outcome.target ?? '-'}: ${outcome.outcome} (${Date.now() - startedAt} ms)`,
      );
    }
    await feeder.finished();
    report.produceSeconds = (feeder.finishedAt - feeder.startedAt) / 1000;
    for (const [k, v] of workload.counts) report.produced.set(k, v);
    log(`produced ${workload.produced} records in ${report.produceSeconds.toFixed(1)} s`);

    // Drain: every instance alive, the group's commits reach the end offsets.
    const drainStart = Date.now();
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
    report.drainSeconds = (Date.now() - drainStart) / 1000;
    log(`drained in ${report.drainSeconds.toFixed(1)} s`);
    clearInterval(supervisor);
    clearInterval(scraper);
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
    if (!failed) {
      log('verifying');
      report.verify = await verify({
        brokers: o.brokers,
        redisUrl: redis.running ? redis.url : (replica?.url ?? redis.url),
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
    await proxy?.close();
    await replica?.stop();
    await redis.stop();
    if (!o.keep) {
      await kafka.deleteTopics([names.input, names.output, names.deadLetter]);
      await rm(dir, { recursive: true, force: true });
    }
    await kafka.close();
  }
  report.totalSeconds = (Date.now() - t0) / 1000;
  report.ok =
    report.harnessErrors.length === 0 && report.verify !== undefined && report.verify.violations.length === 0;
  return report;

  // ------------------------------------------------------------------------------------------------
  async function caughtUp(): Promise<boolean> {
    const [committed, ends] = await Promise.all([
      kafka.committedOffsets(names.group, names.input),
      kafka.endOffsets(names.input),
    ]);
    for (const [p, end] of ends) if ((committed.get(p) ?? -1) !== end) return false;
    return true;
  }

  async function inject(f: Fault): Promise<{ target?: string; outcome: string }> {
    switch (f.kind) {
      case 'kill': {
        const s = pickLive(f);
        const name = s.inst.name;
        s.expecting = true;
        await s.inst.scrape();
        const exit = await s.inst.kill();
        if (exit.signal !== 'SIGKILL')
          return { target: name, outcome: `had already exited ${JSON.stringify(exit)}` };
        await sleep(f.pauseMs); // pacing: how long it stays down
        await restart(s);
        return { target: name, outcome: `killed, restarted after ${f.pauseMs} ms` };
      }
      case 'crash': {
        // a crash point is reached only by a batch: with the input all produced and consumed, none comes
        if (feeder?.done && (await caughtUp()))
          return { outcome: 'skipped: input all produced and committed' };
        const s = pickLive(f);
        const name = s.inst.name;
        await stopGracefully(s);
        await restart(s, { REDFENCE_CRASH_AT: f.point as string, REDFENCE_CRASH_AFTER: String(f.after) });
        s.expecting = true;
        const armed = s.inst;
        let outcome: string;
        const exit = await armed.waitExit(o.crashTimeoutMs).catch(() => undefined);
        if (exit?.signal === 'SIGKILL') outcome = `crashed at ${f.point} (pass ${f.after})`;
        else if (exit) outcome = `exited ${JSON.stringify(exit)} before reaching ${f.point}`;
        else {
          await armed.scrape();
          await armed.kill();
          outcome = `not reached within ${o.crashTimeoutMs} ms: SIGKILLed`;
        }
        await restart(s);
        return { target: `${name} -> ${armed.name}`, outcome };
      }
      case 'zombie': {
        let helper: Slot | undefined;
        if (live().filter((s) => !s.expecting).length < 2) helper = await addInstance();
        const candidates = live().filter((s) => !s.expecting && s !== helper);
        const s = candidates[f.pick % candidates.length] as Slot;
        s.expecting = true; // a zombie may die of its stale work (fatal Kafka error): not unexpected
        const others = live().filter((x) => x !== s);
        const marks = new Map(others.map((x) => [x, x.inst.count]));
        const stoppedAt = Date.now();
        s.inst.signal('SIGSTOP');
        const moved = await pollUntil(
          'its partitions to move',
          () =>
            others.some((x) =>
              x.inst.seen(
                (l) =>
                  l.msg === 'partitions assigned' && Array.isArray(l.partitions) && l.partitions.length > 0,
                marks.get(x) ?? 0,
              ),
            ),
          o.sessionTimeoutMs * 3 + 15_000,
        ).then(
          () => true,
          () => false,
        );
        const movedMs = Date.now() - stoppedAt;
        await sleep(f.pauseMs); // pacing: the new owners work while it sleeps
        const mark = s.inst.count;
        s.inst.signal('SIGCONT');
        let what = 'woke';
        await pollUntil(
          'the zombie to notice',
          () => {
            if (!s.inst.alive) return true;
            const fenced = s.inst.seen((l) => /^FENCE/.test(l.msg ?? ''), mark);
            if (fenced) what = 'FENCEd';
            return (
              fenced ||
              s.inst.seen((l) => l.msg === 'partitions revoked' || l.msg === 'partitions assigned', mark)
            );
          },
          60_000,
        ).catch(() => {
          what = 'woke, nothing logged within 60 s';
        });
        if (!s.inst.alive) {
          what = `exited ${JSON.stringify(s.inst.exit)} after waking`;
          await restart(s);
        } else if (s.inst.seen((l) => /^FENCE/.test(l.msg ?? ''), mark)) what = 'FENCEd';
        s.expecting = false;
        if (helper) {
          await stopGracefully(helper);
          slots.splice(slots.indexOf(helper), 1);
        }
        return {
          target: s.inst.name,
          outcome: `${moved ? `partitions moved after ${movedMs} ms` : 'partitions did not move'}, ${what}${helper ? ' (helper instance added for it)' : ''}`,
        };
      }
      case 'redis-restart': {
        const marks = new Map(live().map((x) => [x, x.inst.count]));
        const target = proxy ? proxy.target : redis;
        await target.kill();
        await sleep(f.pauseMs); // pacing: the outage
        await target.start();
        const paused = live().filter((x) =>
          x.inst.seen((l) => /^Redis unavailable/.test(l.msg ?? ''), marks.get(x) ?? 0),
        );
        await Promise.all(
          paused.map((x) =>
            x.inst
              .waitFor(
                'Redis is back: resumed',
                (l) => l.msg === 'Redis is back: resumed',
                90_000,
                marks.get(x) ?? 0,
              )
              .catch((err: Error) => {
                if (x.inst.alive) throw err;
              }),
          ),
        );
        return {
          target: `redis :${target.port}`,
          outcome: `down ${f.pauseMs} ms (SIGKILL, AOF always); ${paused.length} logged the outage and resumed`,
        };
      }
      case 'redis-failover': {
        if (!proxy || !replica) return { outcome: 'skipped: no replica' };
        const old = proxy.target;
        const next = old === redis ? replica : redis;
        await pollUntil(
          'the replica to be linked to its primary',
          async () => /master_link_status:up/.test((await redisInfo(next.port, 'replication')) ?? ''),
          30_000,
        );
        await old.kill();
        await sleep(f.pauseMs);
        await redisCommand(next.port, 'REPLICAOF NO ONE');
        proxy.switchTo(next);
        // the old primary comes back as a replica of the new one (its data is replaced)
        await old.restartAsReplicaOf(next.port);
        return {
          target: `redis :${old.port} -> :${next.port}`,
          outcome: 'primary killed, replica promoted (no WAIT)',
        };
      }
      case 'scale': {
        const to = f.to ?? 1;
        const from = live().length;
        while (live().length < to) await addInstance();
        while (live().length > to) {
          const s = live().at(-1) as Slot;
          await stopGracefully(s);
          slots.splice(slots.indexOf(s), 1);
          log(`stopped ${s.inst.name} (SIGTERM, exit ${JSON.stringify(s.inst.exit)})`);
        }
        return { outcome: `${from} -> ${live().length} instances` };
      }
    }
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

/**
 * A TCP proxy the instances use as their Redis when a failover is scheduled: it forwards to the current
 * primary; switching drops every connection, so the clients reconnect to the new one.
 */
class RedisProxy {
  #server: Server | undefined;
  #sockets = new Set<Socket>();
  #port = 0;
  #targetPort: number;
  target: ChaosRedisServer;

  constructor(target: ChaosRedisServer) {
    this.target = target;
    this.#targetPort = target.port;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.#port}`;
  }

  async listen(): Promise<void> {
    this.#server = createServer((client) => {
      const upstream = connect(this.#targetPort, '127.0.0.1');
      this.#sockets.add(client).add(upstream);
      client.pipe(upstream);
      upstream.pipe(client);
      const end = () => {
        client.destroy();
        upstream.destroy();
        this.#sockets.delete(client);
        this.#sockets.delete(upstream);
      };
      client.on('close', end).on('error', end);
      upstream.on('close', end).on('error', end);
    });
    await new Promise<void>((r) => this.#server?.listen(0, '127.0.0.1', r));
    const addr = this.#server.address();
    this.#port = typeof addr === 'object' && addr ? addr.port : 0;
  }

  switchTo(target: ChaosRedisServer): void {
    this.target = target;
    this.#targetPort = target.port;
    for (const s of this.#sockets) s.destroy();
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((r) => (this.#server ? this.#server.close(() => r()) : r()));
  }
}
