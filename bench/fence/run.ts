/**
 * Fence benchmark: the seed sketch (one EVALSHA per record) against Fence.apply with 1, 10 and 100
 * records per call, not pipelined and pipelined, on a private redis-server; then memory per key.
 *
 *   node --import tsx bench/fence/run.ts
 *
 * Env: BENCH_RECORDS (200000), BENCH_KEYS (10000), BENCH_RUNS (2; the best run by records/s is
 * reported), BENCH_WINDOW (128 calls in flight when pipelined), BENCH_PARTITIONS (16);
 * BENCH_BATCH=1 (also measure Fence.applyBatch, pipelined). For profiling: BENCH_ONLY (run only the
 * configurations whose label contains it, e.g. "apply x10 pipelined"), BENCH_MEMORY=0 (skip memory),
 * BENCH_PENDING_INDEX=0 (Fence option pendingIndex: false).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { Redis } from 'ioredis';
import { startRedisServer } from '../../src/harness/redis-server.js';
import { type MemoryResult, measureMemory, STATES } from './memory.js';
import { parseInfo } from './stats.js';
import { type Clients, type Config, type Measurement, measure } from './throughput.js';

const PORT = 16479;

function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer, got ${raw}`);
  return n;
}

const opts = {
  records: envInt('BENCH_RECORDS', 200_000),
  keys: envInt('BENCH_KEYS', 10_000),
  partitions: envInt('BENCH_PARTITIONS', 16),
  window: envInt('BENCH_WINDOW', 128),
  /** BENCH_PENDING_INDEX=0: Fence option pendingIndex false (no ZADD per apply). */
  pendingIndex: process.env.BENCH_PENDING_INDEX !== '0',
};
const RUNS = envInt('BENCH_RUNS', 2);

const CONFIGS: Config[] = [];
for (const pipelined of [false, true]) {
  CONFIGS.push({ approach: 'seed', perCall: 1, pipelined });
  for (const perCall of [1, 10, 100]) CONFIGS.push({ approach: 'apply', perCall, pipelined });
}
// Fence.applyBatch (one ZADD per partition per wave instead of one per call): opt in, BENCH_BATCH=1.
if (process.env.BENCH_BATCH === '1')
  for (const perCall of [1, 10, 100]) CONFIGS.push({ approach: 'applyBatch', perCall, pipelined: true });

const label = (c: Config): string =>
  `${c.approach} x${c.perCall} ${c.pipelined ? 'pipelined' : 'sequential'}`;
/** BENCH_ONLY: run only the configurations whose label contains this text (for profiling). */
const ONLY = process.env.BENCH_ONLY;
if (ONLY) CONFIGS.splice(0, CONFIGS.length, ...CONFIGS.filter((c) => label(c).includes(ONLY)));
const SKIP_MEMORY = process.env.BENCH_MEMORY === '0';

interface Row {
  readonly config: Config;
  readonly best: Measurement;
  readonly runs: Measurement[];
}

const f = (n: number, d = 1): string => n.toFixed(d);

function table(rows: readonly Row[]): string {
  const lines = [
    '| approach | records/call | pipelined | records/s | records/s vs seed | Redis CPU µs/record | Redis CPU vs seed | command µs/record | client CPU µs/record |',
    '|---|---:|---|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    const seed = rows.find((s) => s.config.approach === 'seed' && s.config.pipelined === r.config.pipelined);
    const b = r.best;
    const rps = seed ? `${f(b.recordsPerSec / seed.best.recordsPerSec, 2)}×` : '';
    const cpu = seed ? `${f(b.redisCpuUsPerRecord / seed.best.redisCpuUsPerRecord, 2)}×` : '';
    const name = r.config.approach === 'seed' ? 'seed sketch (EVALSHA/record)' : `Fence.${r.config.approach}`;
    lines.push(
      `| ${name} | ${r.config.perCall} | ${r.config.pipelined ? `yes (${opts.window} in flight)` : 'no'} | ${f(b.recordsPerSec, 0)} | ${rps} | ${f(b.redisCpuUsPerRecord, 2)} | ${cpu} | ${f(b.commandUsPerRecord, 2)} | ${f(b.clientCpuUsPerRecord, 2)} |`,
    );
  }
  return lines.join('\n');
}

