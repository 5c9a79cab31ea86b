/**
 * What a redfence run of bench/topology/run.ts spent, beyond its rate (BENCH_PROBE=<dir>): a CPU profile
 * of the process over the run (<dir>/<label>.cpuprofile, for Chrome's DevTools or speedscope; sampled
 * every BENCH_PROBE_SAMPLE_US µs, default 1000, 0 for none) or, with BENCH_PROBE_HEAP=1, a sampling heap
 * profile of every allocation, collected ones too (<dir>/<label>.heapprofile); the CPU per record of
 * each of the process' threads (main, `node`: V8's GC helpers and libuv's pool, `rdk:*`: librdkafka);
 * the sizes of the batches the processor handed its executor and the Kafka steps' durations (through a
 * metrics object that records them); the event loop's utilisation; and Redis' `INFO commandstats` over
 * the run (reset at its start). Printed to stderr when the run ends. Off (no metrics object, no
 * profile) unless BENCH_PROBE is set. A profile costs CPU of its own: compare rates without one.
 *
 *   BENCH_PROBE=/tmp/probe BENCH_PROBE_SAMPLE_US=0 BENCH_ONLY=redfence node --import tsx bench/topology/run.ts
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';
import { type EventLoopUtilization, performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';

const DIR = process.env.BENCH_PROBE;
/** The profile's sampling interval in µs (BENCH_PROBE_SAMPLE_US); 0: no profile. */
const SAMPLE_US = Number(process.env.BENCH_PROBE_SAMPLE_US ?? 1000);
/** BENCH_PROBE_HEAP=1: a sampling heap profile of every allocation (collected ones too) instead of the CPU profile. */
const HEAP = process.env.BENCH_PROBE_HEAP === '1';

/** CPU seconds so far of each of this process' threads, summed by thread name (Linux /proc). */
function threadCpu(): Map<string, number> {
  const out = new Map<string, number>();
  try {
    for (const t of readdirSync('/proc/self/task')) {
      const stat = readFileSync(`/proc/self/task/${t}/stat`, 'utf8');
      const name = (stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')) || '?').replace(/[0-9]+$/, '');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const ticks = Number(f[11]) + Number(f[12]); // utime + stime
      const label = t === String(process.pid) ? 'main' : name;
      out.set(label, (out.get(label) ?? 0) + ticks / 100);
    }
  } catch {
    // not Linux: no per-thread figures
  }
  return out;
}

/** A metrics object for the processor: records batch sizes and Kafka step durations, ignores the rest. */
function recordingMetrics(sizes: number[], steps: number[]): object {
  const calls = {
    batch: (n: number) => sizes.push(n),
    commit: (_mode: string, seconds: number) => steps.push(seconds),
  };
  return new Proxy(calls, {
    get: (t, name) => (name in t ? t[name as keyof typeof t] : () => undefined),
  });
}

/** Percentiles and mean of `xs` (sorted in place). */
function summary(xs: number[], digits = 0): string {
  if (xs.length === 0) return 'none';
  xs.sort((a, b) => a - b);
  const at = (q: number) =>
    (xs[Math.min(xs.length - 1, Math.floor(q * xs.length))] as number).toFixed(digits);
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  return `n ${xs.length}, mean ${mean.toFixed(digits)}, p10 ${at(0.1)}, p50 ${at(0.5)}, p90 ${at(0.9)}, max ${at(1)}`;
}

/** Per command: calls and µs spent, from `INFO commandstats`. */
function commandStats(info: string, records: number): string[] {
  const rows: { cmd: string; calls: number; usec: number }[] = [];
  for (const line of info.split('\r\n')) {
    const m = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line);
    if (m) rows.push({ cmd: m[1] as string, calls: Number(m[2]), usec: Number(m[3]) });
  }
  rows.sort((a, b) => b.usec - a.usec);
  return rows
    .slice(0, 12)
    .map(
      (r) =>
        `  ${r.cmd}: ${(r.calls / records).toFixed(3)} calls/record, ${(r.usec / records).toFixed(2)} µs/record, ${(r.usec / Math.max(1, r.calls)).toFixed(1)} µs/call`,
    );
}

export interface Probe {
  /** Options to add to the processor's (a recording metrics object), empty when off. */
  readonly options: { metrics?: never };
  start(): Promise<void>;
  /** Stops the profile and prints what was recorded. */
  stop(label: string, records: number): Promise<void>;
}

/** A probe of one redfence run, or one that does nothing when BENCH_PROBE is unset. */
export function probe(redis: Redis): Probe {
  if (DIR === undefined || DIR === '')
    return { options: {}, start: async () => undefined, stop: async () => undefined };
  const sizes: number[] = [];
  const steps: number[] = [];
  const session = new Session();
  let elu: EventLoopUtilization | undefined;
  let threads0 = new Map<string, number>();
  return {
    options: { metrics: recordingMetrics(sizes, steps) as never },
    async start() {
      await redis.config('RESETSTAT');
      threads0 = threadCpu();
      if (HEAP) {
        session.connect();
        await session.post('HeapProfiler.startSampling', {
          samplingInterval: 16_384,
          includeObjectsCollectedByMajorGC: true,
          includeObjectsCollectedByMinorGC: true,
        } as never);
      } else if (SAMPLE_US > 0) {
        session.connect();
        await session.post('Profiler.enable');
        await session.post('Profiler.setSamplingInterval', { interval: SAMPLE_US });
        await session.post('Profiler.start');
      }
      elu = performance.eventLoopUtilization();
    },
    async stop(label, records) {
      const used = performance.eventLoopUtilization(elu);
      const threads = [...threadCpu()]
        .map(([name, s]) => [name, s - (threads0.get(name) ?? 0)] as const)
        .filter(([, s]) => s > 0)
        .sort((a, b) => b[1] - a[1])
        .map(([name, s]) => `${name} ${((s / records) * 1e6).toFixed(1)}`);
      let file = 'none';
      if (HEAP) {
        const { profile } = await session.post('HeapProfiler.stopSampling');
        session.disconnect();
        mkdirSync(DIR, { recursive: true });
        file = join(DIR, `${label.replace(/[^a-z0-9-]+/gi, '_')}.heapprofile`);
        writeFileSync(file, JSON.stringify(profile));
      } else if (SAMPLE_US > 0) {
        const { profile } = await session.post('Profiler.stop');
        session.disconnect();
        mkdirSync(DIR, { recursive: true });
        file = join(DIR, `${label.replace(/[^a-z0-9-]+/gi, '_')}.cpuprofile`);
        writeFileSync(file, JSON.stringify(profile));
      }
      const stats = commandStats(await redis.info('commandstats'), records);
      console.error(
        [
          `[probe] ${label}: profile ${file}`,
          `  event loop utilisation ${used.utilization.toFixed(3)} (active ${(used.active / 1000).toFixed(1)} s of ${(used.idle / 1000 + used.active / 1000).toFixed(1)} s)`,
          `  CPU µs / record by thread: ${threads.join(', ')}`,
          `  batches handed to the executor (records): ${summary(sizes)}`,
          `  Kafka steps (ms): ${summary(
            steps.map((s) => s * 1000),
            1,
          )}`,
          '  Redis commandstats over the run:',
          ...stats,
        ].join('\n'),
      );
    },
  };
}
