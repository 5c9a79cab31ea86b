/**
 * Peak RSS of a redfence instance against the number of keys of state: the same backlog (N orders on
 * a preloaded 6-partition topic) over K customers, for each K in BENCH_MEMORY_KEYS, processed by one
 * `redfence run` instance (exactly-once, the customer-totals reducer; the built CLI as users run it,
 * see bench/processor/cli.ts) from start to all N committed; its VmHWM then. State lives in Redis, so
 * the key count should not show in the instance's memory; the backlog bounds what is prefetched.
 *
 *   npm run build && node --import tsx bench/memory/run.ts
 *
 * Env: BENCH_RECORDS (1000000), BENCH_MEMORY_KEYS ("1000,100000,1000000"), BENCH_PARTITIONS (6),
 * KAFKA_BROKERS (127.0.0.1:19092), REDIS_URL (redis://127.0.0.1:16379). Results: a table on stdout
 * and bench/results/memory.raw.json. Topics and Redis keys are deleted at the end of each run.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { Redis } from 'ioredis';
import { Child } from '../../src/harness/index.js';
import { customerTotalsCli, peakRss, ROOT } from '../processor/cli.js';
import {
  committedSum,
  createTopics,
  deleteTopics,
  envInt,
  envIntList,
  kafkaClient,
  orderMaker,
  preload,
} from '../processor/kafka.js';
import { dropStore } from '../processor/support.js';

const records = envInt('BENCH_RECORDS', 1_000_000);
const partitions = envInt('BENCH_PARTITIONS', 6);
const keyCounts = envIntList('BENCH_MEMORY_KEYS', '1000,100000,1000000');
const brokers = (process.env.KAFKA_BROKERS ?? '127.0.0.1:19092').split(',');
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:16379';
const kafka = kafkaClient(brokers);
const redis = new Redis(redisUrl);
const { cli, module, cleanup } = customerTotalsCli();
let child: Child | undefined;

async function one(keys: number) {
  const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
  const t = { input: `bench-mem-${run}-in`, output: `bench-mem-${run}-out`, store: `bench-mem-${run}` };
  const group = `bench-mem-${run}-group`;
  await createTopics(kafka, [t.input, t.output, `${t.input}.DLT`], partitions);
  try {
    await preload(kafka, t.input, records, orderMaker(keys));
    const t0 = Date.now();
    const c = new Child({
      name: 'instance',
      command: process.execPath,
      args: [...cli, 'run', module, '--brokers', brokers.join(','), '--redis', redisUrl, '--group', group],
      cwd: ROOT,
      env: { ...process.env, ORDERS_TOPIC: t.input, TOTALS_TOPIC: t.output, TOTALS_STORE: t.store },
      keepLines: 50,
    });
    child = c;
    let peak = 0;
    for (;;) {
      if (!c.alive) throw new Error(`the instance exited (${c.exit?.code}): ${c.tail()}`);
      peak = Math.max(peak, peakRss(c.pid));
      if ((await committedSum(kafka, group, t.input)) >= records) break;
      if (Date.now() - t0 > 1_200_000) throw new Error(`not done after 1200 s: ${c.tail()}`);
      await new Promise((r) => setTimeout(r, 1000));
    }
    const seconds = (Date.now() - t0) / 1000;
    peak = Math.max(peak, peakRss(c.pid));
    await c.terminate(30_000);
    const result = { keys, records, peakRssMiB: Math.round(peak / 2 ** 20), seconds: Math.round(seconds) };
    console.error(`[memory] ${JSON.stringify(result)}`);
    return result;
  } finally {
    child?.signal('SIGKILL');
    await deleteTopics(kafka, [t.input, t.output, `${t.input}.DLT`]);
    await dropStore(redis, t.store);
  }
}

try {
  const results = [];
  for (const k of keyCounts) results.push(await one(k));
  console.log('| records | keys of state | peak RSS (MiB) | seconds |');
  console.log('| ---: | ---: | ---: | ---: |');
  for (const r of results) console.log(`| ${r.records} | ${r.keys} | ${r.peakRssMiB} | ${r.seconds} |`);
  mkdirSync('bench/results', { recursive: true });
  writeFileSync(
    'bench/results/memory.raw.json',
    `${JSON.stringify({ date: new Date().toISOString(), loadavg: loadavg(), results }, null, 2)}\n`,
  );
} finally {
  child?.signal('SIGKILL');
  cleanup();
  redis.disconnect();
}
