/**
 * Redis memory per open window of a windowed count (bench/topology/failover.ts): the used_memory delta
 * over the run that opened them, per window, and MEMORY USAGE (SAMPLES 0: every field counted) of a
 * sample of the application's keys, one SCAN pass until `sample` fence hashes are seen: the fence hash
 * `rf:{<app>:<key>}` (the key's offsets, epoch and pending outputs) and the window keys
 * `<fence hash>:w:<store>:<start>` (the count and its timestamp store: two per window).
 */
import type { Redis } from 'ioredis';

export interface WindowMemory {
  /** used_memory after the run minus before, over the windows opened. */
  usedBytesPerWindow: number;
  fenceHashBytes: number;
  windowKeyBytes: number;
  /** Window keys seen per fence hash in the sample (2 for one window: count and timestamp). */
  windowKeysPerFence: number;
  /** fenceHashBytes + windowKeysPerFence × windowKeyBytes: one key's one window, by MEMORY USAGE. */
  sampledBytesPerWindow: number;
  sampledKeys: number;
}

export async function redisWindowMemory(
  redis: Redis,
  app: string,
  windows: number,
  usedDelta: number,
  sample: number,
): Promise<WindowMemory> {
  const prefix = `rf:{${app}:`;
  const fences: string[] = [];
  const windowKeys: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
    cursor = next;
    for (const k of keys) {
      if (/\}:w:\d+:-?\d+$/.test(k)) windowKeys.push(k);
      else if (k.endsWith('}')) fences.push(k);
    }
  } while (cursor !== '0' && fences.length < sample);
  const usage = async (keys: string[]) => {
    if (keys.length === 0) return Number.NaN;
    const p = redis.pipeline();
    for (const k of keys) p.call('MEMORY', 'USAGE', k, 'SAMPLES', '0');
    const replies = (await p.exec()) ?? [];
    let sum = 0;
    for (const [err, v] of replies) if (!err) sum += Number(v ?? 0);
    return sum / keys.length;
  };
  const fenceHashBytes = await usage(fences);
  const windowKeyBytes = await usage(windowKeys);
  const windowKeysPerFence = fences.length > 0 ? windowKeys.length / fences.length : Number.NaN;
  return {
    usedBytesPerWindow: usedDelta / windows,
    fenceHashBytes,
    windowKeyBytes,
    windowKeysPerFence,
    sampledBytesPerWindow: fenceHashBytes + windowKeysPerFence * windowKeyBytes,
    sampledKeys: fences.length + windowKeys.length,
  };
}
