/**
 * More cores: `redfence run --workers <n>` for each n in BENCH_WORKERS (default "1,2"), exactly-once,
 * the customer-totals reducer, on one preloaded input (BENCH_RECORDS orders over BENCH_KEYS customers,
 * BENCH_PARTITIONS partitions), each n with a fresh group, output topic and Redis store. The built CLI
 * as users run it (bench/processor/cli.ts). Per n: records/s from the command's start until every
 * record is committed (start-up and group join included) and from the first commit on ("steady"); CPU
 * seconds of the supervisor and its workers (/proc, read just before the end), of the dev broker and of
 * Redis (`INFO cpu`); how many cores redfence kept busy (its CPU seconds / wall seconds), how many the
 * whole machine did (/proc/stat) and how many of those went to other work (neither redfence, the
 * broker, Redis nor this bench: the machine is shared).
 *
 *   npm run build && RF_DEV_DIR=<dev dir of the running services> node --import tsx bench/workers/run.ts
 *
 * Results: a markdown table on stdout, bench/results/workers-<date>.raw.json. Topics and Redis keys are
 * deleted at the end.
 */
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { Redis } from 'ioredis';
import { Child } from '../../src/harness/index.js';
import { customerTotalsCli, ROOT } from '../processor/cli.js';
import {
  createTopics,
  deleteTopics,
  envInt,
  envIntList,
  kafkaClient,
  orderMaker,
  preload,
} from '../processor/kafka.js';
import { cpuSeconds, devPid } from '../processor/procstat.js';
import { dropStore, redisCpuSeconds, writeResults } from '../processor/support.js';

const records = envInt('BENCH_RECORDS', 300_000);
const keys = envInt('BENCH_KEYS', 10_000);
const partitions = envInt('BENCH_PARTITIONS', 6);
const workerCounts = envIntList('BENCH_WORKERS', '1,2');
const brokers = (process.env.KAFKA_BROKERS ?? '127.0.0.1:19092').split(',');
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:16379';
const TIMEOUT_MS = 600_000;

const kafka = kafkaClient(brokers);
const redis = new Redis(redisUrl);
const admin = kafka.admin();
const { cli, module } = customerTotalsCli();
const broker = devPid('kafka');
const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
const input = `bench-workers-${run}-in`;
const made: string[] = [input, `${input}.DLT`];
const stores: string[] = [];
let child: Child | undefined;

/** CPU seconds every core of the machine has been busy (/proc/stat: all but idle and iowait). */
function machineBusySeconds(): number {
  const f = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '')
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  const [user = 0, nice = 0, system = 0, , , irq = 0, softirq = 0, steal = 0] = f;
  return (user + nice + system + irq + softirq + steal) / 100;
}

async function committed(group: string): Promise<number> {
  const rows = await admin.fetchOffsets({ groupId: group, topics: [input] });
  return (rows[0]?.partitions ?? []).reduce((s, p) => s + Math.max(0, Number(p.offset)), 0);
}

/** Supervisor + workers CPU seconds (the workers' pids from the supervisor's 'worker forked' lines). */
function redfenceCpu(c: Child): number {
  const pids = [c.pid, ...c.log.find((l) => l.msg === 'worker forked').map((l) => l.pid as number)];
  return pids.reduce((s, pid) => s + cpuSeconds(pid), 0);
}

