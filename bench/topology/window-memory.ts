/**
 * Redis memory per open window of a windowed count (bench/topology/failover.ts): the used_memory delta
 * over the run that opened them, per window, and MEMORY USAGE (SAMPLES 0: every field counted) of a
 * sample of customers, each with one window starting at `start`: its fence hash `rf:{<app>:<key>}` (the
 * key's offsets, epoch and pending outputs) and its window keys `<fence hash>:w:<store>:<start>` (one
 * per store of the count: its value and its timestamp). The sample is the fence hashes of one SCAN pass
 * (until `sample` are seen), the stores those of the window keys the pass met.
 */
import type { Redis } from 'ioredis';

export interface WindowMemory {
  /** used_memory after the run minus before, over the windows opened. */
  usedBytesPerWindow: number;
  fenceHashBytes: number;
  /** Per window key of a sampled customer's window (each of its stores). */
  windowKeyBytes: number;
  /** Window keys per window: the count's stores. */
  windowKeysPerWindow: number;
  /** fenceHashBytes + windowKeysPerWindow × windowKeyBytes: one customer's one window, by MEMORY USAGE. */
  sampledBytesPerWindow: number;
  sampledCustomers: number;
}

export async function redisWindowMemory(
  redis: Redis,
  app: string,
  start: number,
  windows: number,
  usedDelta: number,
  sample: number,
): Promise<WindowMemory> {
  const fences: string[] = [];
  const stores = new Set<string>();
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `rf:{${app}:*`, 'COUNT', 1000);
    cursor = next;
    for (const k of keys) {
      const w = /\}:w:(\d+):-?\d+$/.exec(k);
      if (w) stores.add(w[1] as string);
      else if (k.endsWith('}') && fences.length < sample) fences.push(k);
    }
  } while (cursor !== '0' && (fences.length < sample || stores.size === 0));
  const p = redis.pipeline();
  for (const f of fences) {
    p.call('MEMORY', 'USAGE', f, 'SAMPLES', '0');
    for (const s of stores) p.call('MEMORY', 'USAGE', `${f}:w:${s}:${start}`, 'SAMPLES', '0');
  }
  const replies = (await p.exec()) ?? [];
  let fenceSum = 0;
  let windowSum = 0;
  let windowKeys = 0;
  replies.forEach(([err, v], i) => {
    if (err || v === null) return; // a window key that is not there (none expected) counts nothing
    if (i % (stores.size + 1) === 0) fenceSum += Number(v);
    else {
      windowSum += Number(v);
      windowKeys++;
    }
  });
  const n = fences.length;
  const fenceHashBytes = n > 0 ? fenceSum / n : Number.NaN;
  const windowKeyBytes = windowKeys > 0 ? windowSum / windowKeys : Number.NaN;
  const windowKeysPerWindow = n > 0 ? windowKeys / n : Number.NaN;
  return {
    usedBytesPerWindow: usedDelta / windows,
    fenceHashBytes,
    windowKeyBytes,
    windowKeysPerWindow,
    sampledBytesPerWindow: n > 0 ? (fenceSum + windowSum) / n : Number.NaN,
    sampledCustomers: n,
  };
}
