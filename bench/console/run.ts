/**
 * Console benchmark: are the pages responsive with 1,000 partitions and 100,000 dead letters, with
 * paged reads and no full scan per refresh? Builds the world (bench/console/world.ts: a lagging group
 * on a 1,000-partition topic, 100k dead letters, registered instances, a key with fence state), starts
 * the console in this process, and loads each main page `loads` times after a first (cold) load:
 * milliseconds (first, p50, p95, max), bytes, and per load the Redis commands the console sent and the
 * Kafka calls of its dead-letter reader (partition count, watermarks, reads) and its batched watermarks
 * (one call per topic); plus one lag sampling pass
 * (the background work every --lag-interval, which no page waits for). Results:
 * bench/results/console-<date>.raw.json and a table on stdout. Not a test: nothing here passes or fails.
 *
 *   node --import tsx bench/console/run.ts                      # 1,000 partitions, 100k dead letters
 *   node --import tsx bench/console/run.ts --small              # 50 partitions, 2,000 dead letters
 *   node --import tsx bench/console/run.ts --partitions 200 --dead-letters 20000 --dlt-partitions 1
 *
 * Flags (or BENCH_*): --partitions (1000), --per-partition (20 input records), --dead-letters (100000),
 * --dlt-partitions (as --partitions: a processor's DLT has its input's partitions), --instances (10),
 * --loads (30), --small. KAFKA_BROKERS (127.0.0.1:19092), REDIS_URL (redis://127.0.0.1:16379).
 */
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { startConsole } from '../../src/console/server.js';
import { KafkaAdmin } from '../../src/kafka/admin.js';
import { LogReader } from '../../src/kafka/log-reader.js';
import { writeResults } from '../processor/support.js';
import { buildWorld, type World } from './world.js';

const { values: flags } = parseArgs({
  options: {
    small: { type: 'boolean', default: false },
    partitions: { type: 'string' },
    'per-partition': { type: 'string' },
    'dead-letters': { type: 'string' },
    'dlt-partitions': { type: 'string' },
    instances: { type: 'string' },
    loads: { type: 'string' },
  },
});

function int(flag: keyof typeof flags, env: string, fallback: number): number {
  const raw = (flags[flag] as string | undefined) ?? process.env[env];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`--${flag} must be a positive integer, got ${raw}`);
  return n;
}

const small = flags.small === true;
const partitions = int('partitions', 'BENCH_PARTITIONS', small ? 50 : 1000);
const opts = {
  brokers: (process.env.KAFKA_BROKERS ?? '127.0.0.1:19092').split(','),
  redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:16379',
  partitions,
  perPartition: int('per-partition', 'BENCH_PER_PARTITION', 20),
  deadLetters: int('dead-letters', 'BENCH_DEAD_LETTERS', small ? 2000 : 100_000),
  dltPartitions: int('dlt-partitions', 'BENCH_DLT_PARTITIONS', partitions),
  instances: int('instances', 'BENCH_INSTANCES', 10),
  loads: int('loads', 'BENCH_LOADS', small ? 10 : 30),
};

/** Calls counted while a page loads: the console's Redis commands and its dead-letter reader's Kafka calls. */
const calls = {
  redis: 0,
  partitionCount: 0,
  watermarks: 0,
  read: 0,
  readRecords: 0,
  topicWatermarks: 0,
};

/**
 * Counts the Kafka calls made while a page is read: the log reader's (per partition) and the admin
 * client's batched watermarks (one per topic: a metadata and two ListOffsets requests).
 */
function countKafkaCalls(): void {
  const proto = LogReader.prototype as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
  for (const name of ['partitionCount', 'watermarks', 'read'] as const) {
    const original = proto[name] as (...a: unknown[]) => Promise<unknown>;
    proto[name] = function (this: unknown, ...a: unknown[]) {
      calls[name]++;
      if (name === 'read' && typeof a[3] === 'number' && typeof a[2] === 'number')
        calls.readRecords += a[3] - a[2];
      return original.apply(this, a);
    };
  }
  const admin = KafkaAdmin.prototype as unknown as { watermarks: (...a: unknown[]) => Promise<unknown> };
  const batched = admin.watermarks;
  admin.watermarks = function (this: unknown, ...a: unknown[]) {
    calls.topicWatermarks++;
    return batched.apply(this, a);
  };
}

/** Counts every command the console's Redis client sends. */
function countRedis(redis: Redis): void {
  const send = redis.sendCommand.bind(redis);
  redis.sendCommand = ((...a: Parameters<Redis['sendCommand']>) => {
    calls.redis++;
    return send(...a);
  }) as Redis['sendCommand'];
}

interface PageResult {
  page: string;
  path: string;
  status: number;
  bytes: number;
  firstMs: number;
  firstCalls: Record<string, number>;
  p50Ms: number;
  p95Ms: number;
  maxMs: number;
  /** Means over the repeated loads. */
  perLoad: Record<string, number>;
}

