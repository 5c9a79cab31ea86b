/**
 * The topology executor alone (no Kafka): partition batches of bench/topology's orders run through
 * `TopologyExecutor.runBatch` against Redis, one partition after another, as the topology processor's
 * Redis step runs them. Prints µs of CPU per record of this process and of Redis (`INFO cpu`), and the
 * script calls per record, per topology; beside it the same for the processor's apply (bench/store's
 * row in the processor's shape is the reference for the fence alone).
 *
 *   REDIS_URL=redis://127.0.0.1:16579 node --import tsx bench/topology/executor.ts
 *
 * Env: BENCH_RECORDS (200000), BENCH_KEYS (10000), BENCH_BATCH (500), BENCH_SPAN_MS (900000),
 * BENCH_TOPOLOGY (fraud,windowed-count,count; also total, an unwindowed reduce, and total-owned, the same with
 * owner-local state for every key), REDIS_URL (redis://127.0.0.1:16379), BENCH_FROM (src). Use a
 * Redis no one else uses: its CPU is read as a whole. BENCH_CLUSTER=<port,port,...>: a Redis Cluster
 * of the test's own on 127.0.0.1 instead (its masters' CPU and script calls summed; the keys of a run
 * are left there: use a cluster you can flush).
 *
 * BENCH_HEAP_PROFILE=<prefix>: V8's sampling heap profiler over each topology's batches, counting the
 * objects scavenges collected too (what a record allocates, not what stays), written to
 * <prefix>-<topology>.heapprofile; the sampled total is printed to stderr.
 *
 * BENCH_FROM=dist runs the build (`npm run build` first) instead of the sources through tsx: tsx's
 * esbuild transform keeps function names by a `__name` call on every closure it creates, at run time,
 * which the build does not do; on a closure-heavy path that shows in the Node µs per record.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { Cluster, Redis } from 'ioredis';
import type * as Api from '../../src/index.js';
import type { ModelInput } from '../../src/topology/model.js';
import type * as Exec from '../../src/topology/run/executor.js';
import { envInt, orderMaker } from '../processor/kafka.js';
import { dropStore, redisCpuSeconds } from '../processor/support.js';

const from = process.env.BENCH_FROM === 'dist' ? '../../dist' : '../../src';
const { serdes, TimeWindows, topology }: typeof Api = await import(`${from}/index.js`);
const { TopologyExecutor }: typeof Exec = await import(`${from}/topology/run/executor.js`);

const opts = {
  records: envInt('BENCH_RECORDS', 200_000),
  keys: envInt('BENCH_KEYS', 10_000),
  batch: envInt('BENCH_BATCH', 500),
  spanMs: envInt('BENCH_SPAN_MS', 900_000),
  topologies: (process.env.BENCH_TOPOLOGY ?? 'fraud,windowed-count,count').split(','),
  redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:16379',
};
const clusterPorts = (process.env.BENCH_CLUSTER ?? '').split(',').filter((p) => p !== '');
const redis: Redis | Cluster =
  clusterPorts.length > 0
    ? new Cluster(clusterPorts.map((port) => ({ host: '127.0.0.1', port: Number(port) })))
    : new Redis(opts.redisUrl);
if (redis instanceof Cluster) await new Promise((ready) => redis.once('ready', ready));
/** Each server to read CPU and calls from: the masters of a Cluster, else the one Redis. */
const servers = (): Redis[] => (redis instanceof Cluster ? redis.nodes('master') : [redis]);
const orders = orderMaker(opts.keys);
const t0 = Math.floor((Date.now() - opts.spanMs - 3_600_000) / 3_600_000) * 3_600_000;
const records: ModelInput[] = [];
for (let i = 0; i < opts.records; i++) {
  const o = orders(i);
  records.push({
    topic: 'orders',
    partition: 0,
    offset: i,
    key: Buffer.from(o.key),
    value: Buffer.from(o.value),
    timestamp: t0 + Math.floor((i * opts.spanMs) / opts.records),
  });
}

