/**
 * Failover of the streams DSL against Kafka Streams, in one run: a windowed count (bench/topology/run.ts's,
 * 5-minute tumbling windows, grace 1 min) with K open windows of state, one per customer, then the
 * instance is SIGKILLed, a replacement starts at once, a wave of orders to K's customers is produced, and
 * the clock runs from the kill to the wave's first output visible to a read_committed consumer.
 *
 *   npm run build && node --import tsx bench/topology/failover.ts
 *   BENCH_FAILOVER_KEYS=10000,100000,1000000 node --import tsx bench/topology/failover.ts
 *
 * Per K, each contender gets its own input (K orders, customer c<i> for i < K, all at one event time T,
 * so every customer has one open window and stream time stays at T: no window closes during the run):
 *  - redfence: `redfence run bench/topology/windowed-count.mjs` (the built CLI over dist/, exactly-once,
 *    as users run it) as instance A until its group committed all K; the replacement B restores
 *    nothing (its windows are in Redis). Also measured: Redis used_memory per open window (the delta
 *    over A's run / K), MEMORY USAGE of a sample of the fence hashes and window keys, and A's peak RSS;
 *  - Kafka Streams: the peer (bench/peers/kafka-streams, KS_TOPOLOGY=windowed-count, exactly_once_v2,
 *    1 thread, cache 0, RocksDB) as A until it committed all K (its changelog holds the K windows); B
 *    starts with an empty state directory (a cold replacement: no standby replicas; after an unclean
 *    stop under exactly-once Kafka Streams wipes a task's local state anyway) and restores the changelog
 *    before it processes. Also: A's JVM peak RSS, B's restore time and restored records.
 * Membership (BENCH_FAILOVER_MEMBERSHIP, comma-separated, default static): `static` (B reuses A's
 * group.instance.id: `--static --instance A`, the peer's KS_GROUP_INSTANCE_ID) takes A's place without
 * waiting for A's session to time out; `dynamic` (B has its own id) waits for A's session timeout
 * (BENCH_SESSION_TIMEOUT_MS, 6000, the broker's minimum, on both).
 * Checked: the wave's outputs are exactly the wave (read_committed), each with count 2 for its window
 * (the preloaded order and the wave's), so B counted on the state A left.
 *
 * Env: BENCH_FAILOVER_KEYS ("10000,100000"), BENCH_FAILOVER_MEMBERSHIP (static), BENCH_FAILOVER_WAVE (100),
 * BENCH_PARTITIONS (6), BENCH_SESSION_TIMEOUT_MS (6000), BENCH_MEMORY_SAMPLE (1000 fence hashes),
 * BENCH_ONLY (redfence, kafka-streams), BENCH_JAVA_OPTS, KAFKA_BROKERS (127.0.0.1:19092), REDIS_URL
 * (redis://127.0.0.1:16379: use a Redis no one else uses, as bench/stands.sh starts one, so that
 * used_memory moves with this run alone). Results: a table on stdout, bench/results/topology-failover-*.raw.json.
 */
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { Child, pollUntil } from '../../src/harness/index.js';
import {
  buildPeer,
  type Jvm,
  killJvms,
  peakRssMb,
  startJvm,
  stopJvm,
  WORK,
} from '../peers/kafka-streams/jvm.js';
import { peakRss, ROOT } from '../processor/cli.js';
import {
  committedSum,
  createTopics,
  deleteTopics,
  envInt,
  envIntList,
  kafkaClient,
  preload,
} from '../processor/kafka.js';
import { dropStore, selected, writeResults } from '../processor/support.js';
import { type OutputWatch, watchOutput } from './output-watch.js';
import { redisWindowMemory, type WindowMemory } from './window-memory.js';

type Membership = 'static' | 'dynamic';
const opts = {
  keys: envIntList('BENCH_FAILOVER_KEYS', '10000,100000'),
  memberships: (process.env.BENCH_FAILOVER_MEMBERSHIP ?? 'static').split(',') as Membership[],
  wave: envInt('BENCH_FAILOVER_WAVE', 100),
  partitions: envInt('BENCH_PARTITIONS', 6),
  sessionMs: envInt('BENCH_SESSION_TIMEOUT_MS', 6000),
  sample: envInt('BENCH_MEMORY_SAMPLE', 1000),
  windowMs: 5 * 60_000,
  graceMs: 60_000,
  brokers: (process.env.KAFKA_BROKERS ?? '127.0.0.1:19092').split(','),
  redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:16379',
  javaOpts: (process.env.BENCH_JAVA_OPTS ?? '').split(/\s+/).filter((s) => s !== ''),
};
for (const m of opts.memberships)
  if (m !== 'static' && m !== 'dynamic') throw new Error(`BENCH_FAILOVER_MEMBERSHIP: unknown ${m}`);
