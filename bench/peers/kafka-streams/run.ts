/**
 * Kafka Streams peer of the processor benchmark (bench/processor/run.ts): the same preloaded orders, the same
 * aggregation (per customer total and count, one output record with the new state per input record), done by a
 * Kafka Streams 4.4 app (exactly_once_v2, RocksDB store) running as a child JVM. See README.md.
 *
 *   node --import tsx bench/peers/kafka-streams/run.ts              # throughput
 *   node --import tsx bench/peers/kafka-streams/run.ts --failover   # failover time vs state size
 *   node --import tsx bench/peers/kafka-streams/run.ts --latency    # latency at a fixed load (BENCH_RATE,
 *                                                                   # BENCH_SECONDS: as bench/latency)
 *
 * Env: BENCH_RECORDS (100000), BENCH_KEYS (10000), BENCH_PARTITIONS (6), BENCH_ONLY (run only configurations
 * whose label contains it), BENCH_FAILOVER=1 (same as --failover), BENCH_FAILOVER_KEYS ("10000,100000"),
 * BENCH_FAILOVER_WAVE (1000: orders of the second wave), BENCH_SESSION_TIMEOUT_MS (unset: the consumer default,
 * 45 s), BENCH_JAVA_OPTS (extra JVM options), BENCH_KS_LOG_LEVEL (warn), BENCH_KS_PARSE (json: a Jackson serde;
 * scan: the earlier hand-written scan), KAFKA_BROKERS (127.0.0.1:19092).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { type LatencyResult, latencyTable, measureLatency } from '../../latency/measure.js';
import {
  createTopics,
  deleteTopics,
  envInt,
  envIntList,
  kafkaClient,
  orderMaker,
  preload,
} from '../../processor/kafka.js';
import { buildPeer, cpuSeconds, type Jvm, killJvms, peakRssMb, startJvm, stopJvm, WORK } from './jvm.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

const FAILOVER = process.argv.includes('--failover') || process.env.BENCH_FAILOVER === '1';
const LATENCY = process.argv.includes('--latency') || process.env.BENCH_LATENCY === '1';
const opts = {
  records: envInt('BENCH_RECORDS', 100_000),
  keys: envInt('BENCH_KEYS', 10_000),
  partitions: envInt('BENCH_PARTITIONS', 6),
  brokers: (process.env.KAFKA_BROKERS ?? '127.0.0.1:19092').split(','),
  failoverKeys: envIntList('BENCH_FAILOVER_KEYS', '10000,100000'),
  failoverWave: envInt('BENCH_FAILOVER_WAVE', 1000),
  sessionTimeoutMs: process.env.BENCH_SESSION_TIMEOUT_MS
    ? envInt('BENCH_SESSION_TIMEOUT_MS', 45_000)
    : undefined,
  javaOpts: (process.env.BENCH_JAVA_OPTS ?? '').split(/\s+/).filter((s) => s !== ''),
  logLevel: process.env.BENCH_KS_LOG_LEVEL ?? 'warn',
  /** how the app reads orders: a Jackson serde (json), or the earlier hand-written scan (scan) */
  parse: process.env.BENCH_KS_PARSE ?? 'json',
};
if (opts.parse !== 'json' && opts.parse !== 'scan')
  throw new Error(`BENCH_KS_PARSE must be json or scan, not ${opts.parse}`);
const jvmSettings = {
  brokers: opts.brokers,
  javaOpts: opts.javaOpts,
  logLevel: opts.logLevel,
  env: {
    KS_PARSE: opts.parse,
    ...(opts.sessionTimeoutMs === undefined ? {} : { KS_SESSION_TIMEOUT_MS: String(opts.sessionTimeoutMs) }),
  },
};
const ONLY = process.env.BENCH_ONLY;
const PHASE_TIMEOUT_MS = 300_000;
const POLL_MS = 100;

const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
const kafka = kafkaClient(opts.brokers);
const admin = kafka.admin();
const topics: string[] = [];
const groups: string[] = [];
const stateDirs: string[] = [];

// Deterministic orders: customer by a multiplicative hash of i, amount 1..100, pad to ~100 bytes.
// Same as bench/processor/run.ts, with the key count as a parameter (the failover runs vary it).
const orders = orderMaker;

