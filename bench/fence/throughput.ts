/**
 * One throughput measurement: FLUSHALL, pre-populate every key (one record each, not measured),
 * reset INFO commandstats, then run the measured waves either one call at a time (each awaited)
 * or a whole wave of calls in flight (auto-pipelined client), and verify the final totals.
 */
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { type ApplyRequest, Fence } from '../../src/index.js';
import { type CommandStat, commandStats, serverCpuUs } from './stats.js';
import {
  addTotals,
  type Call,
  keyName,
  makeWaves,
  prng,
  SEED_SOURCE,
  type WorkloadOptions,
} from './workload.js';

export type Approach = 'seed' | 'apply' | 'applyBatch';

export interface Config {
  readonly approach: Approach;
  readonly perCall: number;
  readonly pipelined: boolean;
}

export interface Measurement {
  readonly records: number;
  readonly calls: number;
  readonly wallMs: number;
  readonly recordsPerSec: number;
  readonly redisCpuUsPerRecord: number;
  /** usec of the top-level commands (EVALSHA, EVAL, ZADD) from INFO commandstats, per record. */
  readonly commandUsPerRecord: number;
  readonly clientCpuUsPerRecord: number;
  readonly commandstats: Record<string, CommandStat>;
}

export interface Clients {
  /** INFO, FLUSHALL, verification: never measured. */
  readonly admin: Redis;
  /** Not pipelined: each call awaited in turn. */
  readonly plain: Redis;
  /** `enableAutoPipelining: true`. */
  readonly piped: Redis;
}

const TOPIC = 'orders';
const TOP_LEVEL = ['evalsha', 'eval', 'zadd'];

/** Executes one call; resolves to the number of records whose verdict was not APPLY. */
type CallFn = (call: Call) => Promise<number>;

interface Driver {
  readonly one: CallFn;
  /** Runs a whole wave at once (defaults to one `one` per call, all in flight). */
  readonly wave?: (calls: readonly Call[]) => Promise<number>;
  /** The stored total of a key. */
  readonly total: (key: number) => Promise<number>;
  /** Builds the calls' requests ahead of the timed run, so the harness's own work is not measured. */
  readonly prepare?: (waves: readonly Call[][]) => void;
}

async function seedDriver(client: Redis, admin: Redis, o: WorkloadOptions): Promise<Driver> {
  const sha = String(await admin.script('LOAD', SEED_SOURCE));
  const epochKeys: string[] = [];
  for (let p = 0; p < o.partitions; p++) {
    epochKeys.push(`seed:{bench:${TOPIC}:${p}}:epoch`);
    await admin.set(epochKeys[p] as string, '1');
  }
  const stateKey = (k: number): string => `seed:{bench:${keyName(k)}}`;
  const running: number[] = [];
  const one: CallFn = async (c) => {
    let bad = 0;
    for (let i = 0; i < c.offsets.length; i++) {
      const total = (running[c.key] ?? 0) + (c.amounts[i] as number);
      running[c.key] = total;
      const reply = await client.evalsha(
        sha,
        2,
        stateKey(c.key),
        epochKeys[c.partition] as string,
        c.partition,
        c.offsets[i] as number,
        1,
        total,
      );
      if (!Array.isArray(reply) || reply[0] !== 'APPLY') bad++;
    }
    return bad;
  };
  const total = async (k: number): Promise<number> => Number(await admin.hget(stateKey(k), 'value'));
  return { one, total };
}

/** The ApplyRequest of a call: `add` records, each with output 'state'. */
export function request(c: Call, epoch: number): ApplyRequest {
  return {
    topic: TOPIC,
    partition: c.partition,
    epoch,
    committedOffset: c.committed,
    key: keyName(c.key),
    records: c.offsets.map((offset, i) => ({
      offset,
      operation: { op: 'add', by: c.amounts[i] as number },
      output: 'state',
    })),
  };
}

