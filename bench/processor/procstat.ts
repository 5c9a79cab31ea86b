/** CPU time of other processes on this machine (Linux /proc), for per-component CPU figures. */
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TICKS_PER_SECOND = 100; // USER_HZ on Linux

/** user + system CPU seconds of a live process, or NaN when it cannot be read. */
export function cpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // fields after the command name (which may hold spaces) start at state; utime, stime are 14, 15
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return Number.NaN;
  }
}

/**
 * The pid of a service started by dev/ (the one-node Kafka broker, the standalone Redis), or undefined
 * when the benchmark runs against the user's own services (KAFKA_BROKERS / REDIS_URL elsewhere).
 */
export function devPid(service: 'kafka' | 'redis'): number | undefined {
  const dir = process.env.RF_DEV_DIR ?? `${ROOT}.dev`;
  const file =
    service === 'kafka' ? `${dir}/kafka/cluster-1/node-1/kafka.pid` : `${dir}/redis/standalone/redis.pid`;
  if (!existsSync(file)) return undefined;
  const pid = Number(readFileSync(file, 'utf8').trim());
  return Number.isSafeInteger(pid) && existsSync(`/proc/${pid}`) ? pid : undefined;
}