/** Expected final state per customer after orders [0, n). */
function expectedState(keys: number, n: number): Map<string, { total: number; count: number }> {
  const m = new Map<string, { total: number; count: number }>();
  for (let i = 0; i < n; i++) {
    const customer = `c${((i * 2654435761) >>> 0) % keys}`;
    const s = m.get(customer) ?? { total: 0, count: 0 };
    s.total += (i % 100) + 1;
    s.count++;
    m.set(customer, s);
  }
  return m;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------- Kafka

async function endOffsets(topic: string, committed = false): Promise<Map<number, number>> {
  const rows = await admin.fetchTopicOffsets(
    topic,
    committed ? { isolationLevel: KafkaJS.IsolationLevel.READ_COMMITTED } : undefined,
  );
  return new Map(rows.map((r) => [r.partition, Number(r.offset)]));
}

const sum = (m: Map<number, number>) => [...m.values()].reduce((a, b) => a + b, 0);

/** Sum of the group's committed offsets on `topic` (a partition without a commit counts 0). */
async function committedSum(groupId: string, topic: string, end: Map<number, number>): Promise<number> {
  const res = await admin.fetchOffsets({ groupId, topics: [topic] });
  let s = 0;
  for (const t of res)
    for (const p of t.partitions) {
      const o = Number(p.offset);
      if (o > 0) s += Math.min(o, end.get(p.partition) ?? o);
    }
  return s;
}

interface Verify {
  /** Records read from the output with read_committed. */
  outputRecords: number;
  expectedRecords: number;
  /** Customers whose last output value differs from the expected final state. */
  wrongFinalStates: number;
  customers: number;
}

/**
 * Reads the whole output topic with read_committed and checks the record count and, per customer, that the
 * last output equals the expected final {total, count}.
 */
async function verifyOutput(output: string, keys: number, n: number): Promise<Verify> {
  const expected = expectedState(keys, n);
  const groupId = `bench-ks-${run}-verify-${output}`;
  groups.push(groupId);
  const consumer = kafka.consumer({
    'group.id': groupId,
    'enable.auto.commit': false,
    'auto.offset.reset': 'earliest',
    'isolation.level': 'read_committed',
    kafkaJS: { logLevel: KafkaJS.logLevel.NOTHING },
  } as unknown as KafkaJS.ConsumerConstructorConfig);
  await consumer.connect();
  await consumer.subscribe({ topics: [output] });
  const last = new Map<string, string>();
  let count = 0;
  let lastAt = performance.now();
  await consumer.run({
    eachBatch: async ({ batch }) => {
      for (const m of batch.messages) {
        count++;
        last.set(m.key?.toString() ?? '', m.value?.toString() ?? '');
      }
      lastAt = performance.now();
    },
  });
  const t0 = performance.now();
  // Until N are read and nothing more arrives for 2 s (extra records would be duplicates), or 3 s of silence
  // after at least one record, or the phase timeout.
  for (;;) {
    await sleep(200);
    const idle = performance.now() - lastAt;
    if (count >= n && idle > 2000) break;
    if (count > 0 && idle > 10_000) break;
    if (performance.now() - t0 > PHASE_TIMEOUT_MS) break;
  }
  await consumer.disconnect().catch(() => undefined);
  let wrong = 0;
  for (const [customer, s] of expected) {
    const v = last.get(customer);
    if (v !== JSON.stringify(s)) wrong++;
  }
  return { outputRecords: count, expectedRecords: n, wrongFinalStates: wrong, customers: expected.size };
}

// ---------------------------------------------------------------------------------------------- throughput

interface Config {
  label: string;
  threads: number;
  /** statestore.cache.max.bytes: "0", or "default" (10 MiB). */
  cache: string;
}

interface Result {
  label: string;
  threads: number;
  cache: string;
  records: number;
  /** From spawning the JVM until the group's committed offsets equal the input end offsets. */
  seconds: number;
  /** From the first committed offsets seen to the last. */
  steadySeconds: number;
  recordsPerSec: number;
  steadyRecordsPerSec: number;
  /** JVM start (spawn) to the first CREATED/REBALANCING -> RUNNING transition. */
  secondsToRunning?: number;
  cpuSeconds: number;
  cpuSecPer1k: number;
  peakRssMb: number;
  outputEndOffsets: number;
  verify: Verify;
}

/** Starts an app on `input`, waits until it has committed `end`; returns the timings, CPU and peak RSS. */
async function processAll(
  c: { input: string; output: string; appId: string; stateDir: string; threads: number; cache: string },
  end: Map<number, number>,
  label: string,
): Promise<{
  jvm: Jvm;
  seconds: number;
  steadySeconds: number;
  firstRecords: number;
  cpu: number;
  rss: number;
}> {
  const n = sum(end);
  const t0 = performance.now();
  const jvm = startJvm(c, jvmSettings);
  let tFirst: number | undefined;
  let firstRecords = 0;
  let cpu = 0;
  for (;;) {
    const done = await committedSum(c.appId, c.input, end);
    const now = performance.now();
    cpu = cpuSeconds(jvm.pid) ?? cpu;
    if (done > 0 && tFirst === undefined) {
      tFirst = now;
      firstRecords = done;
    }
    if (done >= n) break;
    if (jvm.proc.exitCode !== null || jvm.proc.signalCode !== null)
      throw new Error(
        `${label}: the JVM exited (${jvm.proc.exitCode ?? jvm.proc.signalCode}):\n${jvm.stderrTail()}`,
      );
    if (now - t0 > PHASE_TIMEOUT_MS)
      throw new Error(`${label}: timed out after ${PHASE_TIMEOUT_MS / 1000} s with ${done} of ${n} records`);
    await sleep(Math.max(0, POLL_MS - (performance.now() - now)));
  }
  const t1 = performance.now();
  cpu = cpuSeconds(jvm.pid) ?? cpu;
  const rss = peakRssMb(jvm.pid) ?? 0;
  return {
    jvm,
    seconds: (t1 - t0) / 1000,
    steadySeconds: (t1 - (tFirst ?? t0)) / 1000,
    firstRecords,
    cpu,
    rss,
  };
}

function toRunning(j: Jvm): number | undefined {
  const s = j.events.states.find((e) => e.to === 'RUNNING');
  return s ? (s.at - j.spawnedAt) / 1000 : undefined;
}

async function throughput(cfg: Config, input: string, end: Map<number, number>): Promise<Result> {
  const tag = `${cfg.threads}t-${cfg.cache}`;
  const appId = `bench-ks-${run}-${tag}`;
  const output = `bench-ks-${run}-out-${tag}`;
  const stateDir = join(WORK, 'state', appId);
  topics.push(output, `${appId}-totals-changelog`);
  groups.push(appId);
  stateDirs.push(stateDir);
  await createTopics(kafka, [output], opts.partitions);
  const n = sum(end);
  const r = await processAll(
    { input, output, appId, stateDir, threads: cfg.threads, cache: cfg.cache },
    end,
    cfg.label,
  );
  try {
    const outEnd = sum(await endOffsets(output));
    const verify = await verifyOutput(output, opts.keys, n);
    return {
      label: cfg.label,
      threads: cfg.threads,
      cache: cfg.cache,
      records: n,
      seconds: r.seconds,
      steadySeconds: r.steadySeconds,
      recordsPerSec: n / r.seconds,
      steadyRecordsPerSec: r.steadySeconds > 0 ? (n - r.firstRecords) / r.steadySeconds : 0,
      secondsToRunning: toRunning(r.jvm),
      cpuSeconds: r.cpu,
      cpuSecPer1k: (r.cpu / n) * 1000,
      peakRssMb: r.rss,
      outputEndOffsets: outEnd,
      verify,
    };
  } finally {
    await stopJvm(r.jvm);
  }
}

// ---------------------------------------------------------------------------------------------- failover

interface Failover {
  keys: number;
  /** Customers actually holding state after the first wave. */
  stateKeys: number;
  firstWave: number;
  secondWave: number;
  /** Instance A: first wave, from spawn to all committed. */
  firstWaveSeconds: number;
  /** SIGKILL of A to the first output record of B visible with read_committed (output LSO moves). */
  killToFirstOutputSeconds: number;
  /** SIGKILL of A to B's group having committed the whole second wave. */
  killToSecondWaveDoneSeconds: number;
  /** B: spawn to REBALANCING -> RUNNING (after its restore). */
  bSpawnToRunningSeconds?: number;
  /** B: first restore start to last restore end (changelog -> RocksDB). */
  bRestoreSeconds?: number;
  bRestoreStartAfterKillSeconds?: number;
  bRestoredRecords: number;
  /** Changelog end offsets (records + transaction markers) before the kill. */
  changelogEndOffsets: number;
  sessionTimeoutMs: number | 'default (45000)';
  verify: Verify;
}

async function failover(keys: number): Promise<Failover> {
  const tag = `fo${keys}`;
  const input = `bench-ks-${run}-${tag}-in`;
  const output = `bench-ks-${run}-${tag}-out`;
  const appId = `bench-ks-${run}-${tag}`;
  const changelog = `${appId}-totals-changelog`;
  topics.push(input, output, changelog);
  groups.push(appId);
  const make = orders(keys);
  const firstWave = Math.max(opts.records, keys);
  const wave = opts.failoverWave;
  await createTopics(kafka, [input, output], opts.partitions);
  const tp = performance.now();
  await preload(kafka, input, firstWave, make);
  console.error(
    `[ks] failover ${keys} keys: preloaded ${firstWave} orders in ${((performance.now() - tp) / 1000).toFixed(1)} s`,
  );
  const stateKeys = expectedState(keys, firstWave).size;
  const stateA = join(WORK, 'state', `${appId}-A`);
  const stateB = join(WORK, 'state', `${appId}-B`);
  stateDirs.push(stateA, stateB);
  const base = { input, output, appId, threads: 1, cache: '0' };

  const a = await processAll({ ...base, stateDir: stateA }, await endOffsets(input), `failover ${keys} A`);
  console.error(
    `[ks] failover ${keys} keys: A processed ${firstWave} in ${a.seconds.toFixed(1)} s; SIGKILL A`,
  );
  const changelogEnd = sum(await endOffsets(changelog));
  const outBefore = sum(await endOffsets(output, true));

  const killedAt = Date.now();
  const tKill = performance.now();
  a.jvm.proc.kill('SIGKILL');
  await a.jvm.exited;
  const b = startJvm({ ...base, stateDir: stateB }, jvmSettings);
  let bOk = false;
  try {
    // Second wave, produced after the kill so that only B can process it.
    await preload(kafka, input, wave, (i) => make(firstWave + i));
    const end2 = await endOffsets(input);
    let tFirstOut: number | undefined;
    let tDone: number | undefined;
    for (;;) {
      const now = performance.now();
      if (tFirstOut === undefined && sum(await endOffsets(output, true)) > outBefore)
        tFirstOut = performance.now();
      if (tFirstOut !== undefined && (await committedSum(appId, input, end2)) >= sum(end2)) {
        tDone = performance.now();
        break;
      }
      if (b.proc.exitCode !== null || b.proc.signalCode !== null)
        throw new Error(`failover ${keys}: B exited:\n${b.stderrTail()}`);
      if (now - tKill > PHASE_TIMEOUT_MS)
        throw new Error(`failover ${keys}: no recovery ${PHASE_TIMEOUT_MS / 1000} s after the kill`);
      await sleep(Math.max(0, 50 - (performance.now() - now)));
    }
    const rs = b.events.restoreStart.map((e) => e.at);
    const re = b.events.restoreEnd.map((e) => e.at);
    const verify = await verifyOutput(output, keys, firstWave + wave);
    bOk = true;
    const running = b.events.states.filter((e) => e.to === 'RUNNING').at(-1);
    return {
      keys,
      stateKeys,
      firstWave,
      secondWave: wave,
      firstWaveSeconds: a.seconds,
      killToFirstOutputSeconds: (tFirstOut - tKill) / 1000,
      killToSecondWaveDoneSeconds: (tDone - tKill) / 1000,
      bSpawnToRunningSeconds: running ? (running.at - b.spawnedAt) / 1000 : undefined,
      bRestoreSeconds: rs.length && re.length ? (Math.max(...re) - Math.min(...rs)) / 1000 : undefined,
      bRestoreStartAfterKillSeconds: rs.length ? (Math.min(...rs) - killedAt) / 1000 : undefined,
      bRestoredRecords: b.events.restoreEnd.reduce((s, e) => s + e.records, 0),
      changelogEndOffsets: changelogEnd,
      sessionTimeoutMs: opts.sessionTimeoutMs ?? 'default (45000)',
      verify,
    };
  } finally {
    await stopJvm(b, bOk ? 'SIGTERM' : 'SIGKILL');
  }
}

// ---------------------------------------------------------------------------------------------- main

function table(results: Result[]): string {
  const rows = [
    '| configuration | records | records/s | steady records/s | CPU s / 1k records | peak RSS MB | spawn→RUNNING s | output read_committed | wrong final states |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const r of results)
    rows.push(
      `| ${r.label} | ${r.records} | ${Math.round(r.recordsPerSec)} | ${Math.round(r.steadyRecordsPerSec)} | ` +
        `${r.cpuSecPer1k.toFixed(3)} | ${Math.round(r.peakRssMb)} | ${r.secondsToRunning?.toFixed(1) ?? '–'} | ` +
        `${r.verify.outputRecords} | ${r.verify.wrongFinalStates} |`,
    );
  return rows.join('\n');
}

function failoverTable(results: Failover[]): string {
  const f = (v: number | undefined) => (v === undefined ? '–' : v.toFixed(1));
  const rows = [
    '| keys (with state) | changelog records | kill → first output s | kill → wave done s | B spawn → RUNNING s | B restore s | restored records | output ok |',
    '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
  ];
  for (const r of results)
    rows.push(
      `| ${r.keys} (${r.stateKeys}) | ${r.changelogEndOffsets} | ${f(r.killToFirstOutputSeconds)} | ` +
        `${f(r.killToSecondWaveDoneSeconds)} | ${f(r.bSpawnToRunningSeconds)} | ${f(r.bRestoreSeconds)} | ` +
        `${r.bRestoredRecords} | ${r.verify.outputRecords}/${r.verify.expectedRecords}, ${r.verify.wrongFinalStates} wrong |`,
    );
  return rows.join('\n');
}

/** Latency at a fixed offered load, measured as bench/latency/run.ts measures redfence. */
async function latency(): Promise<LatencyResult> {
  const lat = {
    rate: envInt('BENCH_RATE', 2000),
    seconds: envInt('BENCH_SECONDS', 20),
    keys: opts.keys,
    partitions: opts.partitions,
    run,
  };
  console.error(`[ks] latency: ${lat.rate} records/s for ${lat.seconds} s, ${lat.keys} keys`);
  return measureLatency(
    { kafka, opts: lat, topics },
    'kafka-streams exactly_once_v2, 1 thread, cache 0',
    'ks',
    async (t) => {
      const appId = `bench-ks-${run}-lat`;
      const stateDir = join(WORK, 'state', appId);
      topics.push(`${appId}-totals-changelog`);
      groups.push(appId);
      stateDirs.push(stateDir);
      const jvm = startJvm({ ...t, appId, stateDir, threads: 1, cache: '0' }, jvmSettings);
      const end = Date.now() + PHASE_TIMEOUT_MS;
      while (toRunning(jvm) === undefined) {
        if (Date.now() > end || jvm.proc.exitCode !== null)
          throw new Error(`Kafka Streams did not reach RUNNING: ${jvm.stderrTail()}`);
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
      let last = 0;
      return {
        stop: () => stopJvm(jvm),
        cpuSeconds: () => {
          last = cpuSeconds(jvm.pid) ?? last;
          return last;
        },
      };
    },
  );
}

async function main(): Promise<Record<string, unknown>> {
  buildPeer();
  await admin.connect();
  const load: number[][] = [loadavg()];
  if (LATENCY) {
    const r = await latency();
    console.log(latencyTable([r]));
    return { mode: 'latency', loadavg: [...load, loadavg()], latency: r };
  }
  if (FAILOVER) {
    console.error(
      `[ks] failover: keys ${opts.failoverKeys.join(', ')}, first wave max(${opts.records}, keys), second wave ${opts.failoverWave}`,
    );
    const results: Failover[] = [];
    for (const k of opts.failoverKeys) {
      const r = await failover(k);
      console.error(
        `[ks] failover ${k} keys: kill → first output ${r.killToFirstOutputSeconds.toFixed(1)} s, restore ${r.bRestoreSeconds?.toFixed(1) ?? '–'} s`,
      );
      results.push(r);
      load.push(loadavg());
    }
    console.log(failoverTable(results));
    return { mode: 'failover', loadavg: load, failover: results };
  }

  const input = `bench-ks-${run}-in`;
  topics.push(input);
  console.error(
    `[ks] ${opts.records} records, ${opts.keys} keys, ${opts.partitions} partitions; input ${input}`,
  );
  await createTopics(kafka, [input], opts.partitions);
  const tp = performance.now();
  await preload(kafka, input, opts.records, orders(opts.keys));
  console.error(`[ks] preloaded in ${((performance.now() - tp) / 1000).toFixed(1)} s`);
  const end = await endOffsets(input);
  if (sum(end) !== opts.records) throw new Error(`input end offsets ${sum(end)} != ${opts.records}`);

  const configs: Config[] = [
    { label: 'kafka-streams exactly_once_v2, 1 thread, cache 0', threads: 1, cache: '0' },
    { label: 'kafka-streams exactly_once_v2, 2 threads, cache 0', threads: 2, cache: '0' },
    {
      label: 'kafka-streams exactly_once_v2, 1 thread, default cache (10 MiB: coalesces outputs)',
      threads: 1,
      cache: 'default',
    },
  ];
  const results: Result[] = [];
  for (const cfg of configs) {
    if (ONLY && !cfg.label.includes(ONLY)) continue;
    const r = await throughput(cfg, input, end);
    console.error(
      `[ks] ${cfg.label}: ${Math.round(r.recordsPerSec)} records/s (${r.seconds.toFixed(1)} s), ` +
        `${r.cpuSecPer1k.toFixed(3)} CPU s/1k, peak RSS ${Math.round(r.peakRssMb)} MB, ` +
        `output ${r.verify.outputRecords} (${r.verify.wrongFinalStates} wrong final states)`,
    );
    results.push(r);
    load.push(loadavg());
  }
  console.log(table(results));
  return { mode: 'throughput', loadavg: load, results };
}

const killChildren = killJvms;
process.on('SIGINT', () => {
  killChildren();
  process.exit(130);
});
process.on('SIGTERM', () => {
  killChildren();
  process.exit(143);
});
process.on('exit', killChildren);

try {
  const out = await main();
  mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
  const file = join(ROOT, 'bench/results/kafka-streams.raw.json');
  // One file; per kind of run (throughput-<N>-records, failover-session-timeout-<ms>) a list of runs, newest
  // last (the machine is shared and noisy: keep every sample).
  let previous: Record<string, unknown> = {};
  try {
    previous = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  } catch {
    previous = {};
  }
  const entry = {
    date: new Date().toISOString(),
    options: opts,
    host: { cpus: cpus().length, cpu: cpus()[0]?.model, node: process.version },
    java: spawnSync('java', ['-version'], { encoding: 'utf8' }).stderr.trim().split('\n')[0],
    kafkaStreams: '4.4.0',
    ...out,
  };
  const key =
    out.mode === 'throughput'
      ? `throughput-${opts.records}-records`
      : out.mode === 'latency'
        ? 'latency'
        : `failover-session-timeout-${opts.sessionTimeoutMs ?? 'default'}`;
  const runs = Array.isArray(previous[key]) ? (previous[key] as unknown[]) : [];
  writeFileSync(file, `${JSON.stringify({ ...previous, [key]: [...runs, entry] }, null, 2)}\n`);
  console.error(`[ks] wrote ${file} (${key})`);
} finally {
  killChildren();
  await deleteTopics(kafka, topics);
  if (groups.length > 0) await admin.deleteGroups(groups).catch(() => undefined);
  await admin.disconnect().catch(() => undefined);
  for (const d of stateDirs) rmSync(d, { recursive: true, force: true });
}
