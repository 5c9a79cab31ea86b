/**
 * What tracing costs: one preloaded input topic (every record with a `traceparent`, as from a traced
 * producer), then redfence at-least-once over it three times, each with a fresh group, output topic
 * and store: tracing off, on (the SDK's BasicTracerProvider, a batch span processor, an exporter that
 * only counts), off again (the two off runs bracket the machine's noise). Ratios against the first off
 * run.
 *
 *   node --import tsx bench/tracing/run.ts
 *
 * Env: BENCH_RECORDS (200000), BENCH_KEYS (10000), BENCH_PARTITIONS (6), BENCH_BATCH (500),
 * KAFKA_BROKERS (127.0.0.1:19092), REDIS_URL (redis://127.0.0.1:16379).
 */
import { randomBytes } from 'node:crypto';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { Redis } from 'ioredis';
import { defineProcessor, Processor } from '../../src/index.js';
import { createTopics, deleteTopics, envInt, kafkaClient, orderMaker, preload } from '../processor/kafka.js';
import { dropStore, untilDone, writeResults } from '../processor/support.js';

const opts = {
  records: envInt('BENCH_RECORDS', 200_000),
  keys: envInt('BENCH_KEYS', 10_000),
  partitions: envInt('BENCH_PARTITIONS', 6),
  maxBatchSize: envInt('BENCH_BATCH', 500),
  brokers: (process.env.KAFKA_BROKERS ?? '127.0.0.1:19092').split(','),
  redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:16379',
};
const run = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
const input = `bench-trace-${run}-in`;
const topics = [input, `${input}.DLT`];
const kafka = kafkaClient(opts.brokers);
const redis = new Redis(opts.redisUrl, { lazyConnect: true });

let exported = 0;
const counting: SpanExporter = {
  export(spans: ReadableSpan[], done) {
    exported += spans.length;
    done({ code: 0 }); // ExportResultCode.SUCCESS
  },
  shutdown: async () => undefined,
};

interface Result {
  label: string;
  recordsPerSec: number;
  cpuSecPer1k: number;
  spans: number;
}

async function once(label: string, tracing: boolean): Promise<Result> {
  const tag = `${label.replace(/\W+/g, '-')}`;
  const output = `bench-trace-${run}-out-${tag}`;
  const store = `bench-trace-${run}-${tag}`;
  topics.push(output);
  await createTopics(kafka, [output], opts.partitions);
  const provider = new BasicTracerProvider({
    spanProcessors: [new BatchSpanProcessor(counting, { maxQueueSize: 65_536, maxExportBatchSize: 4096 })],
  });
  exported = 0;
  const p = new Processor<{ amount: number }>({
    definition: defineProcessor<{ amount: number }>({
      input,
      output,
      store,
      operation: (o) => ({ op: 'add', by: o.amount }),
    }),
    redis,
    mode: 'at-least-once',
    groupId: `bench-trace-${run}-${tag}`,
    kafka: { brokers: opts.brokers, maxBatchSize: opts.maxBatchSize },
    ...(tracing ? { tracing: { tracer: provider.getTracer('bench') } } : {}),
  });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await p.start();
  const { t1 } = await untilDone(
    label,
    { progress: () => p.counts().records, stop: () => p.close() },
    opts.records,
    t0,
    300_000,
  );
  const cpu = process.cpuUsage(cpu0);
  await p.close();
  await provider.forceFlush();
  await provider.shutdown();
  await dropStore(redis, store);
  const seconds = (t1 - t0) / 1000;
  return {
    label,
    recordsPerSec: opts.records / seconds,
    cpuSecPer1k: ((cpu.user + cpu.system) / 1e6 / opts.records) * 1000,
    spans: exported,
  };
}

async function main(): Promise<void> {
  await redis.connect();
  await createTopics(kafka, [input, `${input}.DLT`], opts.partitions);
  const order = orderMaker(opts.keys);
  const trace = randomBytes(16).toString('hex');
  await preload(kafka, input, opts.records, (i) => {
    const headers = { traceparent: `00-${trace}-${i.toString(16).padStart(16, '0')}-01` };
    return { ...order(i), headers } as ReturnType<typeof order>;
  });
  const results: Result[] = [];
  for (const [label, on] of [
    ['tracing off', false],
    ['tracing on', true],
    ['tracing off (again)', false],
  ] as const) {
    const r = await once(label, on);
    console.error(`[bench] ${label}: ${Math.round(r.recordsPerSec)} records/s, ${r.spans} spans`);
    results.push(r);
  }
  const base = results[0] as Result;
  console.log('| configuration | records/s | vs off | CPU s / 1k records | vs off | spans |');
  console.log('| --- | ---: | ---: | ---: | ---: | ---: |');
  for (const r of results)
    console.log(
      `| ${r.label} | ${Math.round(r.recordsPerSec)} | ${(r.recordsPerSec / base.recordsPerSec).toFixed(2)}x | ` +
        `${r.cpuSecPer1k.toFixed(3)} | ${(r.cpuSecPer1k / base.cpuSecPer1k).toFixed(2)}x | ${r.spans} |`,
    );
  console.error(`[bench] wrote ${writeResults('tracing', opts, results)}`);
}

try {
  await main();
} finally {
  await deleteTopics(kafka, topics);
  redis.disconnect();
}
