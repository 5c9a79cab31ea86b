/**
 * Kafka client paths, passthrough only: one preloaded input topic (bench/processor's orders), then each
 * path in its own process with a fresh group and output topic: consume -> produce every record unchanged
 * -> commit, idempotent acks=all producer; output checked complete afterwards.
 *
 *   node --import tsx bench/kafka-paths/run.ts
 *
 * Env: BENCH_RECORDS (100000), BENCH_KEYS (10000), BENCH_PARTITIONS (6), BENCH_ONLY (path ids a, b, c500,
 * c5000, d, e; comma-separated), BENCH_PLATFORMATIC_DIR (/tmp/pk: a directory with @platformatic/kafka
 * installed), BENCH_NODE22 (a Node >= 22.22 binary for it; default the newest .dev/node/22+),
 * KAFKA_BROKERS (127.0.0.1:19092).
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { ROOT } from '../processor/cli.js';
import {
  committedSum,
  createTopics,
  deleteTopics,
  endOffsetSum,
  envInt,
  kafkaClient,
  orderMaker,
  preload,
} from '../processor/kafka.js';
import { cpuSeconds, devPid } from '../processor/procstat.js';
import { writeResults } from '../processor/support.js';
import { type PathOptions, type PathResult, TIMEOUT_MS } from './measure.js';

const opts = {
  records: envInt('BENCH_RECORDS', 100_000),
  keys: envInt('BENCH_KEYS', 10_000),
  partitions: envInt('BENCH_PARTITIONS', 6),
  brokers: (process.env.KAFKA_BROKERS ?? '127.0.0.1:19092').split(','),
  platformaticDir: process.env.BENCH_PLATFORMATIC_DIR ?? '/tmp/pk',
  node22: process.env.BENCH_NODE22 ?? newestNode22(),
};

/** The newest Node >= 22 under .dev/node (dev-node.sh installs them there), or undefined. */
function newestNode22(): string | undefined {
  const dir = `${ROOT}.dev/node`;
  if (!existsSync(dir)) return undefined;
  const versions = readdirSync(dir)
    .filter((v) => Number(v.split('.')[0]) >= 22)
    .sort((x, y) => x.localeCompare(y, undefined, { numeric: true }));
  const v = versions.at(-1);
  return v === undefined ? undefined : `${dir}/${v}/bin/node`;
}

interface Path {
  id: string;
  label: string;
  /** Output holds transaction markers: end offsets exceed the records by at most one per partition per transaction. */
  transactional: boolean;
  /** Node binary and entry file (default: this Node, path.ts). */
  node?: string;
  entry?: string;
}

const PATHS: Path[] = [
  { id: 'a', label: 'a. promise API eachBatch, <= 500 per batch, linger 5 ms (today)', transactional: false },
  { id: 'b', label: 'b. promise API eachBatch, <= 2,000 per batch, linger 1 ms', transactional: false },
  { id: 'c500', label: 'c. low-level consume(500), delivery reports, linger 1 ms', transactional: false },
  { id: 'c5000', label: 'c. low-level consume(5000), delivery reports, linger 1 ms', transactional: false },
  { id: 'd', label: 'd. low-level, one transaction per ~2,000 records, linger 1 ms', transactional: true },
  {
    id: 'e',
    label: 'e. @platformatic/kafka, <= 5,000 fetched records per step (send() has no linger)',
    transactional: false,
    entry: 'platformatic.ts',
  },
];

interface Row extends Partial<PathResult> {
  id: string;
  label: string;
  brokerCpuSecPer1k?: number;
  outputEndOffsets?: number;
  committed?: number;
  complete?: boolean;
  skipped?: string;
  error?: string;
}

/** BENCH_ONLY: path ids, comma-separated (all when unset). */
const only = (process.env.BENCH_ONLY ?? '').split(',').filter((o) => o !== '');

const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
const input = `bench-paths-${run}-in`;
const topics = [input];
const kafka = kafkaClient(opts.brokers);

/** Why a path cannot run here, or undefined. */
function unavailable(path: Path): string | undefined {
  if (path.id !== 'e') return undefined;
  if (!existsSync(`${opts.platformaticDir}/node_modules/@platformatic/kafka/package.json`))
    return `@platformatic/kafka is not installed in ${opts.platformaticDir} (npm install @platformatic/kafka there; it is not a dependency of this package)`;
  if (opts.node22 === undefined || !existsSync(opts.node22))
    return 'no Node >= 22.22 found (set BENCH_NODE22): @platformatic/kafka refuses older Nodes';
  return undefined;
}

