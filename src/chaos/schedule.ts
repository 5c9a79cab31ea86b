/**
 * The fault schedule: a pure function of the seed and the options. Each fault gets a start time (a
 * fraction of the production window) and its own random draws (which instance, how long), so the same
 * seed gives the same faults in the same order with the same parameters. The harness runs them one after
 * another: a fault starts at its time or when the previous one has finished, whichever is later.
 */
import type { ProcessingMode } from '../processor/options.js';
import { Rng } from './rng.js';

export const EXACTLY_ONCE_POINTS = ['after-redis-write', 'in-transaction', 'after-commit'] as const;
export const AT_LEAST_ONCE_POINTS = [
  'after-redis-write',
  'after-produce',
  'after-delivery',
  'after-commit',
] as const;
export const ALL_POINTS = [
  'after-redis-write',
  'after-produce',
  'after-delivery',
  'in-transaction',
  'after-commit',
] as const;
export type CrashPointName = (typeof ALL_POINTS)[number];

export type FaultKind = 'crash' | 'kill' | 'zombie' | 'redis-restart' | 'redis-failover' | 'scale' | 'repair';
export const FAULT_KINDS: readonly FaultKind[] = [
  'crash',
  'kill',
  'zombie',
  'redis-restart',
  'redis-failover',
  'scale',
  'repair',
];

export interface Fault {
  index: number;
  kind: FaultKind;
  /** Fraction of the production window at which it is due. */
  at: number;
  /** crash: the point, and after how many passes the child kills itself. */
  point?: CrashPointName;
  after?: number;
  /** scale: the instance count to reach. */
  to?: number;
  /** Picks the target among the live instances (modulo their count); repair: among the coldest keys. */
  pick: number;
  /** kill: ms before the restart; zombie: ms kept stopped after its partitions moved; redis: ms down. */
  pauseMs: number;
}

export interface ScheduleOptions {
  seed: number;
  mode: ProcessingMode;
  kills: number;
  crashes: number;
  /** Crash points to cycle through (default: every point the mode reaches). */
  points?: readonly CrashPointName[];
  zombies: number;
  redisRestarts: number;
  redisFailovers: number;
  /** Drift a few keys, then reconcile --repair them while the instances run (src/chaos/repair.ts). */
  repairs?: number;
  /** Instance counts: the first is the start, each later one a scale fault. */
  scale: readonly number[];
  /** How long a Redis restart keeps Redis down: [min, max] ms. Default [2000, 14000]. */
  redisDownMs?: readonly [number, number];
}

export function pointsFor(mode: ScheduleOptions['mode']): readonly CrashPointName[] {
  return mode === 'exactly-once' ? EXACTLY_ONCE_POINTS : AT_LEAST_ONCE_POINTS;
}

export function makeSchedule(o: ScheduleOptions): Fault[] {
  const rng = new Rng(o.seed, 'faults');
  const points = rng.shuffle([...(o.points ?? pointsFor(o.mode))]);
  const faults: Omit<Fault, 'index'>[] = [];
  const base = () => ({ at: 0.03 + rng.next() * 0.9, pick: rng.nextU32(), pauseMs: 0 });
  for (let i = 0; i < o.crashes; i++)
    // crash points are reached only by batches: keep them in the first 60% of the window, while input flows
    faults.push({
      ...base(),
      kind: 'crash',
      point: points[i % points.length],
      after: rng.range(1, 4),
      at: 0.03 + rng.next() * 0.57,
    });
  for (let i = 0; i < o.kills; i++) faults.push({ ...base(), kind: 'kill', pauseMs: rng.range(0, 1500) });
  for (let i = 0; i < o.zombies; i++)
    faults.push({ ...base(), kind: 'zombie', pauseMs: rng.range(500, 3000) });
  for (let i = 0; i < o.redisRestarts; i++)
    faults.push({
      ...base(),
      kind: 'redis-restart',
      pauseMs: rng.range(...(o.redisDownMs ?? [2000, 14_000])),
    });
  for (let i = 0; i < o.redisFailovers; i++)
    faults.push({ ...base(), kind: 'redis-failover', pauseMs: rng.range(0, 500) });
  for (let i = 0; i < (o.repairs ?? 0); i++)
    // while input flows, so owners write the repaired keys again (their cached tokens must CONFLICT)
    faults.push({ ...base(), kind: 'repair', at: 0.05 + rng.next() * 0.5 });
  const steps = o.scale.slice(1);
  steps.forEach((to, i) => {
    const slot = (i + 0.5) / steps.length;
    faults.push({ ...base(), kind: 'scale', to, at: 0.05 + 0.85 * slot + (rng.next() - 0.5) * 0.1 });
  });
  faults.sort((a, b) => a.at - b.at);
  return faults.map((f, index) => ({ ...f, index }));
}
