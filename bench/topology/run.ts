/**
 * Topology benchmark: the streams DSL against Kafka Streams running the same topology, on one preloaded
 * input topic, in one run (ratios within the run). Per topology, redfence's TopologyProcessor
 * (exactly-once, its defaults) then the Kafka Streams peer (exactly_once_v2, 1 thread, cache 0, its own
 * RocksDB window store), each with a fresh group, output topic and store; records/s from start to every
 * input offset committed, CPU per 1k records of the contender, Redis and the broker; then both outputs
 * are read (read_committed) and checked per key and window against the counts the input gives.
 *
 *   node --import tsx bench/topology/run.ts
 *   BENCH_RECORDS=1000000 BENCH_KEYS=1000000 node --import tsx bench/topology/run.ts
 *
 * Topologies (BENCH_TOPOLOGY, comma-separated, default both), keyed by customer, Jackson/JSON values:
 *  - fraud: orders -> filter(amount > 50) -> groupByKey -> 5-minute tumbling windows (grace 1 min) ->
 *    count -> toStream -> filter(count > 10) -> (customer, {start, end, count}) -> fraud-alerts;
 *  - windowed-count: orders -> groupByKey -> 1-minute tumbling windows (grace 1 min) -> count ->
 *    toStream -> (customer, {start, end, count}).
 * The orders are bench/processor's, with event times spread evenly over BENCH_SPAN_MS (15 minutes: at 10k keys and 1M records a key's 5-minute window holds about 17 orders above 50, so the fraud topology alerts) ending
 * before now; the grace covers the disorder of the preload's concurrent sends, so no record is late.
 *
 * Env: BENCH_RECORDS (100000), BENCH_KEYS (10000), BENCH_PARTITIONS (6), BENCH_SPAN_MS (900000),
 * BENCH_TOPOLOGY, BENCH_ONLY (labels containing one of its comma-separated parts), BENCH_JAVA_OPTS,
 * BENCH_COMMIT_INTERVAL (redfence's commitIntervalMs), BENCH_BATCH (redfence's kafka.maxBatchSize), BENCH_PROBE (a directory: redfence's run profiled,
 * bench/topology/probe.ts), BENCH_FROM (dist when dist/index.js exists, else src):
 * redfence as users run it, the build; `src` loads the sources through tsx, whose transform wraps every
 * closure it creates in a naming call (about a third more Node CPU per record in the executor),
 * KAFKA_BROKERS (127.0.0.1:19092), REDIS_URL (redis://127.0.0.1:16379).
 */
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { LogReader } from '../../src/kafka/log-reader.js';
import {
  buildPeer,
  cpuSeconds as jvmCpuSeconds,
  killJvms,
  startJvm,
  stopJvm,
  WORK,
} from '../peers/kafka-streams/jvm.js';
import { createTopics, deleteTopics, envInt, kafkaClient, orderMaker, preload } from '../processor/kafka.js';
import { cpuSeconds, devPid } from '../processor/procstat.js';
import { dropStore, redisCpuSeconds, selected, untilDone, writeResults } from '../processor/support.js';
import { probe } from './probe.js';

// redfence from its build, as users run it (tsx's transform of src/ costs CPU of its own)
const dist = new URL('../../dist/index.js', import.meta.url);
const FROM = process.env.BENCH_FROM ?? (existsSync(dist) ? 'dist' : 'src');
const { serdes, TimeWindows, TopologyProcessor, topology } = (await import(
  FROM === 'dist' ? dist.href : '../../src/index.js'
)) as typeof import('../../src/index.js');

