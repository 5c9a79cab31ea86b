/**
 * The batch executor's input checks: its options once, each batch before anything is sent
 * (RF_INVALID_OPTIONS / RF_INVALID_ARGUMENT naming the field).
 */

import type { Cluster, Redis } from 'ioredis';
import { RedfenceError } from '../../errors/index.js';
import type { KeyEncoding } from '../../keys/index.js';
import type { StoreRedis } from '../../store/index.js';
import type { RunPlan } from './plan.js';
import type { TopologyBatch } from './types.js';

export interface TopologyExecutorOptions {
  /** An ioredis `Redis` or `Cluster` (emit-final needs its `zadd` and `zrangebyscore`). */
  readonly redis: StoreRedis | Redis | Cluster;
  readonly tenant?: string;
  /** How fence keys become part of key names (default `auto`). */
  readonly keyEncoding?: KeyEncoding;
  /**
   * How long a window key lives past its close (ms, default one day): it expires at
   * `max(end + grace, now) + retentionMs`, so a window written while reading old data still lives
   * `retentionMs` of wall-clock time.
   */
  readonly retentionMs?: number;
  /** The wall clock in ms (window expiry only). Default `Date.now`. */
  readonly now?: () => number;
  /**
   * Owner-local state for reduce and aggregate (owner-cache.ts): keep up to `maxBytes` of the
   * unwindowed aggregates this process last wrote, and fold onto them without reading Redis (the write
   * still carries the key's token: a key changed elsewhere is read again). Off by default here; the
   * topology processor turns it on.
   */
  readonly ownerCache?: { readonly maxBytes: number };
}

const DAY_MS = 86_400_000;
export const OPTION_KEYS: readonly (keyof TopologyExecutorOptions)[] = [
  'redis',
  'tenant',
  'keyEncoding',
  'retentionMs',
  'now',
  'ownerCache',
];

function bad(message: string): RedfenceError {
  return new RedfenceError('RF_INVALID_ARGUMENT', `topology batch: ${message}`);
}

export function checkBatch(plan: RunPlan, b: TopologyBatch): void {
  if (b === null || typeof b !== 'object') throw bad('must be an object');
  if (typeof b.topic !== 'string' || !plan.subs.has(b.topic))
    throw bad(
      `topic must be one the topology reads (${[...plan.subs.keys()].join(', ')}), got ${String(b.topic)}`,
    );
  const int = (n: unknown, min: number) => Number.isSafeInteger(n) && (n as number) >= min;
  if (!int(b.partition, 0)) throw bad('partition must be an integer >= 0');
  if (!int(b.epoch, 0)) throw bad('epoch must be an integer >= 0');
  if (!int(b.committedOffset, -1)) throw bad('committedOffset must be an integer >= -1');
  if (!Array.isArray(b.records)) throw bad('records must be an array');
  if (b.partitionCount !== undefined && !(int(b.partitionCount, 1) && b.partitionCount > b.partition))
    throw bad('partitionCount must be an integer above the partition');
  if (
    b.partitionCounts !== undefined &&
    (b.partitionCount === undefined ||
      !Array.isArray(b.partitionCounts) ||
      !b.partitionCounts.every((n) => int(n, 1)))
  )
    throw bad('partitionCounts needs partitionCount and must hold integers >= 1');
  let last = -1;
  b.records.forEach((r, i) => {
    const ok =
      r !== null &&
      typeof r === 'object' &&
      r.topic === b.topic &&
      r.partition === b.partition &&
      int(r.offset, 0) &&
      r.offset > last &&
      int(r.timestamp, 0) &&
      (r.key === null || Buffer.isBuffer(r.key)) &&
      (r.value === null || Buffer.isBuffer(r.value));
    if (!ok)
      throw bad(
        `records[${i}] needs the batch's topic and partition, an offset above the one before, a timestamp >= 0 and Buffer|null key and value`,
      );
    last = r.offset;
  });
}

export function options(o: TopologyExecutorOptions): {
  retention: number;
  now: () => number;
  ownerBytes: number;
} {
  if (o === null || typeof o !== 'object')
    throw new RedfenceError('RF_INVALID_OPTIONS', 'TopologyExecutor options must be an object');
  for (const k of Object.keys(o))
    if (!OPTION_KEYS.includes(k as keyof TopologyExecutorOptions))
      throw new RedfenceError('RF_INVALID_OPTIONS', `TopologyExecutor: unknown option ${JSON.stringify(k)}`);
  const retention = o.retentionMs ?? DAY_MS;
  if (!Number.isSafeInteger(retention) || retention < 0)
    throw new RedfenceError('RF_INVALID_OPTIONS', 'TopologyExecutor: retentionMs must be an integer >= 0');
  if (o.now !== undefined && typeof o.now !== 'function')
    throw new RedfenceError('RF_INVALID_OPTIONS', 'TopologyExecutor: now must be a function');
  const cache = o.ownerCache;
  if (
    cache !== undefined &&
    (cache === null ||
      typeof cache !== 'object' ||
      !Number.isSafeInteger(cache.maxBytes) ||
      cache.maxBytes < 1 ||
      Object.keys(cache).some((k) => k !== 'maxBytes'))
  )
    throw new RedfenceError(
      'RF_INVALID_OPTIONS',
      'TopologyExecutor: ownerCache must be { maxBytes: n } with n an integer >= 1',
    );
  return { retention, now: o.now ?? Date.now, ownerBytes: cache?.maxBytes ?? 0 };
}