function memoryTable(mem: readonly MemoryResult[]): string {
  const lines = [
    '| state | MEMORY USAGE bytes/key | used_memory delta bytes/key | of which pending index bytes/key | encoding |',
    '|---|---:|---:|---:|---|',
  ];
  for (const m of mem) {
    lines.push(
      `| ${m.state} | ${f(m.memoryUsageBytesPerKey, 0)} | ${f(m.usedMemoryDeltaBytesPerKey, 0)} | ${f(m.pendingIndexBytesPerKey, 0)} | ${m.encoding} |`,
    );
  }
  return lines.join('\n');
}

const server = await startRedisServer({ port: PORT, binary: '/usr/bin/redis-server' });
const stopOnSignal = (): void => {
  void server.stop().finally(() => process.exit(130));
};
process.once('SIGINT', stopOnSignal);
process.once('SIGTERM', stopOnSignal);

const connect = (pipelining: boolean): Redis =>
  new Redis({ host: '127.0.0.1', port: PORT, enableAutoPipelining: pipelining, maxRetriesPerRequest: 1 });
const clients: Clients = { admin: connect(false), plain: connect(false), piped: connect(true) };

try {
  const t0 = Date.now();
  const load0 = loadavg();
  const server_info = parseInfo(await clients.admin.info('server'));
  console.log(
    `redis ${server_info.get('redis_version')} pid ${server.pid} port ${PORT}; ${opts.records} records, ${opts.keys} keys, ${opts.partitions} partitions, ${RUNS} runs per configuration`,
  );
  const runs = new Map<Config, Measurement[]>(CONFIGS.map((c) => [c, []]));
  for (let run = 1; run <= RUNS; run++) {
    for (const cfg of CONFIGS) {
      const m = await measure(clients, cfg, opts, run);
      runs.get(cfg)?.push(m);
      console.log(
        `run ${run} ${label(cfg).padEnd(30)} ${f(m.recordsPerSec, 0).padStart(8)} records/s  ${f(m.redisCpuUsPerRecord, 2).padStart(6)} Redis CPU µs/record  (${f(m.wallMs / 1000, 2)} s)`,
      );
    }
  }
  const rows: Row[] = CONFIGS.map((config) => {
    const ms = runs.get(config) ?? [];
    const best = ms.reduce((a, b) => (b.recordsPerSec > a.recordsPerSec ? b : a));
    return { config, best, runs: ms };
  });

  const mem: MemoryResult[] = [];
  for (const s of SKIP_MEMORY ? [] : STATES)
    mem.push(await measureMemory(clients.admin, clients.piped, s, opts.keys, opts.partitions));

  const date = new Date().toISOString();
  const out = new URL(`../results/fence-${date.replace(/[:.]/g, '-')}.raw.json`, import.meta.url);
  mkdirSync(new URL('../results/', import.meta.url), { recursive: true });
  const machine = {
    loadavgAtStart: load0,
    loadavgAtEnd: loadavg(),
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model,
    node: process.version,
    redis: server_info.get('redis_version'),
  };
  writeFileSync(
    out,
    `${JSON.stringify({ date, machine, options: { ...opts, runs: RUNS, reported: 'best run by records/s' }, throughput: rows, memory: mem }, null, 2)}\n`,
  );

  console.log(
    `\n## Throughput (best of ${RUNS} runs by records/s; ${opts.records} records over ${opts.keys} keys)\n`,
  );
  console.log(table(rows));
  console.log(`\n## Memory (${opts.keys} keys)\n`);
  console.log(memoryTable(mem));
  console.log(
    `\nload average (1/5/15 min) at start ${load0.map((x) => f(x, 2)).join(' ')}, at end ${loadavg()
      .map((x) => f(x, 2))
      .join(' ')} (${machine.cpus} CPUs)`,
  );
  console.log(`\nwrote ${out.pathname} in ${f((Date.now() - t0) / 1000)} s`);
} finally {
  await Promise.allSettled([clients.admin.quit(), clients.plain.quit(), clients.piped.quit()]);
  await server.stop();
}