const opts = {
  records: envInt('BENCH_RECORDS', 100_000),
  keys: envInt('BENCH_KEYS', 10_000),
  partitions: envInt('BENCH_PARTITIONS', 6),
  spanMs: envInt('BENCH_SPAN_MS', 900_000),
  /** redfence's kafka.maxBatchSize (0: its default, 500). */
  batch: envInt('BENCH_BATCH', 0),
  topologies: (process.env.BENCH_TOPOLOGY ?? 'fraud,windowed-count').split(',').filter((s) => s !== ''),
  brokers: (process.env.KAFKA_BROKERS ?? '127.0.0.1:19092').split(','),
  redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:16379',
  javaOpts: (process.env.BENCH_JAVA_OPTS ?? '').split(/\s+/).filter((s) => s !== ''),
};
const GRACE_MS = 60_000;
const SHAPES = {
  fraud: { windowMs: 5 * 60_000, minAmount: 50, minCount: 10 },
  'windowed-count': { windowMs: 60_000, minAmount: 0, minCount: 0 },
} as const;
type Shape = keyof typeof SHAPES;
for (const t of opts.topologies)
  if (!(t in SHAPES)) throw new Error(`BENCH_TOPOLOGY: unknown topology ${t} (fraud, windowed-count)`);
const TIMEOUT_MS = Math.max(300_000, opts.records);

const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
const input = `bench-topo-${run}-in`;
const topics = [input, `${input}.DLT`];
const stateDirs: string[] = [];
const kafka = kafkaClient(opts.brokers);
const redis = new Redis(opts.redisUrl, { lazyConnect: true });
// event times: evenly over the span, ending an hour before now (whole hours: windows align the same way)
const t0 = Math.floor((Date.now() - opts.spanMs - 3_600_000) / 3_600_000) * 3_600_000;
const timeOf = (i: number) => t0 + Math.floor((i * opts.spanMs) / opts.records);
const orders = orderMaker(opts.keys);
const amountOf = (i: number) => (i % 100) + 1; // orderMaker's amount

interface Order {
  customer: string;
  amount: number;
}

/** What a topology's output must hold: per `customer start`, the window's final count, and the record count. */
function expected(shape: Shape): { windows: Map<string, number>; records: number } {
  const s = SHAPES[shape];
  const counts = new Map<string, number>();
  for (let i = 0; i < opts.records; i++) {
    if (amountOf(i) <= s.minAmount) continue;
    const start = Math.floor(timeOf(i) / s.windowMs) * s.windowMs;
    const id = `${orders(i).key} ${start}`;
    counts.set(id, (counts.get(id) ?? 0) + 1);
  }
  const windows = new Map<string, number>();
  let records = 0;
  for (const [id, n] of counts)
    if (n > s.minCount) {
      windows.set(id, n);
      records += n - s.minCount; // every update above the threshold is forwarded (no cache)
    }
  return { windows, records };
}

function built(shape: Shape, appId: string, output: string) {
  const s = SHAPES[shape];
  const t = topology({ applicationId: appId });
  let orders = t.stream<string, Order>(input, { key: serdes.string() });
  if (shape === 'fraud') orders = orders.filter((_c, o) => o.amount > s.minAmount);
  let counts = orders
    .groupByKey()
    .windowedBy(TimeWindows.ofSizeAndGrace(s.windowMs, GRACE_MS))
    .count({ name: 'counts' })
    .toStream();
  if (shape === 'fraud') counts = counts.filter((_w, n) => n > s.minCount);
  counts
    .map((w, n) => [w.key, { start: w.start, end: w.end, count: n }] as const)
    .to(output, { key: serdes.string() });
  return t.build();
}

interface Result {
  label: string;
  topology: Shape;
  records: number;
  seconds: number;
  steadySeconds: number;
  recordsPerSec: number;
  steadyRecordsPerSec: number;
  cpuSecPer1k: number;
  redisCpuSecPer1k: number;
  brokerCpuSecPer1k: number;
  outputRecords: number;
  expectedOutputRecords: number;
  /** Windows whose last count differs from the input's, or missing. */
  wrongWindows: number;
}

/** Reads `output` to its end (read_committed): records, and the largest count per `customer start`. */
async function readOutput(output: string): Promise<{ records: number; windows: Map<string, number> }> {
  const reader = await LogReader.open({ client: { brokers: opts.brokers }, timeoutMs: 60_000 });
  const windows = new Map<string, number>();
  let records = 0;
  try {
    for (let p = 0; p < opts.partitions; p++) {
      const { low, high } = await reader.watermarks(output, p);
      await reader.read(output, p, low, high, (m) => {
        records++;
        const v = JSON.parse(m.value?.toString() ?? 'null') as { start: number; count: number };
        const id = `${m.key?.toString()} ${v.start}`;
        windows.set(id, Math.max(windows.get(id) ?? 0, v.count));
      });
    }
  } finally {
    await reader.close();
  }
  return { records, windows };
}

