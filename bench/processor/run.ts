/**
 * Processor benchmark: one preloaded input topic, then, each with a fresh group, output topic and
 * Redis store: a passthrough consumer (the Kafka I/O ceiling), the naive loop (seed sketch script
 * once per record), redfence at-least-once, redfence
 * exactly-once (operation `add`, emit state), and the JS reducer path (exactly-once) with owner-local state
 * and without.
 *
 *   node --import tsx bench/processor/run.ts
 *
 * Env: BENCH_RECORDS (100000), BENCH_KEYS (10000), BENCH_PARTITIONS (6), BENCH_BATCH (500: max records
 * per batch, js.consumer.max.batch.size), BENCH_GROUP_COMMIT (2000: redfence's groupCommitRecords; 0
 * gives every batch its own produce + commit or transaction), BENCH_ONLY (run only configurations whose label contains one of its comma-separated parts),
 * KAFKA_BROKERS (127.0.0.1:19092), REDIS_URL (redis://127.0.0.1:16379).
 */
import { Redis } from 'ioredis';
import { defineProcessor, type ProcessingMode, Processor, RedfenceMetrics } from '../../src/index.js';
import { startLowLevel } from '../kafka-paths/lowlevel.js';
import {
  createTopics,
  deleteTopics,
  endOffsetSum,
  envInt,
  kafkaClient,
  orderMaker,
  preload,
  startNaive,
  startPassthrough,
} from './kafka.js';
import { cpuSeconds, devPid } from './procstat.js';
import { dropStore, redisCpuSeconds, selected, untilDone, writeResults } from './support.js';

const opts = {
  records: envInt('BENCH_RECORDS', 100_000),
  keys: envInt('BENCH_KEYS', 10_000),
  partitions: envInt('BENCH_PARTITIONS', 6),
  maxBatchSize: envInt('BENCH_BATCH', 500),
  /** redfence's groupCommitRecords (unset: the default; 0 turns group commit off). */
  groupCommitRecords: process.env.BENCH_GROUP_COMMIT === '0' ? 0 : envInt('BENCH_GROUP_COMMIT', 2000),
  /** redfence's commitIntervalMs (0: a Kafka step starts as soon as the previous one finished). */
  commitIntervalMs: process.env.BENCH_COMMIT_INTERVAL ? Number(process.env.BENCH_COMMIT_INTERVAL) : 0,
  brokers: (process.env.KAFKA_BROKERS ?? '127.0.0.1:19092').split(','),
  redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:16379',
};
/** Bound of one configuration: 180 s, or 1 ms per record above 180,000 (the naive loop at 1M records). */
const TIMEOUT_MS = Math.max(180_000, opts.records);

const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
const input = `bench-proc-${run}-in`;
const deadLetter = `${input}.DLT`;
const topics = [input, deadLetter];
const kafka = kafkaClient(opts.brokers);
const redis = new Redis(opts.redisUrl, { lazyConnect: true });

interface Order {
  customer: string;
  amount: number;
  pad: string;
}

// Deterministic orders: customer by a multiplicative hash of i, amount 1..100, pad to ~100 bytes.
const order = orderMaker(opts.keys);

interface Result {
  label: string;
  records: number;
  seconds: number;
  /** From the first committed batch to the last (group join and first fetch excluded). */
  steadySeconds: number;
  recordsPerSec: number;
  steadyRecordsPerSec: number;
  cpuSecPer1k: number;
  redisCpuSecPer1k: number;
  /** Script calls (EVALSHA + EVAL) Redis counted per record (INFO commandstats; other clients count too). */
  scriptCallsPerRecord: number;
  /** The dev Kafka broker's CPU (NaN against the user's own broker). */
  brokerCpuSecPer1k: number;
  batches: number;
  avgBatch: number;
  outputEndOffsets: number;
  /** redfence only: histogram sums (seconds) and counts from metricsText(). */
  metrics?: Record<string, { sum: number; count: number }>;
  verdicts?: Record<string, number>;
}

async function scriptCalls(): Promise<number> {
  const info = await redis.info('commandstats');
  let n = 0;
  for (const m of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) n += Number(m[1]);
  return n;
}

