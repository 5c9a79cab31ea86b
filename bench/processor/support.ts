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