async function measure(
  label: string,
  shape: Shape,
  output: string,
  go: () => Promise<{ progress: () => number; stop: () => Promise<void>; cpu: () => number }>,
): Promise<Result> {
  const n = opts.records;
  const rcpu0 = await redisCpuSeconds(redis);
  const bcpu0 = cpuSeconds(devPid('kafka'));
  const start = performance.now();
  const h = await go();
  const { t1, tFirst, firstRecords } = await untilDone(label, h, n, start, TIMEOUT_MS);
  const cpu = h.cpu();
  const rcpu = (await redisCpuSeconds(redis)) - rcpu0;
  const bcpu = cpuSeconds(devPid('kafka')) - bcpu0;
  await h.stop();
  const want = expected(shape);
  const got = await readOutput(output);
  let wrong = 0;
  for (const [id, c] of want.windows) if (got.windows.get(id) !== c) wrong++;
  for (const id of got.windows.keys()) if (!want.windows.has(id)) wrong++;
  return {
    label,
    topology: shape,
    records: n,
    seconds: (t1 - start) / 1000,
    steadySeconds: (t1 - tFirst) / 1000,
    recordsPerSec: n / ((t1 - start) / 1000),
    steadyRecordsPerSec: t1 > tFirst ? (n - firstRecords) / ((t1 - tFirst) / 1000) : 0,
    cpuSecPer1k: (cpu / n) * 1000,
    redisCpuSecPer1k: (rcpu / n) * 1000,
    brokerCpuSecPer1k: (bcpu / n) * 1000,
    outputRecords: got.records,
    expectedOutputRecords: want.records,
    wrongWindows: wrong,
  };
}

async function redfence(shape: Shape): Promise<Result> {
  const appId = `bench-topo-${run}-${shape}-rf`;
  const output = `${appId}-out`;
  topics.push(output);
  await createTopics(kafka, [output], opts.partitions);
  const label = `redfence exactly-once (defaults), ${shape}`;
  const probed = probe(redis);
  try {
    return await measure(label, shape, output, async () => {
      await probed.start();
      const cpu0 = process.cpuUsage();
      const p = new TopologyProcessor({
        ...probed.options,
        topology: built(shape, appId, output),
        redis,
        mode: 'exactly-once',
        deadLetterTopic: `${input}.DLT`,
        kafka: { brokers: opts.brokers, ...(opts.batch > 0 ? { maxBatchSize: opts.batch } : {}) },
        ...(process.env.BENCH_COMMIT_INTERVAL
          ? { commitIntervalMs: Number(process.env.BENCH_COMMIT_INTERVAL) }
          : {}),
      });
      await p.start();
      return {
        progress: () => p.counts().records,
        stop: async () => {
          await probed.stop(label, opts.records);
          await p.close();
        },
        cpu: () => {
          const c = process.cpuUsage(cpu0);
          return (c.user + c.system) / 1e6;
        },
      };
    });
  } finally {
    await dropStore(redis, appId);
  }
}