/** `<name>_sum{labels} v` / `<name>_count{labels} v` lines of the Prometheus text, by `name{labels}`. */
function histograms(text: string): Record<string, { sum: number; count: number }> {
  const out: Record<string, { sum: number; count: number }> = {};
  for (const line of text.split('\n')) {
    const m = /^(\w+)_(sum|count)(\{[^}]*\})? (\S+)$/.exec(line);
    if (!m) continue;
    const name = `${m[1]}${m[3] ?? ''}`;
    const h = out[name] ?? { sum: 0, count: 0 };
    out[name] = h;
    h[m[2] as 'sum' | 'count'] = Number(m[4]);
  }
  return out;
}

/** Runs `start`, polls `progress()` until it reaches N (fails after TIMEOUT_MS), then `stop`. */
async function timed(
  label: string,
  output: string,
  go: () => Promise<{ progress: () => number; batches: () => number; stop: () => Promise<void> }>,
): Promise<Omit<Result, 'metrics' | 'verdicts'>> {
  const n = opts.records;
  const cpu0 = process.cpuUsage();
  const rcpu0 = await redisCpuSeconds(redis);
  const bcpu0 = cpuSeconds(devPid('kafka'));
  const calls0 = await scriptCalls();
  const t0 = performance.now();
  const h = await go();
  const { t1, tFirst, firstRecords } = await untilDone(label, h, n, t0, TIMEOUT_MS);
  const cpu = process.cpuUsage(cpu0);
  const rcpu = (await redisCpuSeconds(redis)) - rcpu0;
  const bcpu = cpuSeconds(devPid('kafka')) - bcpu0;
  const calls = (await scriptCalls()) - calls0;
  const batches = h.batches();
  await h.stop();
  const seconds = (t1 - t0) / 1000;
  const steadySeconds = (t1 - tFirst) / 1000;
  return {
    label,
    records: n,
    seconds,
    steadySeconds,
    recordsPerSec: n / seconds,
    steadyRecordsPerSec: steadySeconds > 0 ? (n - firstRecords) / steadySeconds : 0,
    cpuSecPer1k: ((cpu.user + cpu.system) / 1e6 / n) * 1000,
    redisCpuSecPer1k: (rcpu / n) * 1000,
    brokerCpuSecPer1k: (bcpu / n) * 1000,
    scriptCallsPerRecord: calls / n,
    batches,
    avgBatch: batches > 0 ? n / batches : 0,
    outputEndOffsets: await endOffsetSum(kafka, output),
  };
}

/**
 * The ceiling of the client the processor uses: its low-level API, consume(batch x partitions), each
 * record produced unchanged, the delivery reports awaited, then the batch's offsets committed.
 */
async function passthrough(): Promise<Result> {
  const output = `bench-proc-${run}-out-pass`;
  topics.push(output);
  await createTopics(kafka, [output], opts.partitions);
  return timed('passthrough', output, async () => {
    const p = await startLowLevel(
      {
        brokers: opts.brokers,
        input,
        output,
        groupId: `bench-proc-${run}-pass`,
        records: opts.records,
        partitions: opts.partitions,
      },
      opts.maxBatchSize * opts.partitions,
      5,
    );
    return { progress: () => p.progress(), batches: () => p.batches(), stop: () => p.stop() };
  });
}

/** The same through the promise (KafkaJS-style) API: eachBatch, one partition at a time. */
async function passthroughPromise(): Promise<Result> {
  const output = `bench-proc-${run}-out-pass-promise`;
  topics.push(output);
  await createTopics(kafka, [output], opts.partitions);
  return timed('passthrough (promise API)', output, async () => {
    const p = await startPassthrough(kafka, {
      input,
      output,
      groupId: `bench-proc-${run}-pass-promise`,
      maxBatchSize: opts.maxBatchSize,
    });
    return { progress: () => p.stats.records, batches: () => p.stats.batches, stop: () => p.stop() };
  });
}