const quantile = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? Number.NaN;
const round = (n: number) => Number(n.toFixed(1));

async function load(
  url: string,
): Promise<{ ms: number; status: number; bytes: number; calls: typeof calls }> {
  const before = { ...calls };
  const t0 = performance.now();
  const res = await fetch(url);
  const body = await res.text();
  const ms = performance.now() - t0;
  const delta = { ...calls };
  for (const k of Object.keys(delta) as Array<keyof typeof calls>) delta[k] -= before[k];
  return { ms, status: res.status, bytes: Buffer.byteLength(body), calls: delta };
}

async function page(base: string, name: string, path: string): Promise<PageResult> {
  const first = await load(base + path);
  const times: number[] = [];
  const sums: Record<string, number> = {};
  for (let i = 0; i < opts.loads; i++) {
    const r = await load(base + path);
    times.push(r.ms);
    for (const [k, v] of Object.entries(r.calls)) sums[k] = (sums[k] ?? 0) + v;
  }
  times.sort((a, b) => a - b);
  const result = {
    page: name,
    path,
    status: first.status,
    bytes: first.bytes,
    firstMs: round(first.ms),
    firstCalls: first.calls,
    p50Ms: round(quantile(times, 0.5)),
    p95Ms: round(quantile(times, 0.95)),
    maxMs: round(times.at(-1) ?? Number.NaN),
    perLoad: Object.fromEntries(Object.entries(sums).map(([k, v]) => [k, round(v / opts.loads)])),
  };
  console.log(
    `${name.padEnd(28)} ${String(result.status).padEnd(4)} ${String(result.bytes).padStart(9)} B  first ${String(result.firstMs).padStart(8)} ms  p50 ${String(result.p50Ms).padStart(7)}  p95 ${String(result.p95Ms).padStart(7)}  per load: redis ${result.perLoad.redis}, watermarks ${result.perLoad.watermarks}, reads ${result.perLoad.read} (${result.perLoad.readRecords} records); first load: watermarks ${first.calls.watermarks} (per partition) + ${first.calls.topicWatermarks} (per topic), redis ${first.calls.redis}`,
  );
  return result;
}

async function main(): Promise<void> {
  const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e4).toString(36)}`;
  const admin = new Redis(opts.redisUrl, { maxRetriesPerRequest: 2 });
  const redis = new Redis(opts.redisUrl, { maxRetriesPerRequest: 2 });
  countRedis(redis);
  countKafkaCalls();
  console.log(`console benchmark ${JSON.stringify(opts)}`);
  let world: World | undefined;
  let closeConsole: (() => Promise<void>) | undefined;
  try {
    const t0 = performance.now();
    world = await buildWorld(opts, admin, run);
    console.log(
      `world built in ${((performance.now() - t0) / 1000).toFixed(1)} s ${JSON.stringify(world.setup)}`,
    );
    const c = await startConsole({
      redis,
      kafka: { brokers: opts.brokers, clientId: 'bench-console' },
      groups: [world.group],
      dlqTopics: [world.dlt],
      port: 0,
      lagIntervalMs: 3_600_000, // one pass at start, then only the timed one below
      timeoutMs: 60_000,
    });
    closeConsole = () => c.close();
    await c.lag.sampled();
    const l0 = performance.now();
    await c.lag.refresh();
    const lagPassMs = round(performance.now() - l0);
    const sampledPartitions = c.lag.groups().reduce((n, g) => n + g.partitions.length, 0);
    console.log(`lag sampling pass (background): ${lagPassMs} ms for ${sampledPartitions} partitions`);
    const base = c.url.replace(/\/$/, '');
    const dlt = encodeURIComponent(world.dlt);
    const perDltPartition = Math.floor(opts.deadLetters / opts.dltPartitions);
    const pages: Array<[string, string]> = [
      ['instances', '/instances'],
      ['lag', '/lag'],
      ['lag (only not OK)', '/lag?bad=1'],
      ['processing', '/processing'],
      ['inspector', `/inspector?store=${world.store}&key=${world.stateKey}`],
      ['dead letters: first page', `/dead-letters?topic=${dlt}&partition=0`],
      [
        'dead letters: middle page',
        `/dead-letters?topic=${dlt}&partition=0&from=${Math.floor(perDltPartition / 2)}`,
      ],
      ['dead letters: last partition', `/dead-letters?topic=${dlt}&partition=${opts.dltPartitions - 1}`],
      ['dead letters: filter, no match', `/dead-letters?topic=${dlt}&partition=0&reason=oversized`],
    ];
    const results: PageResult[] = [];
    for (const [name, path] of pages) results.push(await page(base, name, path));
    const file = writeResults('console', opts, {
      setupSeconds: world.setup,
      lagPass: { ms: lagPassMs, partitions: sampledPartitions },
      pages: results,
    });
    console.log(`results: ${file}`);
  } finally {
    await closeConsole?.();
    await world?.drop();
    redis.disconnect();
    admin.disconnect();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
