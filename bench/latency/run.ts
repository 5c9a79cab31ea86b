/**
 * End-to-end latency at a fixed offered load below saturation, and CPU per component.
 *
 *   node --import tsx bench/latency/run.ts
 *
 * For each contender (passthrough, naive, redfence at-least-once, redfence exactly-once), on a fresh
 * input and output topic: start it, warm it up (200 records through to a read_committed consumer of
 * the output), then offer BENCH_RATE records/s for BENCH_SECONDS (paced every 10 ms, ~100-byte JSON
 * orders over BENCH_KEYS customers). Every contender gives its output the input record's timestamp
 * (the producer's clock when the order was sent), so the latency of an output is the watcher's clock
 * when it is read (read_committed: an exactly-once output counts once its transaction commits) minus
 * that timestamp: produce, broker, consume, process, produce, commit, fetch. One machine, one clock.
 *
 * The contender, the paced producer and the watcher share this process (the load is light); CPU is
 * reported per component over the measured window: this process, the Redis server and the Kafka
 * broker (from /proc when they were started by dev/, otherwise "–"), in CPU seconds per 1M records.
 *
 * Env: BENCH_RATE (2000 records/s: below the naive loop's ceiling on a 2-core machine), BENCH_SECONDS
 * (20), BENCH_KEYS (10000), BENCH_PARTITIONS (6), BENCH_BATCH (500), BENCH_ONLY, KAFKA_BROKERS
 * (127.0.0.1:19092), REDIS_URL (redis://127.0.0.1:16379). Results: a table on stdout and
 * bench/results/latency-<date>.raw.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { Redis } from 'ioredis';
import { defineProcessor, Processor } from '../../src/index.js';
import {
  createTopics,
  deleteTopics,
  envInt,
  kafkaClient,
  orderMaker,
  startNaive,
  startPassthrough,
} from '../processor/kafka.js';
import { cpuSeconds, devPid } from '../processor/procstat.js';

const opts = {
  rate: envInt('BENCH_RATE', 2000),
  seconds: envInt('BENCH_SECONDS', 20),
  keys: envInt('BENCH_KEYS', 10_000),
  partitions: envInt('BENCH_PARTITIONS', 6),
  maxBatchSize: envInt('BENCH_BATCH', 500),
  brokers: (process.env.KAFKA_BROKERS ?? '127.0.0.1:19092').split(','),
  redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:16379',
};
const ONLY = process.env.BENCH_ONLY;
const WARMUP = 200;
const TICK_MS = 10;
const quiet = { logLevel: KafkaJS.logLevel.NOTHING };

const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
const kafka = kafkaClient(opts.brokers);
const redis = new Redis(opts.redisUrl, { lazyConnect: true });
const order = orderMaker(opts.keys);
const topics: string[] = [];
const stores: string[] = [];

interface Started {
  stop(): Promise<void>;
}

interface Result {
  label: string;
  offered: number;
  received: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  /** CPU seconds per 1M records over the measured window. */
  cpu: { process: number; redis: number; broker: number };
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number;
}

async function redisCpu(): Promise<number> {
  const info = await redis.info('cpu');
  let s = 0;
  for (const line of info.split('\r\n')) {
    const [k, v] = line.split(':');
    if (k === 'used_cpu_sys' || k === 'used_cpu_user') s += Number(v);
  }
  return s;
}

/** A read_committed consumer of `topic` from its beginning; `seen` grows with every record read. */
async function watch(topic: string, onRecord: (timestampMs: number, now: number) => void) {
  const consumer = kafka.consumer({
    'group.id': `bench-lat-${run}-watch-${topic}`,
    'auto.offset.reset': 'earliest',
    'enable.auto.commit': false,
    'isolation.level': 'read_committed',
    'fetch.wait.max.ms': 100,
    kafkaJS: quiet,
  } as unknown as KafkaJS.ConsumerConstructorConfig);
  await consumer.connect();
  await consumer.subscribe({ topics: [topic] });
  await consumer.run({
    eachBatch: async ({ batch }) => {
      const now = Date.now();
      for (const m of batch.messages) onRecord(Number(m.timestamp), now);
    },
  });
  return consumer;
}