const CLI = join(ROOT, 'dist/cli/bin.js');
const MODULE = join(ROOT, 'bench/topology/windowed-count.mjs');
if (!existsSync(CLI))
  throw new Error('dist/ is missing: npm run build first (the instances run the built CLI)');

const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
const kafka = kafkaClient(opts.brokers);
const redis = new Redis(opts.redisUrl);
/** One event time for every order: whole windows, two hours back (stream time never reaches a close). */
const T = Math.floor((Date.now() - 7_200_000) / opts.windowMs) * opts.windowMs + 1000;
const START = Math.floor(T / opts.windowMs) * opts.windowMs;
const order = (customer: string) => ({
  key: customer,
  value: JSON.stringify({ customer, amount: 1 }),
  timestamp: String(T),
});
/** The wave's customers: WAVE of the K, spread over them. */
const waveKey = (keys: number, i: number) => `c${Math.floor((i * keys) / opts.wave)}`;
const timeoutFor = (keys: number) => 180_000 + keys; // 1 ms per record of state, bounded

interface Result {
  contender: 'redfence' | 'kafka-streams';
  keys: number;
  membership: Membership;
  /** A: from start to all K committed. */
  aSeconds: number;
  aPeakRssMiB: number;
  /** B's process up: its first log line (redfence), its main's START line (the JVM). */
  killToUpMs: number;
  /** redfence: B's partitions assigned; Kafka Streams: B's first REBALANCING -> RUNNING (after restore). */
  killToAssignedMs?: number;
  killToFirstOutputMs: number;
  /** Kafka Streams' B: first restore start to last restore end, and what it restored. */
  restoreMs?: number;
  restoredRecords?: number;
  /** redfence: Redis bytes per open window. */
  memory?: WindowMemory;
  waveOutputs: number;
  /** Wave outputs whose count is not 2 for the preloaded window, plus missing and extra ones. */
  wrongWaveOutputs: number;
}

/** Waits for the whole wave at the watcher (bounded) and counts what is wrong in it. */
async function checkWave(keys: number, w: OutputWatch): Promise<number> {
  await pollUntil('the whole wave', () => w.seen.length >= opts.wave, 120_000, 50).catch(() => undefined);
  await new Promise((r) => setTimeout(r, 1000)); // an extra output (a duplicate) would show by now
  const want = new Set(Array.from({ length: opts.wave }, (_, i) => waveKey(keys, i)));
  let wrong = Math.abs(w.seen.length - opts.wave);
  for (const s of w.seen) if (!want.delete(s.key) || s.count !== 2 || s.start !== START) wrong++;
  return wrong + want.size;
}

async function usedMemory(): Promise<number> {
  return Number(/used_memory:(\d+)/.exec(await redis.info('memory'))?.[1] ?? 0);
}

function instance(name: string, m: Membership, t: { app: string; input: string; output: string }) {
  const child = new Child({
    name,
    command: process.execPath,
    args: [
      CLI,
      'run',
      MODULE,
      '--brokers',
      opts.brokers.join(','),
      '--redis',
      opts.redisUrl,
      '--mode',
      'exactly-once',
      '--instance',
      name,
      '--session-timeout',
      String(opts.sessionMs),
      '--log',
      'info',
      ...(m === 'static' ? ['--static'] : []),
    ],
    cwd: ROOT,
    env: {
      ...process.env,
      TOPO_APP: t.app,
      TOPO_INPUT: t.input,
      TOPO_OUTPUT: t.output,
      TOPO_WINDOW_MS: String(opts.windowMs),
      TOPO_GRACE_MS: String(opts.graceMs),
    },
    keepLines: 200,
  });
  let assignedAt: number | undefined;
  let upAt: number | undefined;
  void child.log
    .waitFor('a first log line', () => true, 3_600_000)
    .then(
      () => {
        upAt = Date.now();
      },
      () => undefined,
    );
  void child.log
    .waitFor(
      'partitions assigned',
      (l) => l.msg === 'partitions assigned' && Array.isArray(l.partitions) && l.partitions.length > 0,
      3_600_000,
    )
    .then(
      () => {
        assignedAt = Date.now();
      },
      () => undefined,
    );
  const alive = () => {
    if (!child.alive) throw new Error(`instance ${name} exited (${child.exit?.code}): ${child.tail()}`);
    return true;
  };
  return { child, alive, assignedAt: () => assignedAt, upAt: () => upAt };
}

