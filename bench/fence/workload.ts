/**
 * The workload: numeric `add` records (per-customer totals) over K keys and P partitions, cut into
 * calls of exactly `perCall` consecutive records of one key, and the calls into waves of `window`
 * calls. Key of call c is c mod K (round robin, so a wave never holds a key twice), partition of key
 * k is k mod P, offsets increase per partition. Every call of a wave carries the partition's offset
 * at the start of the wave as committed offset: what came before the wave is committed.
 * Deterministic for a given seed.
 */
import { readFileSync } from 'node:fs';

/** The seed sketch (test fixture): one record per call, the client sends the new value. */
export const SEED_SOURCE = readFileSync(
  new URL('../../test/fence/fixtures/seed-sketch.lua', import.meta.url),
  'utf8',
);

export interface Call {
  readonly key: number;
  readonly partition: number;
  readonly committed: number;
  readonly offsets: readonly number[];
  readonly amounts: readonly number[];
}

export interface WorkloadOptions {
  readonly records: number;
  readonly keys: number;
  readonly perCall: number;
  readonly partitions: number;
  readonly window: number;
}

/** mulberry32: a small deterministic PRNG. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Waves of calls; `next` (next offset per partition) is advanced, so a second call continues the
 * offsets of the first (pre-population, then the measured run).
 */
export function makeWaves(o: WorkloadOptions, next: number[], rand: () => number): Call[][] {
  const calls = Math.floor(o.records / o.perCall);
  const waves: Call[][] = [];
  for (let start = 0; start < calls; start += o.window) {
    const committed = next.slice();
    const wave: Call[] = [];
    for (let c = start; c < Math.min(calls, start + o.window); c++) {
      const key = c % o.keys;
      const partition = key % o.partitions;
      const offsets: number[] = [];
      const amounts: number[] = [];
      for (let i = 0; i < o.perCall; i++) {
        offsets.push(next[partition] ?? 0);
        next[partition] = (next[partition] ?? 0) + 1;
        amounts.push(1 + Math.floor(rand() * 1000));
      }
      wave.push({ key, partition, committed: committed[partition] ?? 0, offsets, amounts });
    }
    waves.push(wave);
  }
  return waves;
}

/** Adds the waves' amounts into `totals` (per key index). */
export function addTotals(waves: readonly Call[][], totals: number[]): void {
  for (const wave of waves)
    for (const call of wave) for (const a of call.amounts) totals[call.key] = (totals[call.key] ?? 0) + a;
}

export function keyName(i: number): string {
  return `c-${i}`;
}