async function until(what: string, check: () => boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function measure(
  label: string,
  tag: string,
  start: (t: { input: string; output: string; store: string }) => Promise<Started>,
): Promise<Result> {
  const t = {
    input: `bench-lat-${run}-${tag}-in`,
    output: `bench-lat-${run}-${tag}-out`,
    store: `bench-lat-${run}-${tag}`,
  };
  topics.push(t.input, t.output, `${t.input}.DLT`);
  stores.push(t.store);
  await createTopics(kafka, [t.input, t.output, `${t.input}.DLT`], opts.partitions);
  const producer = kafka.producer({
    partitioner: 'murmur2_random',
    'enable.idempotence': true,
    acks: -1,
    'linger.ms': 1,
    kafkaJS: quiet,
  } as KafkaJS.ProducerConstructorConfig);
  await producer.connect();
  const contender = await start(t);
  let measureFrom = Number.POSITIVE_INFINITY;
  let warm = 0;
  const latencies: number[] = [];
  const watcher = await watch(t.output, (ts, now) => {
    if (ts >= measureFrom) latencies.push(now - ts);
    else warm++;
  });
  try {
    // warm-up: group joins, first fetches, script loading; not measured
    const sends: Promise<unknown>[] = [];
    sends.push(
      producer.send({ topic: t.input, messages: Array.from({ length: WARMUP }, (_, i) => order(1e9 + i)) }),
    );
    await Promise.all(sends.splice(0));
    await until(`${label}: warm-up outputs`, () => warm >= WARMUP, 120_000);

    const total = opts.rate * opts.seconds;
    const perTick = opts.rate / (1000 / TICK_MS);
    const cpu0 = {
      process: process.cpuUsage(),
      redis: await redisCpu(),
      broker: cpuSeconds(devPid('kafka')),
    };
    measureFrom = Date.now();
    const t0 = performance.now();
    let sent = 0;
    let errors = 0;
    for (let tick = 1; sent < total; tick++) {
      const due = Math.min(total, Math.round(tick * perTick));
      const messages = [];
      for (; sent < due; sent++) messages.push(order(sent));
      if (messages.length > 0)
        sends.push(
          producer.send({ topic: t.input, messages }).catch(() => {
            errors++;
          }),
        );
      const wait = t0 + tick * TICK_MS - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
    await Promise.all(sends);
    if (errors > 0) throw new Error(`${label}: ${errors} sends failed`);
    await until(`${label}: all outputs`, () => latencies.length >= total, 120_000);
    const cpuProcess = process.cpuUsage(cpu0.process);
    const perM = (s: number) => (s / total) * 1e6;
    const sorted = latencies.slice().sort((a, b) => a - b);
    return {
      label,
      offered: opts.rate,
      received: latencies.length,
      p50: percentile(sorted, 50),
      p90: percentile(sorted, 90),
      p99: percentile(sorted, 99),
      p999: percentile(sorted, 99.9),
      max: sorted.at(-1) ?? Number.NaN,
      cpu: {
        process: perM((cpuProcess.user + cpuProcess.system) / 1e6),
        redis: perM((await redisCpu()) - cpu0.redis),
        broker: perM(cpuSeconds(devPid('kafka')) - cpu0.broker),
      },
    };
  } finally {
    await watcher.disconnect().catch(() => undefined);
    await contender.stop();
    await producer.disconnect().catch(() => undefined);
  }
}

function redfence(mode: 'at-least-once' | 'exactly-once') {
  return async (t: { input: string; output: string; store: string }): Promise<Started> => {
    const p = new Processor<{ amount: number }>({
      definition: defineProcessor<{ amount: number }>({
        input: t.input,
        output: t.output,
        store: t.store,
        operation: (o) => ({ op: 'add', by: o.amount }),
        emit: 'state',
      }),
      redis,
      mode,
      groupId: `bench-lat-${run}-${mode}`,
      kafka: { brokers: opts.brokers, maxBatchSize: opts.maxBatchSize },
    });
    await p.start();
    return { stop: () => p.close() };
  };
}

const contenders: Array<
  [string, string, (t: { input: string; output: string; store: string }) => Promise<Started>]
> = [
  [
    'passthrough',
    'pass',
    (t) =>
      startPassthrough(kafka, { ...t, groupId: `bench-lat-${run}-pass`, maxBatchSize: opts.maxBatchSize }),
  ],
  [
    'naive (HGET + EVALSHA per record)',
    'naive',
    (t) =>
      startNaive(kafka, redis, { ...t, groupId: `bench-lat-${run}-naive`, maxBatchSize: opts.maxBatchSize }),
  ],
  ['redfence at-least-once', 'alo', redfence('at-least-once')],
  ['redfence exactly-once', 'eos', redfence('exactly-once')],
];

function table(results: Result[]): string {
  const f = (v: number) => (Number.isFinite(v) ? v.toFixed(1) : '–');
  const rows = [
    '| contender | offered records/s | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | CPU s / 1M: process | Redis | broker |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  ];
  for (const r of results)
    rows.push(
      `| ${r.label} | ${r.offered} | ${r.p50} | ${r.p90} | ${r.p99} | ${r.p999} | ${r.max} | ${f(r.cpu.process)} | ${f(r.cpu.redis)} | ${f(r.cpu.broker)} |`,
    );
  return rows.join('\n');
}

try {
  await redis.connect();
  console.error(
    `[latency] ${opts.rate} records/s for ${opts.seconds} s, ${opts.keys} keys, ${opts.partitions} partitions`,
  );
  const results: Result[] = [];
  for (const [label, tag, start] of contenders) {
    if (ONLY && !label.includes(ONLY)) continue;
    const r = await measure(label, tag, start);
    console.error(`[latency] ${JSON.stringify(r)}`);
    results.push(r);
  }
  console.log(table(results));
  mkdirSync('bench/results', { recursive: true });
  const file = `bench/results/latency-${new Date().toISOString().replace(/[:.]/g, '-')}.raw.json`;
  writeFileSync(
    file,
    `${JSON.stringify(
      {
        date: new Date().toISOString(),
        options: opts,
        host: { cpus: cpus().length, cpu: cpus()[0]?.model, loadavg: loadavg(), node: process.version },
        results,
      },
      null,
      2,
    )}\n`,
  );
  console.error(`[latency] wrote ${file}`);
} finally {
  await deleteTopics(kafka, topics);
  for (const store of stores) {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `rf:{${store}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
    } while (cursor !== '0');
  }
  redis.disconnect();
}
