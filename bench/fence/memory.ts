/**
 * Redis memory per key for K keys in a few states: MEMORY USAGE (SAMPLES 0) averaged over a sample of
 * state keys, and the INFO used_memory delta (state keys, keyspace overhead and pending index; client
 * buffers excluded) / K.
 */
import type { Redis } from 'ioredis';
import { type ApplyRequest, Fence, type OutputSpec } from '../../src/index.js';
import { usedMemory } from './stats.js';
import { keyName, SEED_SOURCE } from './workload.js';

export interface MemoryResult {
  readonly state: string;
  readonly keys: number;
  readonly memoryUsageBytesPerKey: number;
  readonly usedMemoryDeltaBytesPerKey: number;
  readonly pendingIndexBytesPerKey: number;
  readonly encoding: string;
}

const TOPIC = 'orders';
const OUTPUT_BYTES = 100;

function output(key: number, offset: number): OutputSpec {
  return { value: `{"customer":"${keyName(key)}","offset":${offset}}`.padEnd(OUTPUT_BYTES, ' ') };
}

interface State {
  readonly name: string;
  /** Writes every key; `key(i)` is the Redis key of key i, `indexes` the pending index keys. */
  fill(
    admin: Redis,
    piped: Redis,
    keys: number,
    partitions: number,
  ): Promise<{ key(i: number): string; indexes: string[] }>;
}

async function inWaves(n: number, f: (i: number) => Promise<unknown>, wave = 256): Promise<void> {
  for (let s = 0; s < n; s += wave) {
    const batch: Promise<unknown>[] = [];
    for (let i = s; i < Math.min(n, s + wave); i++) batch.push(f(i));
    await Promise.all(batch);
  }
}

/** A fence state: `recordsPerKey` add records per key in one call, each with `out` as output. */
function fenceState(
  name: string,
  recordsPerKey: number,
  out: ((key: number, offset: number) => OutputSpec) | undefined,
  sweep: boolean,
): State {
  return {
    name,
    async fill(_admin, piped, keys, partitions) {
      const fence = new Fence({ redis: piped, store: 'bench', mode: 'strict' });
      const epochs: number[] = [];
      for (let p = 0; p < partitions; p++) epochs.push(await fence.acquireEpoch(TOPIC, p));
      const next = new Array<number>(partitions).fill(0);
      const reqs: ApplyRequest[] = [];
      for (let k = 0; k < keys; k++) {
        const partition = k % partitions;
        const records = [];
        for (let r = 0; r < recordsPerKey; r++) {
          const offset = next[partition] ?? 0;
          next[partition] = offset + 1;
          const o = out?.(k, offset);
          records.push({
            offset,
            operation: { op: 'add' as const, by: 100 + r },
            ...(o ? { output: o } : {}),
          });
        }
        reqs.push({
          topic: TOPIC,
          partition,
          epoch: epochs[partition] ?? 0,
          committedOffset: -1,
          key: keyName(k),
          records,
        });
      }
      for (let s = 0; s < reqs.length; s += 256) await fence.applyBatch(reqs.slice(s, s + 256));
      if (sweep) {
        for (let p = 0; p < partitions; p++) {
          while ((await fence.sweep(TOPIC, p, next[p] ?? 0, 1000)).more) {}
        }
      }
      const indexes: string[] = [];
      for (let p = 0; p < partitions; p++) indexes.push(fence.keys.pendingIndex(TOPIC, p));
      return { key: (i) => fence.keys.state(keyName(i)), indexes };
    },
  };
}

export const STATES: readonly State[] = [
  {
    name: 'seed sketch (value, offset, partition)',
    async fill(admin, piped, keys, partitions) {
      // 'sk:' is as long as the library's 'rf:' prefix, so key names cost the same.
      const key = (i: number): string => `sk:{bench:${keyName(i)}}`;
      const epoch = (p: number): string => `sk:{bench:${TOPIC}:${p}}:epoch`;
      for (let p = 0; p < partitions; p++) await admin.set(epoch(p), '1');
      const sha = String(await admin.script('LOAD', SEED_SOURCE));
      const p = (i: number): number => i % partitions;
      await inWaves(keys, (i) =>
        piped.evalsha(sha, 2, key(i), epoch(p(i)), p(i), Math.floor(i / partitions), 1, 100),
      );
      return { key, indexes: [] };
    },
  },
  fenceState("(i) no pending output (output 'state' swept)", 1, () => 'state', true),
  fenceState('(i-b) no pending output (100-byte output swept)', 1, output, true),
  fenceState("(ii') 1 pending output 'state' (small number)", 1, () => 'state', false),
  fenceState('(ii) 1 pending output of 100 bytes', 1, output, false),
  fenceState('(iii) 10 pending outputs of 100 bytes', 10, output, false),
];

export async function measureMemory(
  admin: Redis,
  piped: Redis,
  state: State,
  keys: number,
  partitions: number,
): Promise<MemoryResult> {
  await admin.flushall('SYNC');
  const before = await usedMemory(admin);
  const { key, indexes } = await state.fill(admin, piped, keys, partitions);
  const after = await usedMemory(admin);
  const step = Math.max(1, Math.floor(keys / 1000));
  let sum = 0;
  let n = 0;
  for (let i = 0; i < keys; i += step) {
    sum += Number(await admin.memory('USAGE', key(i), 'SAMPLES', 0));
    n++;
  }
  let index = 0;
  for (const k of indexes) index += Number((await admin.memory('USAGE', k, 'SAMPLES', 0)) ?? 0);
  return {
    state: state.name,
    keys,
    memoryUsageBytesPerKey: sum / n,
    usedMemoryDeltaBytesPerKey: (after - before) / keys,
    pendingIndexBytesPerKey: index / keys,
    encoding: String(await admin.object('ENCODING', key(0))),
  };
}
