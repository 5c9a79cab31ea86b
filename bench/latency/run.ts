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
 * (20), BENCH_KEYS (10000), BENCH_PARTITIONS (6), BENCH_BATCH (500), BENCH_ONLY (comma-separated parts of labels), KAFKA_BROKERS
 * (127.0.0.1:19092), REDIS_URL (redis://127.0.0.1:16379). Results: a table on stdout and
 * bench/results/latency-<date>.raw.json.
 */
import { Redis } from 'ioredis';
import { defineProcessor, type ProcessingMode, Processor } from '../../src/index.js';
import { deleteTopics, envInt, kafkaClient, startNaive, startPassthrough } from '../processor/kafka.js';
import { dropStore, selected, writeResults } from '../processor/support.js';
import { type LatencyResult, latencyTable, measureLatency, type Started, type Topics } from './measure.js';

const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
const opts = {
  rate: envInt('BENCH_RATE', 2000),
  seconds: envInt('BENCH_SECONDS', 20),
  keys: envInt('BENCH_KEYS', 10_000),
  partitions: envInt('BENCH_PARTITIONS', 6),
  maxBatchSize: envInt('BENCH_BATCH', 500),
  brokers: (process.env.KAFKA_BROKERS ?? '127.0.0.1:19092').split(','),
  redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:16379',
  run,
};
const kafka = kafkaClient(opts.brokers);
const redis = new Redis(opts.redisUrl, { lazyConnect: true });
const topics: string[] = [];
const stores: string[] = [];

/** `commitIntervalMs` undefined: the processor's default (100 ms exactly-once, 0 at-least-once). */
function redfence(mode: ProcessingMode, commitIntervalMs?: number) {
  return async (t: Topics): Promise<Started> => {
    stores.push(t.store);
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
      groupId: `bench-lat-${run}-${mode}-${commitIntervalMs ?? 'd'}`,
      ...(commitIntervalMs === undefined ? {} : { commitIntervalMs }),
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
    (t) => {
      stores.push(t.store);
      return startNaive(kafka, redis, {
        ...t,
        groupId: `bench-lat-${run}-naive`,
        maxBatchSize: opts.maxBatchSize,
      });
    },
  ],
  ['redfence at-least-once', 'alo', redfence('at-least-once')],
  ['redfence exactly-once (default: commit interval 100 ms)', 'eos', redfence('exactly-once')],
  ['redfence exactly-once, commit interval 0 ms', 'eos0', redfence('exactly-once', 0)],
];

try {
  await redis.connect();
  console.error(
    `[latency] ${opts.rate} records/s for ${opts.seconds} s, ${opts.keys} keys, ${opts.partitions} partitions`,
  );
  const results: LatencyResult[] = [];
  for (const [label, tag, start] of contenders) {
    if (!selected(label)) continue;
    const r = await measureLatency({ kafka, redis, opts, topics }, label, tag, start);
    console.error(`[latency] ${JSON.stringify(r)}`);
    results.push(r);
  }
  console.log(latencyTable(results));
  const file = writeResults('latency', opts, results);
  console.error(`[latency] wrote ${file}`);
} finally {
  await deleteTopics(kafka, topics);
  for (const store of stores) await dropStore(redis, store);
  redis.disconnect();
}
