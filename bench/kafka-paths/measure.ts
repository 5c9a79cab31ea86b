/**
 * What every path's child process shares: its options from the environment, the timed run (bounded at
 * 180 s) and the one-line JSON result it prints. No Kafka client here: the @platformatic/kafka path runs
 * on another Node and imports only this.
 */
import { readFileSync } from 'node:fs';
import { untilDone } from '../processor/support.js';

export interface PathOptions {
  brokers: string[];
  input: string;
  output: string;
  groupId: string;
  records: number;
  partitions: number;
}

/** A running path: records produced, delivered and committed so far; batches (or transactions) so far. */
export interface Running {
  progress(): number;
  batches(): number;
  /** Records whose delivery was reported (the check that nothing was committed past a missing report). */
  delivered(): number;
  /** Set when a delivery, commit or transaction failed: the run stops and reports it. */
  failure(): string | undefined;
  stop(): Promise<void>;
}

export interface PathResult {
  records: number;
  seconds: number;
  steadySeconds: number;
  recordsPerSec: number;
  steadyRecordsPerSec: number;
  cpuSecPer1k: number;
  peakRssMb: number;
  batches: number;
  avgBatch: number;
  delivered: number;
  node: string;
  client: string;
}

export const TIMEOUT_MS = 180_000;

export function pathOptions(): PathOptions {
  const raw = process.env.BENCH_PATH_OPTIONS;
  if (!raw) throw new Error('BENCH_PATH_OPTIONS is not set: run bench/kafka-paths/run.ts');
  return JSON.parse(raw) as PathOptions;
}

/** Peak resident set size of this process, MB (VmHWM). */
function peakRssMb(): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

/** Starts a path, polls it until it has committed every record (fails after 180 s), stops it. */
export async function timed(
  records: number,
  client: string,
  go: () => Promise<Running>,
): Promise<PathResult> {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const h = await go();
  const { t1, tFirst, firstRecords } = await untilDone(client, h, records, t0, TIMEOUT_MS);
  const cpu = process.cpuUsage(cpu0);
  const batches = h.batches();
  const delivered = h.delivered();
  await h.stop();
  const seconds = (t1 - t0) / 1000;
  const steadySeconds = (t1 - tFirst) / 1000;
  return {
    records,
    seconds,
    steadySeconds,
    recordsPerSec: records / seconds,
    steadyRecordsPerSec: steadySeconds > 0 ? (records - firstRecords) / steadySeconds : 0,
    cpuSecPer1k: ((cpu.user + cpu.system) / 1e6 / records) * 1000,
    peakRssMb: peakRssMb(),
    batches,
    avgBatch: batches > 0 ? records / batches : 0,
    delivered,
    node: process.version,
    client,
  };
}

/** The child's last stdout line: the result the parent reads. */
export function report(result: PathResult): void {
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
}
