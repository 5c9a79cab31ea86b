/**
 * Handler benchmark: records whose work is one HTTP call of BENCH_LATENCY_MS (20) to a local server
 * (its own process). Contenders, each with a fresh group on one preloaded topic:
 *   - `handler c=<n>`: createHandler at concurrency n (BENCH_CONCURRENCY, 64); the ceiling is
 *     n / latency records/s (3,200 at 64 and 20 ms), the target >= 0.8 of it;
 *   - `handler c=<n> + ctx.once`: the same, each call inside ctx.once (Redis check + fenced mark);
 *   - `sequential loop`: seed 003's "WRONG: blocking the poll loop": each batch's records called one
 *     after another on the consume loop, then committed (its ceiling: 1 / latency).
 *
 *   node --import tsx bench/handler/run.ts
 *
 * Env: BENCH_RECORDS (20000), BENCH_SEQ_RECORDS (300), BENCH_KEYS (10000), BENCH_PARTITIONS (8),
 * BENCH_LATENCY_MS (20), BENCH_CONCURRENCY (64), BENCH_ONLY (labels containing one of its parts),
 * KAFKA_BROKERS, REDIS_URL. Results: bench/results/handler-<date>.raw.json.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { Agent, request } from 'node:http';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { createHandler, defineHandler } from '../../src/index.js';
import { ConfluentKafka } from '../../src/kafka/confluent.js';
import {
  committedSum,
  createTopics,
  deleteTopics,
  envInt,
  kafkaClient,
  preload,
} from '../processor/kafka.js';
import { dropStore, selected, writeResults } from '../processor/support.js';

const opts = {
  records: envInt('BENCH_RECORDS', 20_000),
  seqRecords: envInt('BENCH_SEQ_RECORDS', 300),
  keys: envInt('BENCH_KEYS', 10_000),
  partitions: envInt('BENCH_PARTITIONS', 8),
  latencyMs: envInt('BENCH_LATENCY_MS', 20),
  concurrency: envInt('BENCH_CONCURRENCY', 64),
  brokers: (process.env.KAFKA_BROKERS ?? '127.0.0.1:19092').split(','),
  redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:16379',
};
const TIMEOUT_MS = envInt('BENCH_TIMEOUT_MS', 180_000);
const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
const input = `bench-handler-${run}-in`;
const topics = [input, `${input}.DLT`];
const kafka = kafkaClient(opts.brokers);

interface Result {
  label: string;
  records: number;
  seconds: number;
  recordsPerSecond: number;
  ceiling: number;
  ofCeiling: number;
  meanCallMs: number;
  /** records/s against concurrency / the mean call time measured in this run (the calls' own slowdown left out). */
  ofMeasuredCeiling: number;
}

const server = fork(fileURLToPath(new URL('./server.ts', import.meta.url)), [], {
  execArgv: ['--import', 'tsx'],
  env: { ...process.env, BENCH_LATENCY_MS: String(opts.latencyMs) },
  stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
});
const [portLine] = (await once(server.stdout as NodeJS.ReadableStream, 'data')) as [Buffer];
const serverPort = Number(portLine.toString().trim());
// node:http with keep-alive (lighter per call than fetch on this 2-core machine), one socket per call in flight
const agent = new Agent({ keepAlive: true, maxSockets: 1024 });

let callMs = 0;
let calls = 0;
function call(body: Buffer | null, signal?: AbortSignal): Promise<void> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: serverPort,
        method: 'POST',
        path: '/call',
        agent,
        ...(signal ? { signal } : {}),
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode !== 204) return reject(new Error(`HTTP ${res.statusCode}`));
          callMs += performance.now() - t0;
          calls++;
          resolve();
        });
      },
    );
    req.on('error', reject);
    req.end(body ?? undefined);
  });
}

function measured(label: string, records: number, seconds: number, ceiling: number): Result {
  const r = {
    label,
    records,
    seconds: Number(seconds.toFixed(3)),
    recordsPerSecond: Math.round(records / seconds),
    ceiling: Math.round(ceiling),
    ofCeiling: Number((records / seconds / ceiling).toFixed(3)),
    meanCallMs: Number((callMs / Math.max(1, calls)).toFixed(2)),
    ofMeasuredCeiling: 0,
  };
  const inFlight = label === 'sequential loop' ? 1 : opts.concurrency;
  r.ofMeasuredCeiling = Number((r.recordsPerSecond / (inFlight / (r.meanCallMs / 1000))).toFixed(3));
  console.log(JSON.stringify(r));
  callMs = 0;
  calls = 0;
  return r;
}