async function redfence(keys: number, m: Membership): Promise<Result> {
  const app = `bench-tfo-${run}-${keys}-${m}-rf`;
  const t = { app, input: `${app}-in`, output: `${app}-out` };
  const topics = [t.input, t.output, `${t.input}.DLT`];
  await createTopics(kafka, topics, opts.partitions);
  const children: Child[] = [];
  try {
    await preload(kafka, t.input, keys, (i) => order(`c${i}`));
    const mem0 = await usedMemory();
    const t0 = Date.now();
    const a = instance('A', m, t);
    children.push(a.child);
    await pollUntil(
      'A committed every order',
      async () => a.alive() && (await committedSum(kafka, app, t.input)) >= keys,
      timeoutFor(keys),
      500,
    );
    const aSeconds = (Date.now() - t0) / 1000;
    const used = (await usedMemory()) - mem0;
    const memory = await redisWindowMemory(redis, app, START, keys, used, opts.sample);
    const aPeak = peakRss(a.child.pid);
    const w = await watchOutput(kafka, t.output, `${app}-watch`, opts.partitions);
    try {
      const killedAt = Date.now();
      void a.child.kill();
      const b = instance(m === 'static' ? 'A' : 'B', m, t);
      children.push(b.child);
      await preload(kafka, t.input, opts.wave, (i) => order(waveKey(keys, i)));
      await pollUntil(
        'the first output of the wave',
        () => b.alive() && w.firstAt() !== undefined,
        300_000,
        20,
      );
      const firstAt = w.firstAt() as number;
      const wrong = await checkWave(keys, w);
      await b.child.terminate(30_000);
      return {
        contender: 'redfence',
        keys,
        membership: m,
        aSeconds,
        aPeakRssMiB: Math.round(aPeak / 2 ** 20),
        killToUpMs: (b.upAt() ?? Number.NaN) - killedAt,
        killToAssignedMs: (b.assignedAt() ?? Number.NaN) - killedAt,
        killToFirstOutputMs: firstAt - killedAt,
        memory,
        waveOutputs: w.seen.length,
        wrongWaveOutputs: wrong,
      };
    } finally {
      await w.close();
    }
  } finally {
    for (const c of children) c.signal('SIGKILL');
    await deleteTopics(kafka, topics);
    await dropStore(redis, app);
  }
}

async function kafkaStreams(keys: number, m: Membership): Promise<Result> {
  const app = `bench-tfo-${run}-${keys}-${m}-ks`;
  const t = { input: `${app}-in`, output: `${app}-out` };
  const topics = [t.input, t.output, `${app}-counts-changelog`];
  const dirs = [join(WORK, 'state', `${app}-A`), join(WORK, 'state', `${app}-B`)];
  await createTopics(kafka, [t.input, t.output], opts.partitions);
  const settings = {
    brokers: opts.brokers,
    javaOpts: opts.javaOpts,
    logLevel: 'warn',
    env: {
      KS_TOPOLOGY: 'windowed-count',
      KS_WINDOW_MS: String(opts.windowMs),
      KS_GRACE_MS: String(opts.graceMs),
      KS_SESSION_TIMEOUT_MS: String(opts.sessionMs),
      ...(m === 'static' ? { KS_GROUP_INSTANCE_ID: 'A' } : {}),
    },
  };
  const base = { ...t, appId: app, threads: 1, cache: '0' };
  const jvms: Jvm[] = [];
  const admin = kafka.admin();
  await admin.connect();
  const alive = (j: Jvm, name: string) => {
    if (j.proc.exitCode !== null || j.proc.signalCode !== null)
      throw new Error(
        `Kafka Streams ${name} exited (${j.proc.exitCode ?? j.proc.signalCode}):\n${j.stderrTail()}`,
      );
    return true;
  };
  try {
    await preload(kafka, t.input, keys, (i) => order(`c${i}`));
    const t0 = Date.now();
    const a = startJvm({ ...base, stateDir: dirs[0] as string }, settings);
    jvms.push(a);
    await pollUntil(
      'Kafka Streams A committed every order',
      async () => alive(a, 'A') && (await committedSum(kafka, app, t.input)) >= keys,
      timeoutFor(keys),
      500,
    );
    const aSeconds = (Date.now() - t0) / 1000;
    const aPeak = peakRssMb(a.pid) ?? Number.NaN;
    const w = await watchOutput(kafka, t.output, `${app}-watch`, opts.partitions);
    try {
      const killedAt = Date.now();
      a.proc.kill('SIGKILL');
      await a.exited;
      const b = startJvm({ ...base, stateDir: dirs[1] as string }, settings);
      jvms.push(b);
      await preload(kafka, t.input, opts.wave, (i) => order(waveKey(keys, i)));
      await pollUntil(
        'the first output of the wave',
        () => alive(b, 'B') && w.firstAt() !== undefined,
        300_000,
        20,
      );
      const firstAt = w.firstAt() as number;
      const wrong = await checkWave(keys, w);
      const rs = b.events.restoreStart.map((e) => e.at);
      const re = b.events.restoreEnd.map((e) => e.at);
      const running = b.events.states.find((e) => e.to === 'RUNNING');
      return {
        contender: 'kafka-streams',
        keys,
        membership: m,
        aSeconds,
        aPeakRssMiB: Math.round(aPeak), // VmHWM in MiB
        killToUpMs: (b.events.start ?? Number.NaN) - killedAt,
        ...(running ? { killToAssignedMs: running.at - killedAt } : {}),
        killToFirstOutputMs: firstAt - killedAt,
        ...(rs.length > 0 && re.length > 0 ? { restoreMs: Math.max(...re) - Math.min(...rs) } : {}),
        restoredRecords: b.events.restoreEnd.reduce((s, e) => s + e.records, 0),
        waveOutputs: w.seen.length,
        wrongWaveOutputs: wrong,
      };
    } finally {
      await w.close();
    }
  } finally {
    for (const j of jvms) await stopJvm(j, 'SIGKILL');
    await admin.deleteGroups([app]).catch(() => undefined);
    await admin.disconnect();
    await deleteTopics(kafka, topics);
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }
}