async function kafkaStreams(shape: Shape): Promise<Result> {
  const appId = `bench-topo-${run}-${shape}-ks`;
  const output = `${appId}-out`;
  const stateDir = join(WORK, 'state', appId);
  topics.push(output, `${appId}-counts-changelog`);
  stateDirs.push(stateDir);
  await createTopics(kafka, [output], opts.partitions);
  const label = `kafka-streams exactly_once_v2, 1 thread, cache 0, ${shape}`;
  const admin = kafka.admin();
  await admin.connect();
  let committed = 0;
  try {
    return await measure(label, shape, output, async () => {
      const jvm = startJvm(
        { input, output, appId, stateDir, threads: 1, cache: '0' },
        {
          brokers: opts.brokers,
          javaOpts: opts.javaOpts,
          logLevel: 'warn',
          env: {
            KS_TOPOLOGY: shape,
            KS_WINDOW_MS: String(SHAPES[shape].windowMs),
            KS_GRACE_MS: String(GRACE_MS),
          },
        },
      );
      let cpu = 0;
      // the group's committed offsets, polled in the background (untilDone reads the last figure)
      let polling = true;
      const poll = (async () => {
        while (polling) {
          committed = await admin
            .fetchOffsets({ groupId: appId, topics: [input] })
            .then((rows) =>
              (rows[0]?.partitions ?? []).reduce((a, p) => a + Math.max(0, Number(p.offset)), 0),
            )
            .catch(() => committed);
          cpu = jvmCpuSeconds(jvm.pid) ?? cpu;
          await new Promise((r) => setTimeout(r, 100));
        }
      })();
      return {
        progress: () => committed,
        failure: () =>
          jvm.proc.exitCode !== null || jvm.proc.signalCode !== null
            ? `the JVM exited (${jvm.proc.exitCode ?? jvm.proc.signalCode}):\n${jvm.stderrTail()}`
            : undefined,
        cpu: () => cpu,
        stop: async () => {
          polling = false;
          await poll;
          await stopJvm(jvm);
        },
      };
    });
  } finally {
    await admin.deleteGroups([appId]).catch(() => undefined);
    await admin.disconnect();
  }
}

function table(results: Result[]): string {
  const rows = [
    '| configuration | records/s | vs Kafka Streams | steady records/s | CPU s / 1k records | Redis CPU s / 1k | broker CPU s / 1k | outputs (expected) | wrong windows |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const r of results) {
    const ks = results.find((x) => x.topology === r.topology && x.label.startsWith('kafka-streams'));
    rows.push(
      `| ${r.label} | ${Math.round(r.recordsPerSec)} | ${ks ? `${(r.recordsPerSec / ks.recordsPerSec).toFixed(2)}x` : '–'} | ` +
        `${Math.round(r.steadyRecordsPerSec)} | ${r.cpuSecPer1k.toFixed(3)} | ${r.redisCpuSecPer1k.toFixed(3)} | ` +
        `${r.brokerCpuSecPer1k.toFixed(3)} | ${r.outputRecords} (${r.expectedOutputRecords}) | ${r.wrongWindows} |`,
    );
  }
  return rows.join('\n');
}

async function main(): Promise<void> {
  buildPeer();
  await redis.connect();
  console.error(
    `[bench] ${opts.records} records, ${opts.keys} keys, ${opts.partitions} partitions, event time ${opts.spanMs} ms; input ${input}; redfence from ${FROM}`,
  );
  await createTopics(kafka, [input, `${input}.DLT`], opts.partitions);
  const tp = performance.now();
  await preload(kafka, input, opts.records, (i) => ({ ...orders(i), timestamp: String(timeOf(i)) }));
  console.error(`[bench] preloaded in ${((performance.now() - tp) / 1000).toFixed(1)} s`);
  const results: Result[] = [];
  for (const shape of opts.topologies as Shape[])
    for (const [label, fn] of [
      [`redfence ${shape}`, redfence],
      [`kafka-streams ${shape}`, kafkaStreams],
    ] as const) {
      if (!selected(label)) continue;
      const r = await fn(shape);
      console.error(
        `[bench] ${r.label}: ${Math.round(r.recordsPerSec)} records/s (${r.seconds.toFixed(1)} s), ` +
          `outputs ${r.outputRecords} of ${r.expectedOutputRecords}, ${r.wrongWindows} wrong windows`,
      );
      results.push(r);
    }
  console.log(table(results));
  console.error(`[bench] wrote ${writeResults('topology', { ...opts, from: FROM }, results)}`);
}

process.on('exit', killJvms);
try {
  await main();
} finally {
  killJvms();
  await deleteTopics(kafka, topics);
  redis.disconnect();
  for (const d of stateDirs) rmSync(d, { recursive: true, force: true });
}