async function handlerRun(label: string, withOnce: boolean): Promise<Result> {
  const groupId = `bench-handler-${run}-${withOnce ? 'once' : 'plain'}`;
  const name = `bench-h-${run}`;
  const redis = withOnce ? new Redis(opts.redisUrl) : undefined;
  let first = 0;
  const h = createHandler(
    defineHandler({
      input,
      name,
      decode: (v) => v,
      handle: async (r, ctx) => {
        if (first === 0) first = performance.now();
        if (withOnce) await ctx.once(() => call(r.value, ctx.signal));
        else await call(r.value, ctx.signal);
      },
    }),
    {
      kafka: { brokers: opts.brokers },
      groupId,
      concurrency: opts.concurrency,
      ...(redis ? { redis } : {}),
    },
  );
  await h.start();
  const deadline = Date.now() + TIMEOUT_MS;
  while (h.counts().done < opts.records) {
    if (Date.now() > deadline)
      throw new Error(
        `${label}: timed out: ${JSON.stringify(h.counts())}, in flight ${JSON.stringify(h.inFlight)}, assignment ${h.assignment.length}`,
      );
    await new Promise((r) => setTimeout(r, 5));
  }
  const seconds = (performance.now() - first) / 1000;
  await h.close();
  const committed = await committedSum(kafka, groupId, input);
  if (committed !== opts.records) throw new Error(`${label}: committed ${committed}, not ${opts.records}`);
  if (redis) {
    await dropStore(redis, name);
    redis.disconnect();
  }
  return measured(label, opts.records, seconds, opts.concurrency / (opts.latencyMs / 1000));
}

/** Seed 003's sequential loop: every record of a batch called in turn on the consume loop, then commit. */
async function sequentialRun(label: string): Promise<Result> {
  const groupId = `bench-handler-${run}-seq`;
  const port = new ConfluentKafka({ brokers: opts.brokers, groupId, maxBatchSize: 100 });
  let done = 0;
  let first = 0;
  await port.start([input], {
    onAssign: async () => undefined,
    onRevoke: async () => undefined,
    onBatch: async (topic, partition, records) => {
      if (done >= opts.seqRecords) return; // enough measured: the rest is left unhandled
      if (first === 0) first = performance.now();
      for (const r of records) await call(r.value);
      done += records.length;
      await port.commit([{ topic, partition, offset: Number(records.at(-1)?.offset) + 1 }]);
    },
  });
  const deadline = Date.now() + TIMEOUT_MS;
  while (done < opts.seqRecords) {
    if (Date.now() > deadline) throw new Error(`${label}: timed out at ${done}`);
    await new Promise((r) => setTimeout(r, 5));
  }
  const seconds = (performance.now() - first) / 1000;
  await port.stop();
  return measured(label, done, seconds, 1 / (opts.latencyMs / 1000));
}

const results: Result[] = [];
try {
  await createTopics(kafka, topics, opts.partitions);
  const value = 'x'.repeat(100);
  await preload(kafka, input, opts.records, (i) => ({ key: `k${(i * 2654435761) % opts.keys}`, value }));
  const c = opts.concurrency;
  if (selected(`handler c=${c}`)) results.push(await handlerRun(`handler c=${c}`, false));
  if (selected(`handler c=${c} + ctx.once`))
    results.push(await handlerRun(`handler c=${c} + ctx.once`, true));
  if (selected('sequential loop')) results.push(await sequentialRun('sequential loop'));
  const plain = results.find((r) => r.label === `handler c=${c}`);
  const seq = results.find((r) => r.label === 'sequential loop');
  const summary = {
    handlerOfCeiling: plain?.ofCeiling,
    target: 0.8,
    handlerOverSequential:
      plain && seq ? Number((plain.recordsPerSecond / seq.recordsPerSecond).toFixed(1)) : undefined,
  };
  console.log(JSON.stringify(summary));
  console.log(writeResults('handler', opts, { results, summary }));
} finally {
  server.disconnect();
  agent.destroy();
  await deleteTopics(kafka, topics);
}
