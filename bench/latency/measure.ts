/**
 * One latency measurement (see run.ts): a fresh input and output topic, the contender started on
 * them, a warm-up, then a paced load; latency = the watcher's clock minus the output's timestamp
 * (every contender copies its input's timestamp to its output). Shared with the Kafka Streams peer.
 */
import { KafkaJS } from '@confluentinc/kafka-javascript';
import type { Redis } from 'ioredis';
import { createTopics, orderMaker } from '../processor/kafka.js';
import { cpuSeconds, devPid } from '../processor/procstat.js';
import { redisCpuSeconds } from '../processor/support.js';

export interface LatencyOptions {
  rate: number;
  seconds: number;
  keys: number;
  partitions: number;
  /** Unique per benchmark run: names topics and groups. */
  run: string;
}

export interface Topics {
  input: string;
  output: string;
  store: string;
}

const WARMUP = 200;
const TICK_MS = 10;
const quiet = { logLevel: KafkaJS.logLevel.NOTHING };

export interface Started {
  stop(): Promise<void>;
  /** CPU seconds of a contender in another process (counted with this process's, the load generator's). */
  cpuSeconds?: () => number;
}

export interface LatencyResult {
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

/** A read_committed consumer of `topic` from its beginning, calling `onRecord` for every record. */
async function watch(
  kafka: KafkaJS.Kafka,
  run: string,
  topic: string,
  onRecord: (timestampMs: number, now: number) => void,
) {
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

/**
 * Measures one contender. `topics` collects the topics created (the caller deletes them); the Redis
 * client (optional) gives the Redis server's CPU.
 */
export async function measureLatency(
  ctx: { kafka: KafkaJS.Kafka; redis?: Redis; opts: LatencyOptions; topics: string[] },
  label: string,
  tag: string,
  start: (t: Topics) => Promise<Started>,
): Promise<LatencyResult> {
  const { kafka, redis, opts, topics } = ctx;
  const run = opts.run;
  const order = orderMaker(opts.keys);
  const t = {
    input: `bench-lat-${run}-${tag}-in`,
    output: `bench-lat-${run}-${tag}-out`,
    store: `bench-lat-${run}-${tag}`,
  };
  topics.push(t.input, t.output, `${t.input}.DLT`);
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
  const watcher = await watch(kafka, run, t.output, (ts, now) => {
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
      child: contender.cpuSeconds?.() ?? 0,
      redis: await redisCpuSeconds(redis),
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
        process: perM(
          (cpuProcess.user + cpuProcess.system) / 1e6 + ((contender.cpuSeconds?.() ?? 0) - cpu0.child),
        ),
        redis: perM((await redisCpuSeconds(redis)) - cpu0.redis),
        broker: perM(cpuSeconds(devPid('kafka')) - cpu0.broker),
      },
    };
  } finally {
    await watcher.disconnect().catch(() => undefined);
    await contender.stop();
    await producer.disconnect().catch(() => undefined);
  }
}

/** The markdown table of the results. */
export function latencyTable(results: LatencyResult[]): string {
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