async function naive(): Promise<Result> {
  const output = `bench-proc-${run}-out-naive`;
  const store = `bench-${run}-naive`;
  topics.push(output);
  await createTopics(kafka, [output], opts.partitions);
  const r = await timed('naive (HGET + EVALSHA per record)', output, async () => {
    const p = await startNaive(kafka, redis, {
      input,
      output,
      groupId: `bench-proc-${run}-naive`,
      maxBatchSize: opts.maxBatchSize,
      store,
    });
    return { progress: () => p.stats.records, batches: () => p.stats.batches, stop: () => p.stop() };
  });
  await dropStore(redis, store);
  return r;
}

/** `reducer`: a JS reduce (read, fold, compare-and-set) with owner-local state; `reducer-read`: without it. */
type Shape = 'operation' | 'reducer' | 'reducer-read';

async function redfence(
  mode: ProcessingMode,
  commitIntervalMs = opts.commitIntervalMs,
  shape: Shape = 'operation',
): Promise<Result> {
  const tag = `${mode === 'exactly-once' ? 'eos' : 'alo'}${commitIntervalMs > 0 ? `-ci${commitIntervalMs}` : ''}${shape === 'operation' ? '' : `-${shape}`}`;
  // exactly-once's default commit interval is 100 ms (src/processor/options.ts), at-least-once's 0
  const base =
    mode === 'exactly-once'
      ? `redfence exactly-once${commitIntervalMs === 100 ? ' (default: commit interval 100 ms)' : `, commit interval ${commitIntervalMs} ms`}`
      : `redfence at-least-once${commitIntervalMs > 0 ? `, commit interval ${commitIntervalMs} ms` : ''}`;
  const label =
    shape === 'operation'
      ? base
      : `${base}, ${shape === 'reducer' ? 'reducer (owner-local state)' : 'reducer (owner-local state off)'}`;
  const output = `bench-proc-${run}-out-${tag}`;
  const store = `bench-${run}-${tag}`;
  topics.push(output);
  await createTopics(kafka, [output], opts.partitions);
  const metrics = new RedfenceMetrics();
  let processor: Processor<Order> | undefined;
  const timing = await timed(label, output, async () => {
    const p = new Processor<Order>({
      definition: defineProcessor<Order>({
        input,
        output,
        deadLetter,
        store,
        ...(shape === 'operation'
          ? { operation: (o: Order) => ({ op: 'add' as const, by: o.amount }), emit: 'state' as const }
          : {
              reduce: (total: unknown, o: Order) => {
                const state = ((total as number | null) ?? 0) + o.amount;
                return { state, output: String(state) };
              },
            }),
      }),
      ...(shape === 'reducer-read' ? { ownerCache: false as const } : {}),
      redis,
      mode,
      groupId: `bench-proc-${run}-${tag}`,
      groupCommitRecords: opts.groupCommitRecords,
      commitIntervalMs,
      ...(process.env.BENCH_SWEEP_EVERY ? { sweepEvery: Number(process.env.BENCH_SWEEP_EVERY) } : {}),
      ...(process.env.BENCH_IN_FLIGHT ? { partitionsInFlight: Number(process.env.BENCH_IN_FLIGHT) } : {}),
      metrics,
      kafka: { brokers: opts.brokers, maxBatchSize: opts.maxBatchSize },
    });
    processor = p;
    await p.start();
    // batches: read from the metrics below
    return { progress: () => p.counts().records, batches: () => 0, stop: () => p.close() };
  });
  const text = await metrics.metricsText();
  const h = histograms(text);
  const batches = h.redfence_batch_records?.count ?? 0;
  await dropStore(redis, store);
  return {
    ...timing,
    batches,
    avgBatch: batches > 0 ? (h.redfence_batch_records?.sum ?? 0) / batches : 0,
    metrics: h,
    verdicts: { ...processor?.counts().verdicts },
  };
}