function built(shape: string, app: string) {
  const t = topology({ applicationId: app });
  let s = t.stream<string, { amount: number }>('orders', { key: serdes.string() });
  if (shape === 'fraud') s = s.filter((_c, o) => o.amount > 50);
  const g = s.groupByKey();
  if (shape === 'total' || shape === 'total-owned') {
    g.reduce((a, b) => ({ amount: a.amount + b.amount }), { name: 'totals' })
      .toStream()
      .to('out', { key: serdes.string() });
    return t.build();
  }
  if (shape === 'count') {
    g.count({ name: 'counts' }).toStream().to('out', { key: serdes.string() });
    return t.build();
  }
  let counts = g
    .windowedBy(TimeWindows.ofSizeAndGrace(shape === 'fraud' ? 300_000 : 60_000, 60_000))
    .count({ name: 'counts' })
    .toStream();
  if (shape === 'fraud') counts = counts.filter((_w, n) => n > 10);
  counts
    .map((w, n) => [w.key, { start: w.start, end: w.end, count: n }] as const)
    .to('out', { key: serdes.string() });
  return t.build();
}

async function scriptCalls(): Promise<number> {
  let n = 0;
  for (const server of servers()) {
    const info = await server.info('commandstats');
    for (const m of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) n += Number(m[1]);
  }
  return n;
}

async function serversCpu(): Promise<number> {
  let s = 0;
  for (const server of servers()) s += await redisCpuSeconds(server);
  return s;
}

/** Samples allocations (collected ones too) until the returned stop is called (BENCH_HEAP_PROFILE). */
async function heapSampling(shape: string): Promise<() => Promise<void>> {
  const prefix = process.env.BENCH_HEAP_PROFILE;
  if (prefix === undefined || prefix === '') return async () => undefined;
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.enable');
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: 4096,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  } as object);
  return async () => {
    const { profile } = await session.post('HeapProfiler.stopSampling');
    writeFileSync(`${prefix}-${shape}.heapprofile`, JSON.stringify(profile));
    let bytes = 0;
    const stack = [profile.head];
    for (let n = stack.pop(); n !== undefined; n = stack.pop()) {
      bytes += n.selfSize;
      stack.push(...n.children);
    }
    console.error(`${shape}: ${(bytes / 1e6).toFixed(1)} MB allocated (sampled)`);
    session.disconnect();
  };
}

async function one(shape: string): Promise<string> {
  const app = `bench-exec-${Date.now().toString(36)}-${shape}`;
  const exec = new TopologyExecutor(built(shape, app), {
    redis,
    ...(shape.endsWith('-owned') ? { ownerCache: { maxBytes: 16 * 1024 * 1024 } } : {}),
  });
  let outputs = 0;
  const stopSampling = await heapSampling(shape);
  const cpu0 = process.cpuUsage();
  const r0 = await serversCpu();
  const c0 = await scriptCalls();
  const w0 = performance.now();
  for (let i = 0; i < records.length; i += opts.batch) {
    const slice = records.slice(i, i + opts.batch);
    const res = await exec.runBatch({
      topic: 'orders',
      partition: 0,
      epoch: 1,
      committedOffset: i,
      records: slice,
    });
    outputs += res.outputs.length;
  }
  const wall = (performance.now() - w0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  await stopSampling();
  const rcpu = (await serversCpu()) - r0;
  const calls = (await scriptCalls()) - c0;
  if (!(redis instanceof Cluster)) await dropStore(redis, app);
  const n = records.length;
  const us = (s: number) => ((s / n) * 1e6).toFixed(1);
  return `| ${shape} | ${n} | ${outputs} | ${us((cpu.user + cpu.system) / 1e6)} | ${us(rcpu)} | ${(calls / n).toFixed(4)} | ${Math.round(n / wall)} |`;
}

console.log(
  '| topology | records | outputs | Node µs / record | Redis µs / record | script calls / record | records/s (one partition, serial) |',
);
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
for (const shape of opts.topologies) console.log(await one(shape));
redis.disconnect();