function table(results: Result[]): string {
  const ms = (v: number | undefined) => (v === undefined || Number.isNaN(v) ? '–' : String(Math.round(v)));
  const rows = [
    '| keys (open windows) | membership | contender | kill → B up ms | kill → assigned / RUNNING ms | kill → first output ms | vs Kafka Streams | B restore ms (records) | A: K records s | A peak RSS MiB | Redis bytes / window: used_memory (MEMORY USAGE: fence hash + n × window key) | wave outputs, wrong |',
    '| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const r of results) {
    const ks = results.find(
      (x) => x.contender === 'kafka-streams' && x.keys === r.keys && x.membership === r.membership,
    );
    const mem = r.memory
      ? `${Math.round(r.memory.usedBytesPerWindow)} (${Math.round(r.memory.fenceHashBytes)} + ${r.memory.windowKeysPerWindow.toFixed(1)} × ${Math.round(r.memory.windowKeyBytes)})`
      : '–';
    rows.push(
      `| ${r.keys} | ${r.membership} | ${r.contender} | ${ms(r.killToUpMs)} | ${ms(r.killToAssignedMs)} | ${ms(r.killToFirstOutputMs)} | ` +
        `${ks ? `${(r.killToFirstOutputMs / ks.killToFirstOutputMs).toFixed(2)}x` : '–'} | ` +
        `${r.restoreMs === undefined ? '–' : `${ms(r.restoreMs)} (${r.restoredRecords})`} | ${r.aSeconds.toFixed(1)} | ` +
        `${r.aPeakRssMiB} | ${mem} | ${r.waveOutputs}, ${r.wrongWaveOutputs} |`,
    );
  }
  return rows.join('\n');
}

async function main(): Promise<void> {
  if (selected('kafka-streams')) buildPeer();
  console.error(
    `[failover] keys ${opts.keys.join(', ')}, ${opts.memberships.join(', ')} membership, wave ${opts.wave}, redis ${opts.redisUrl}`,
  );
  const results: Result[] = [];
  for (const keys of opts.keys)
    for (const m of opts.memberships)
      for (const [label, fn] of [
        ['redfence', redfence],
        ['kafka-streams', kafkaStreams],
      ] as const) {
        if (!selected(label)) continue;
        const r = await fn(keys, m);
        console.error(`[failover] ${JSON.stringify(r)}`);
        results.push(r);
      }
  console.log(table(results));
  console.error(`[failover] wrote ${writeResults('topology-failover', opts, results)}`);
}

process.on('exit', killJvms);
try {
  await main();
} finally {
  killJvms();
  redis.disconnect();
}