async function one(workers: number) {
  const label = `${workers} worker${workers === 1 ? '' : 's'}`;
  const output = `bench-workers-${run}-out${workers}`;
  const store = `bench-workers-${run}-${workers}`;
  const group = `bench-workers-${run}-g${workers}`;
  await createTopics(kafka, [output], partitions);
  made.push(output);
  stores.push(store);
  const brokerCpu0 = cpuSeconds(broker);
  const redisCpu0 = await redisCpuSeconds(redis);
  const machine0 = machineBusySeconds();
  const self0 = process.cpuUsage();
  const t0 = performance.now();
  const c = new Child({
    name: label,
    command: process.execPath,
    args: [
      ...cli,
      'run',
      module,
      '--brokers',
      brokers.join(','),
      '--redis',
      redisUrl,
      '--group',
      group,
      '--workers',
      String(workers),
      '--mode',
      'exactly-once',
    ],
    cwd: ROOT,
    env: { ...process.env, ORDERS_TOPIC: input, TOTALS_TOPIC: output, TOTALS_STORE: store },
    keepLines: 200,
  });
  child = c;
  let tFirst: number | undefined;
  let firstRecords = 0;
  let cpu = 0;
  for (;;) {
    if (!c.alive) throw new Error(`${label}: exited (${c.exit?.code}) ${c.tail()}`);
    const done = await committed(group);
    const now = performance.now();
    if (done > 0 && tFirst === undefined) [tFirst, firstRecords] = [now, done];
    cpu = Math.max(cpu, redfenceCpu(c));
    if (done >= records) break;
    if (now - t0 > TIMEOUT_MS) throw new Error(`${label}: ${done} of ${records} after ${TIMEOUT_MS} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const t1 = performance.now();
  cpu = Math.max(cpu, redfenceCpu(c));
  const brokerCpu = cpuSeconds(broker) - brokerCpu0;
  const redisCpu = (await redisCpuSeconds(redis)) - redisCpu0;
  const machine = machineBusySeconds() - machine0;
  const self = process.cpuUsage(self0);
  const benchCpu = (self.user + self.system) / 1e6;
  const { exit } = await c.terminate(30_000);
  child = undefined;
  const seconds = (t1 - t0) / 1000;
  const steadySeconds = (t1 - (tFirst ?? t0)) / 1000;
  const assigned = new Set(
    c.log
      .find((l) => l.msg === 'partitions assigned' && Array.isArray(l.partitions) && l.partitions.length > 0)
      .map((l) => l.instance),
  );
  const result = {
    workers,
    records,
    seconds: round(seconds, 1),
    recordsPerSecond: Math.round(records / seconds),
    steadyRecordsPerSecond: Math.round((records - firstRecords) / steadySeconds),
    cpuSecondsPer1k: round((cpu / records) * 1000, 4),
    coresBusy: round(cpu / seconds, 2),
    brokerCpuSecondsPer1k: round((brokerCpu / records) * 1000, 4),
    redisCpuSecondsPer1k: round((redisCpu / records) * 1000, 4),
    machineCoresBusy: round(machine / seconds, 2),
    /** Busy cores of everything else on the machine: not redfence, the broker, Redis or this bench. */
    otherCoresBusy: round((machine - cpu - brokerCpu - redisCpu - benchCpu) / seconds, 2),
    workersAssigned: assigned.size,
    exit,
  };
  console.error(`[workers] ${JSON.stringify(result)}`);
  return result;
}

const round = (x: number, d: number) => Math.round(x * 10 ** d) / 10 ** d;

try {
  await admin.connect();
  await createTopics(kafka, [input, `${input}.DLT`], partitions);
  const tp = performance.now();
  await preload(kafka, input, records, orderMaker(keys));
  console.error(
    `[workers] preloaded ${records} records in ${((performance.now() - tp) / 1000).toFixed(1)} s`,
  );
  const results = [];
  for (const n of workerCounts) results.push(await one(n));
  const base = results[0]?.recordsPerSecond ?? Number.NaN;
  console.log(
    `${records} records, ${keys} keys, ${partitions} partitions, exactly-once; load average at the end: ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  console.log(
    '| workers | records/s | vs first | steady records/s | CPU s / 1k: redfence | broker | Redis | cores busy: redfence | machine | other work | workers assigned |',
  );
  console.log('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
  for (const r of results)
    console.log(
      `| ${r.workers} | ${r.recordsPerSecond} | ${(r.recordsPerSecond / base).toFixed(2)}x | ${r.steadyRecordsPerSecond} | ${r.cpuSecondsPer1k} | ${r.brokerCpuSecondsPer1k} | ${r.redisCpuSecondsPer1k} | ${r.coresBusy} | ${r.machineCoresBusy} | ${r.otherCoresBusy} | ${r.workersAssigned} |`,
    );
  console.log(`results: ${writeResults('workers', { records, keys, partitions, workerCounts }, results)}`);
} finally {
  child?.signal('SIGKILL');
  await admin.disconnect().catch(() => undefined);
  await deleteTopics(kafka, made);
  for (const s of stores) await dropStore(redis, s);
  redis.disconnect();
}