function table(results: Result[]): string {
  const pass = results.find((r) => r.label === 'passthrough');
  const ratio = (v: number, p: number | undefined) => (p ? `${(v / p).toFixed(2)}x` : '–');
  const rows = [
    '| configuration | records/s | vs passthrough | steady records/s | vs passthrough | CPU s / 1k records | vs passthrough | Redis CPU s / 1k | broker CPU s / 1k | script calls / record | batches | records / batch |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const r of results) {
    rows.push(
      `| ${r.label} | ${Math.round(r.recordsPerSec)} | ${ratio(r.recordsPerSec, pass?.recordsPerSec)} | ` +
        `${Math.round(r.steadyRecordsPerSec)} | ${ratio(r.steadyRecordsPerSec, pass?.steadyRecordsPerSec)} | ` +
        `${r.cpuSecPer1k.toFixed(3)} | ${ratio(r.cpuSecPer1k, pass?.cpuSecPer1k)} | ` +
        `${r.redisCpuSecPer1k.toFixed(3)} | ${Number.isFinite(r.brokerCpuSecPer1k) ? r.brokerCpuSecPer1k.toFixed(3) : '–'} | ` +
        `${r.scriptCallsPerRecord.toFixed(4)} | ${r.batches} | ${r.avgBatch.toFixed(1)} |`,
    );
  }
  return rows.join('\n');
}

/** Mean duration (ms) per call of the redfence histograms worth a look. */
function breakdown(r: Result): string {
  const parts: string[] = [];
  for (const [name, h] of Object.entries(r.metrics ?? {})) {
    if (h.count === 0 || !/duration_seconds/.test(name)) continue;
    parts.push(
      `${name.replace(/^redfence_/, '')}: ${h.count} calls, ${((h.sum / h.count) * 1000).toFixed(2)} ms mean, ${h.sum.toFixed(2)} s total`,
    );
  }
  return parts.map((p) => `  - ${p}`).join('\n');
}

async function main(): Promise<void> {
  await redis.connect();
  console.error(
    `[bench] ${opts.records} records, ${opts.keys} keys, ${opts.partitions} partitions, batch ≤ ${opts.maxBatchSize}; input ${input}`,
  );
  await createTopics(kafka, [input, deadLetter], opts.partitions);
  const tp = performance.now();
  await preload(kafka, input, opts.records, order);
  console.error(`[bench] preloaded in ${((performance.now() - tp) / 1000).toFixed(1)} s`);

  const configs: Array<[string, () => Promise<Result>]> = [
    ['passthrough', passthrough],
    ['passthrough (promise API)', passthroughPromise],
    ['naive', naive],
    ['redfence at-least-once', () => redfence('at-least-once')],
    // the default, as Kafka Streams' exactly_once_v2 (commit.interval.ms 100)
    ['redfence exactly-once (default: commit interval 100 ms)', () => redfence('exactly-once', 100)],
    ['redfence exactly-once, commit interval 0 ms', () => redfence('exactly-once', 0)],
    // the JS reducer path, with and without owner-local state (its read skipped for keys it last wrote)
    [
      'redfence exactly-once (default: commit interval 100 ms), reducer (owner-local state)',
      () => redfence('exactly-once', 100, 'reducer'),
    ],
    [
      'redfence exactly-once (default: commit interval 100 ms), reducer (owner-local state off)',
      () => redfence('exactly-once', 100, 'reducer-read'),
    ],
  ];
  const results: Result[] = [];
  for (const [label, fn] of configs) {
    if (!selected(label)) continue;
    const r = await fn();
    console.error(
      `[bench] ${label}: ${Math.round(r.recordsPerSec)} records/s (${r.seconds.toFixed(1)} s), ` +
        `${r.batches} batches, ${r.avgBatch.toFixed(1)} records/batch`,
    );
    results.push(r);
  }

  console.log(table(results));
  const naiveResult = results.find((r) => r.label.startsWith('naive'));
  if (naiveResult)
    for (const r of results)
      if (r.label.startsWith('redfence'))
        console.log(
          `${r.label}: ${(r.recordsPerSec / naiveResult.recordsPerSec).toFixed(2)}x the naive loop's records/s`,
        );
  for (const r of results) if (r.metrics) console.log(`\n${r.label}:\n${breakdown(r)}`);

  const file = writeResults('processor', opts, results);
  console.error(`[bench] wrote ${file}`);
}

try {
  await main();
} finally {
  await deleteTopics(kafka, topics);
  redis.disconnect();
}