/** Runs a path's child process; its last stdout line `RESULT {...}` is the result. */
function child(path: Path, options: PathOptions): Promise<PathResult> {
  const node = path.entry === 'platformatic.ts' ? (opts.node22 as string) : process.execPath;
  const entry = new URL(path.entry ?? 'path.ts', import.meta.url).pathname;
  return new Promise((resolve, reject) => {
    const proc = spawn(node, ['--import', 'tsx', entry, path.id], {
      cwd: ROOT,
      env: {
        ...process.env,
        BENCH_PATH_OPTIONS: JSON.stringify(options),
        BENCH_PLATFORMATIC_DIR: opts.platformaticDir,
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
    // the child bounds itself at 180 s; this catches a child that hangs on connect or close
    const timer = setTimeout(() => proc.kill('SIGKILL'), TIMEOUT_MS + 60_000);
    proc.on('exit', (code, signal) => {
      clearTimeout(timer);
      const line = out.split('\n').find((l) => l.startsWith('RESULT '));
      if (code === 0 && line) resolve(JSON.parse(line.slice(7)) as PathResult);
      else reject(new Error(`${path.id}: exited with ${signal ?? code}${line ? '' : ', no result'}`));
    });
  });
}

async function measure(path: Path): Promise<Row> {
  const why = unavailable(path);
  if (why !== undefined) return { id: path.id, label: path.label, skipped: why };
  const output = `bench-paths-${run}-out-${path.id}`;
  const groupId = `bench-paths-${run}-${path.id}`;
  topics.push(output);
  await createTopics(kafka, [output], opts.partitions);
  const bcpu0 = cpuSeconds(devPid('kafka'));
  try {
    const r = await child(path, {
      brokers: opts.brokers,
      input,
      output,
      groupId,
      records: opts.records,
      partitions: opts.partitions,
    });
    const bcpu = cpuSeconds(devPid('kafka')) - bcpu0;
    const end = await endOffsetSum(kafka, output);
    const committed = await committedSum(kafka, groupId, input);
    const n = opts.records;
    const endOk = path.transactional ? end > n && end <= n + opts.partitions * (r.batches ?? 0) : end === n;
    return {
      id: path.id,
      label: path.label,
      ...r,
      brokerCpuSecPer1k: (bcpu / n) * 1000,
      outputEndOffsets: end,
      committed,
      complete: endOk && committed === n && r.delivered >= n,
    };
  } catch (err) {
    return { id: path.id, label: path.label, error: err instanceof Error ? err.message : String(err) };
  }
}

function table(rows: Row[]): string {
  const lines = [
    '| path | records/s | steady records/s | CPU s / 1k records (process) | broker CPU s / 1k | peak RSS MB | batches | records / batch | output complete |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |',
  ];
  for (const r of rows) {
    if (r.skipped !== undefined || r.error !== undefined) {
      lines.push(
        `| ${r.label} | – | – | – | – | – | – | – | ${r.skipped ? `skipped: ${r.skipped}` : `failed: ${r.error}`} |`,
      );
      continue;
    }
    const broker = Number.isFinite(r.brokerCpuSecPer1k) ? (r.brokerCpuSecPer1k ?? 0).toFixed(3) : '–';
    lines.push(
      `| ${r.label} | ${Math.round(r.recordsPerSec ?? 0)} | ${Math.round(r.steadyRecordsPerSec ?? 0)} | ` +
        `${(r.cpuSecPer1k ?? 0).toFixed(3)} | ${broker} | ${Math.round(r.peakRssMb ?? 0)} | ${r.batches} | ` +
        `${(r.avgBatch ?? 0).toFixed(0)} | ${r.complete ? 'yes' : `NO (end offsets ${r.outputEndOffsets}, committed ${r.committed}, delivered ${r.delivered})`} |`,
    );
  }
  return lines.join('\n');
}

async function main(): Promise<void> {
  console.error(
    `[paths] ${opts.records} records, ${opts.keys} keys, ${opts.partitions} partitions; input ${input}`,
  );
  await createTopics(kafka, [input], opts.partitions);
  const tp = performance.now();
  await preload(kafka, input, opts.records, orderMaker(opts.keys));
  console.error(`[paths] preloaded in ${((performance.now() - tp) / 1000).toFixed(1)} s`);
  const rows: Row[] = [];
  for (const path of PATHS) {
    if (only.length > 0 && !only.includes(path.id)) continue;
    const row = await measure(path);
    console.error(
      `[paths] ${path.id}: ${row.skipped ? `skipped (${row.skipped})` : row.error ? `FAILED: ${row.error}` : `${Math.round(row.recordsPerSec ?? 0)} records/s (${(row.seconds ?? 0).toFixed(1)} s), complete: ${row.complete}`}`,
    );
    rows.push(row);
  }
  console.log(table(rows));
  const file = writeResults('kafka-paths', opts, rows);
  console.error(`[paths] wrote ${file}`);
  if (rows.some((r) => r.error !== undefined || (r.skipped === undefined && !r.complete)))
    process.exitCode = 1;
}

try {
  await main();
} finally {
  await deleteTopics(kafka, topics);
}
