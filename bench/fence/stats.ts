/** Reads the Redis server's CPU time, command statistics and memory from INFO. */
import type { Redis } from 'ioredis';

export function parseInfo(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of text.split('\r\n')) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) out.set(line.slice(0, i), line.slice(i + 1));
  }
  return out;
}

/** used_cpu_sys + used_cpu_user of the server, in microseconds. */
export async function serverCpuUs(redis: Redis): Promise<number> {
  const info = parseInfo(await redis.info('cpu'));
  const sys = Number(info.get('used_cpu_sys'));
  const user = Number(info.get('used_cpu_user'));
  if (!Number.isFinite(sys) || !Number.isFinite(user)) throw new Error('INFO cpu lacks used_cpu_sys/user');
  return Math.round((sys + user) * 1e6);
}

export interface CommandStat {
  calls: number;
  usec: number;
}

/** INFO commandstats as `command -> {calls, usec}` (commands run inside scripts are counted too). */
export async function commandStats(redis: Redis): Promise<Record<string, CommandStat>> {
  const out: Record<string, CommandStat> = {};
  for (const [k, v] of parseInfo(await redis.info('commandstats'))) {
    if (!k.startsWith('cmdstat_')) continue;
    const calls = /calls=(\d+)/.exec(v);
    const usec = /usec=(\d+)/.exec(v);
    out[k.slice(8)] = { calls: Number(calls?.[1] ?? 0), usec: Number(usec?.[1] ?? 0) };
  }
  return out;
}

/** used_memory minus mem_clients_normal (client query/output buffers are not data). */
export async function usedMemory(redis: Redis): Promise<number> {
  const info = parseInfo(await redis.info('memory'));
  const n = Number(info.get('used_memory')) - Number(info.get('mem_clients_normal'));
  if (!Number.isFinite(n)) throw new Error('INFO memory lacks used_memory or mem_clients_normal');
  return n;
}
