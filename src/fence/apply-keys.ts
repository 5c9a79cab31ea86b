/**
 * Sends a {@link KeyBatch}: the same script calls as `Fence.applyBatch` makes for one partition batch
 * (up to MAX_KEYS_PER_CALL keys per call, per hash slot on a cluster client, the one-key script for a
 * key alone in its group, the caller-side pending index in cluster fencing), with the replies read
 * straight into a {@link BatchResults}.
 */
import { RedfenceError } from '../errors/index.js';
import { BoundedCache, type KeySpace, keySlot } from '../keys/index.js';
import { type BatchResults, decodeKey, decodeKeyAt, type KeyBatch } from './key-batch.js';
import type { FenceRedis, RedisArg } from './redis-port.js';
import type { LoadedScript } from './script-loader.js';
import { runScript, wrapRedisError } from './script-runner.js';

export interface ApplyKeysContext {
  readonly redis: FenceRedis;
  readonly keys: KeySpace;
  readonly strict: boolean;
  readonly cluster: boolean;
  /** The pending index is kept (by the strict scripts themselves, else by one ZADD per batch). */
  readonly index: boolean;
  readonly ttlMs: number;
  readonly maxKeysPerCall: number;
  /** Hash slots by Redis key name (cluster clients only). */
  readonly slots: BoundedCache<number>;
  script(name: string): LoadedScript;
}

export function slotCache(size: number): BoundedCache<number> {
  return new BoundedCache<number>(size);
}

function slotOf(ctx: ApplyKeysContext, name: string): number {
  let slot = ctx.slots.get(name);
  if (slot === undefined) {
    slot = keySlot(name);
    ctx.slots.set(name, slot);
  }
  return slot;
}

/** Applies the batch; returns the indexes of the keys with a CONFLICT (none outside compare-and-set). */
export async function applyKeys(
  ctx: ApplyKeysContext,
  batch: KeyBatch,
  into: BatchResults,
): Promise<number[]> {
  const size = batch.size;
  if (size === 0) return [];
  const selfIndex = ctx.strict && ctx.index;
  const header = batch.header(ctx.ttlMs, selfIndex);
  const conflicts: number[] = [];
  const calls: Promise<unknown>[] = [];
  const one = ctx.script(ctx.strict ? 'applyRecordsStrict' : 'applyRecords');
  const many = ctx.script(ctx.strict ? 'applyManyStrict' : 'applyMany');
  const partKeys = ctx.strict
    ? [ctx.keys.epoch(batch.topic, batch.partition), ctx.keys.pendingIndex(batch.topic, batch.partition)]
    : [];
  const send = (members: readonly number[], alone: boolean) => {
    const args = header.slice();
    const names: string[] = partKeys.slice();
    for (const k of members) {
      names.push(batch.names[k] as string);
      const end = batch.argEnd(k);
      for (let a = batch.argStart[k] as number; a < end; a++) args.push(batch.args[a] as RedisArg);
    }
    if (alone) {
      const k = members[0] as number;
      // applyRecordsStrict takes the state key first, then the partition's epoch and pending index
      const keys = ctx.strict ? [names[2] as string, ...partKeys] : names;
      calls.push(
        runScript(ctx.redis, one, keys, args).then((r) => {
          if (decodeKey(batch, k, r, into)) conflicts.push(k);
        }),
      );
      return;
    }
    calls.push(
      runScript(ctx.redis, many, names, args).then((r) => {
        if (!Array.isArray(r))
          throw new RedfenceError(
            'RF_BAD_REPLY',
            `applyMany replied with ${typeof r} for ${members.length} keys`,
          );
        // the keys' parts one after another
        let at = 0;
        for (let m = 0; m < members.length; m++) {
          at = decodeKeyAt(batch, members[m] as number, r, at, into);
          if (at < 0) {
            at = ~at;
            conflicts.push(members[m] as number);
          }
        }
        if (at !== r.length)
          throw new RedfenceError(
            'RF_BAD_REPLY',
            `applyMany replied with ${r.length - at} entries beyond its ${members.length} keys`,
          );
      }),
    );
  };

  if (!ctx.cluster) {
    // one group: the whole partition batch (a last chunk of one key still takes the many-key script)
    for (let from = 0; from < size; from += ctx.maxKeysPerCall) {
      const members: number[] = [];
      for (let k = from; k < size && k < from + ctx.maxKeysPerCall; k++) members.push(k);
      send(members, size === 1);
    }
  } else {
    const groups = new Map<number, number[]>();
    for (let k = 0; k < size; k++) {
      const slot = slotOf(ctx, batch.names[k] as string);
      const list = groups.get(slot);
      if (list === undefined) groups.set(slot, [k]);
      else list.push(k);
    }
    for (const list of groups.values())
      for (let from = 0; from < list.length; from += ctx.maxKeysPerCall)
        send(
          list.length <= ctx.maxKeysPerCall ? list : list.slice(from, from + ctx.maxKeysPerCall),
          list.length === 1,
        );
  }

  if (ctx.index && !selfIndex) {
    const members: RedisArg[] = [];
    for (let k = 0; k < size; k++) {
      const top = batch.topOutput[k] as number;
      if (top >= 0) members.push(top, batch.names[k] as string);
    }
    if (members.length > 0) {
      const idx = ctx.keys.pendingIndex(batch.topic, batch.partition);
      calls.push(
        ctx.redis.zadd(idx, 'GT', ...members).catch((err: unknown) => {
          throw wrapRedisError('ZADD pending index', err);
        }),
      );
    }
  }
  await Promise.all(calls);
  return conflicts;
}