async function fenceDriver(
  client: Redis,
  admin: Redis,
  o: WorkloadOptions,
  store: string,
  pendingIndex: boolean,
): Promise<Driver> {
  const fence = new Fence({ redis: client, store, mode: 'strict', pendingIndex });
  const epochs: number[] = [];
  for (let p = 0; p < o.partitions; p++) epochs.push(await fence.acquireEpoch(TOPIC, p));
  const reader = new Fence({ redis: admin, store, mode: 'strict' });
  const notApplied = (results: readonly { verdict: string }[]): number =>
    results.reduce((n, r) => n + (r.verdict === 'APPLY' ? 0 : 1), 0);
  const built = new Map<Call, ApplyRequest>();
  const req = (c: Call): ApplyRequest => built.get(c) ?? request(c, epochs[c.partition] ?? 0);
  return {
    one: async (c) => notApplied(await fence.apply(req(c))),
    wave: async (calls) => {
      const all = await fence.applyBatch(calls.map(req));
      return all.reduce((n, r) => n + notApplied(r), 0);
    },
    prepare: (waves) => {
      for (const w of waves) for (const c of w) built.set(c, request(c, epochs[c.partition] ?? 0));
    },
    total: async (k) => Number((await reader.read(keyName(k)))?.value?.toString('utf8')),
  };
}

async function runWaves(d: Driver, waves: readonly Call[][], pipelined: boolean, batch: boolean) {
  let bad = 0;
  for (const wave of waves) {
    if (!pipelined) {
      for (const c of wave) bad += await d.one(c);
    } else if (batch && d.wave) {
      bad += await d.wave(wave);
    } else {
      const counts = await Promise.all(wave.map(d.one));
      for (const n of counts) bad += n;
    }
  }
  return bad;
}

export async function measure(
  clients: Clients,
  cfg: Config,
  o: Omit<WorkloadOptions, 'perCall'> & { readonly pendingIndex: boolean },
  run: number,
): Promise<Measurement> {
  const { admin } = clients;
  await admin.flushall('SYNC');
  const client = cfg.pipelined ? clients.piped : clients.plain;
  const wl = { ...o, perCall: cfg.perCall };
  const driver =
    cfg.approach === 'seed'
      ? await seedDriver(client, admin, wl)
      : await fenceDriver(
          client,
          admin,
          wl,
          `b${run}-${cfg.approach}-${cfg.perCall}-${cfg.pipelined ? 'p' : 's'}`,
          o.pendingIndex,
        );

  const rand = prng(42);
  const next: number[] = new Array<number>(o.partitions).fill(0);
  const prepop = makeWaves({ ...wl, records: o.keys, perCall: 1 }, next, rand);
  const waves = makeWaves(wl, next, rand);
  const totals: number[] = [];
  addTotals(prepop, totals);
  addTotals(waves, totals);

  if ((await runWaves(driver, prepop, true, false)) !== 0) throw new Error('pre-population: not APPLY');

  driver.prepare?.(waves);
  const records = waves.reduce((n, w) => n + w.reduce((m, c) => m + c.offsets.length, 0), 0);
  const calls = waves.reduce((n, w) => n + w.length, 0);
  await admin.config('RESETSTAT');
  const cpu0 = await serverCpuUs(admin);
  const client0 = process.cpuUsage();
  const t0 = performance.now();
  const bad = await runWaves(driver, waves, cfg.pipelined, cfg.approach === 'applyBatch');
  const wallMs = performance.now() - t0;
  const client1 = process.cpuUsage(client0);
  const cpu1 = await serverCpuUs(admin);
  const stats = await commandStats(admin);
  if (bad !== 0) throw new Error(`${bad} records were not APPLY`);

  for (let k = 0; k < o.keys; k += Math.max(1, Math.floor(o.keys / 200))) {
    const got = await driver.total(k);
    if (got !== (totals[k] ?? 0)) throw new Error(`key ${k}: stored total ${got}, expected ${totals[k]}`);
  }

  const topUs = TOP_LEVEL.reduce((n, c) => n + (stats[c]?.usec ?? 0), 0);
  return {
    records,
    calls,
    wallMs,
    recordsPerSec: (records / wallMs) * 1000,
    redisCpuUsPerRecord: (cpu1 - cpu0) / records,
    commandUsPerRecord: topUs / records,
    clientCpuUsPerRecord: (client1.user + client1.system) / records,
    commandstats: stats,
  };
}
