/** What the processor, latency, failover and memory benchmarks share besides Kafka: Redis and results. */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import type { Redis } from 'ioredis';

/** Redis server CPU seconds so far (user + system, `INFO cpu`); NaN without a client. */
export async function redisCpuSeconds(redis: Redis | undefined): Promise<number> {
  if (redis === undefined) return Number.NaN;
  const info = await redis.info('cpu');
  let s = 0;
  for (const line of info.split('\r\n')) {
    const [k, v] = line.split(':');
    if (k === 'used_cpu_sys' || k === 'used_cpu_user') s += Number(v);
  }
  return s;
}

/** Deletes a benchmark store's keys (`rf:{<store>:…`). */
export async function dropStore(redis: Redis, store: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `rf:{${store}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== '0');
}

/** BENCH_ONLY: comma-separated parts; a label runs when it contains one of them (all run when unset). */
export function selected(label: string): boolean {
  const only = process.env.BENCH_ONLY?.split(',').filter((o) => o !== '');
  return !only || only.length === 0 || only.some((o) => label.includes(o));
}

/** Writes bench/results/<name>-<date>.raw.json with the date, options, host and results; returns its path. */
export function writeResults(name: string, options: unknown, results: unknown): string {
  mkdirSync('bench/results', { recursive: true });
  const date = new Date().toISOString();
  const file = `bench/results/${name}-${date.replace(/[:.]/g, '-')}.raw.json`;
  const host = { cpus: cpus().length, cpu: cpus()[0]?.model, loadavg: loadavg(), node: process.version };
  writeFileSync(file, `${JSON.stringify({ date, options, host, results }, null, 2)}\n`);
  return file;
}

/** A running contender as the wait loop sees it. */
export interface Progressing {
  /** Records done (committed) so far. */
  progress(): number;
  /** A failure the contender saw, or undefined. */
  failure?(): string | undefined;
  stop(): Promise<void>;
}

/**
 * Polls `h` every 10 ms until `records` are done: the end time and the first time any progress was
 * seen (with the records done then), for the total and the steady rate. A failure or the timeout
 * stops `h` and throws naming `label`.
 */
export async function untilDone(
  label: string,
  h: Progressing,
  records: number,
  t0: number,
  timeoutMs: number,
): Promise<{ t1: number; tFirst: number; firstRecords: number }> {
  let tFirst: number | undefined;
  let firstRecords = 0;
  try {
    for (;;) {
      const failed = h.failure?.();
      if (failed !== undefined) throw new Error(`${label}: ${failed}`);
      const done = h.progress();
      const now = performance.now();
      if (done > 0 && tFirst === undefined) {
        tFirst = now;
        firstRecords = done;
      }
      if (done >= records) return { t1: now, tFirst: tFirst ?? t0, firstRecords };
      if (now - t0 > timeoutMs)
        throw new Error(`${label}: timed out after ${timeoutMs / 1000} s with ${done} of ${records} records`);
      await new Promise((r) => setTimeout(r, 10));
    }
  } catch (err) {
    await h.stop();
    throw err;
  }
}
