/**
 * The processor's hot path without Kafka or Redis: synthetic partition batches (BENCH_BATCH records,
 * default 500, over BENCH_KEYS keys, default 10,000, JSON values of ~100 bytes) through the real stages
 * plan -> apply (preparation + encoding, the fence's script call, reply decoding) -> emit, and the CPU
 * time each stage costs per record (process.cpuUsage, user + system), the median of BENCH_REPS runs.
 *
 * The Redis port is a stand-in: the first run computes each call's reply from its arguments (every
 * record APPLY, a `state` output per record, as a fresh key answers) and later runs replay them in call
 * order, so its own cost stays out of the figures. It measures CPU, never a guarantee: the fence and
 * processor tests run against a real Redis.
 *
 *   node --import tsx bench/hot-path/run.ts            # BENCH_REPS=9 BENCH_BATCHES=40 BENCH_MODE=strict|cluster
 *   BENCH_DIST=1 node --import tsx bench/hot-path/run.ts   # the built dist/ instead of src/
 */
import type { ProcessorDefinition } from '../../src/definition/definition.js';
import type { InRecord } from '../../src/kafka/types.js';

// BENCH_DIST=1: the built package (npm run build), as users run it; else the sources through tsx
const root = process.env.BENCH_DIST ? '../../dist' : '../../src';
const load = <T>(path: string): Promise<T> => import(`${root}/${path}`) as Promise<T>;
const { Fence } = await load<typeof import('../../src/fence/index.js')>('fence/index.js');
const { partitionFor } = await load<typeof import('../../src/partitioner/index.js')>('partitioner/index.js');
const { applyAll } = await load<typeof import('../../src/processor/apply.js')>('processor/apply.js');
const { Counts } = await load<typeof import('../../src/processor/counts.js')>('processor/counts.js');
const { emit } = await load<typeof import('../../src/processor/emit.js')>('processor/emit.js');
const { jsonDecode, plan } = await load<typeof import('../../src/processor/plan.js')>('processor/plan.js');
const { userCaller } =
  await load<typeof import('../../src/processor/user-call.js')>('processor/user-call.js');
const { silentLogger } = await load<typeof import('../../src/runtime/logger.js')>('runtime/logger.js');

const env = (name: string, d: number) => Number(process.env[name] ?? d);
const BATCH = env('BENCH_BATCH', 500);
const KEYS = env('BENCH_KEYS', 10_000);
const BATCHES = env('BENCH_BATCHES', 40);
const REPS = env('BENCH_REPS', 9);
const MODE = process.env.BENCH_MODE === 'cluster' ? 'cluster' : 'strict';
const PARTITIONS = 6;
const TOPIC = 'hot-path-orders';

// a fixed pseudo-random sequence (mulberry32), so every run sees the same batches
let seed = 0x2f6b1d;
function random(): number {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

// keys that murmur2 places on partition 0 of PARTITIONS, as the producer would
const keys: Buffer[] = [];
for (let i = 0; keys.length < KEYS; i++) {
  const k = Buffer.from(`customer-${i}`);
  if (partitionFor(k, PARTITIONS) === 0) keys.push(k);
}

const batches: InRecord[][] = [];
let offset = 0;
for (let b = 0; b < BATCHES; b++) {
  const records: InRecord[] = [];
  for (let i = 0; i < BATCH; i++, offset++) {
    const key = keys[Math.floor(random() * KEYS)] as Buffer;
    const value = JSON.stringify({
      orderId: `o-${offset}`,
      customer: key.toString(),
      amount: 1 + Math.floor(random() * 500),
      currency: 'EUR',
      at: 1_780_000_000_000 + offset,
    });
    records.push({
      topic: TOPIC,
      partition: 0,
      offset: String(offset),
      key,
      value: Buffer.from(value),
      headers: {},
      timestamp: String(1_780_000_000_000 + offset),
    });
  }
  batches.push(records);
}

/** The stand-in Redis: computed replies on the first run, replayed in call order after it. */
const replies: unknown[] = [];
let call = 0;
let lastCall = process.cpuUsage();
let marked = false;
/**
 * The end of the encoding: the first call of a batch queues a microtask, which runs once the batch's
 * calls are all issued (they are issued in one synchronous run) and before any reply is decoded. One
 * cpuUsage per batch, not one per call, so the stand-in's own cost stays out of the figures.
 */
function mark(): void {
  if (marked) return;
  marked = true;
  queueMicrotask(() => {
    lastCall = process.cpuUsage();
  });
}
function reply(numKeys: number, args: unknown[]): unknown {
  const a = args.slice(numKeys);
  const perKey: unknown[] = [];
  let i = 6;
  while (i < a.length) {
    const n = Number(String(a[i]));
    const spec = String(a[i + 1]);
    let extras = 0;
    let payloads: Buffer[] = [];
    for (const rec of spec.split(';').filter(Boolean)) {
      const [, opMode] = rec.split(',');
      const op = opMode?.[0];
      const mode = opMode?.[1];
      if (op === 's') extras++;
      if (op === 'c') extras += 2;
      if (mode === '1') extras++;
      if (mode === '2') payloads.push(Buffer.from(`o${Math.floor(random() * 100_000)}`));
    }
    perKey.push([Buffer.from('A'.repeat(n)), -1, -1, ...payloads]);
    payloads = [];
    i += 2 + extras;
  }
  const stateKeys = MODE === 'strict' ? numKeys - 2 : numKeys;
  return stateKeys === 1 && perKey.length === 1 && !(MODE === 'strict' && numKeys > 3) ? perKey[0] : perKey;
}
const redis = {
  isCluster: MODE === 'cluster',
  async evalshaBuffer(_sha: string, numKeys: number, ...args: unknown[]): Promise<unknown> {
    mark();
    if (call >= replies.length) replies.push(reply(numKeys, args));
    return replies[call++];
  },
  async evalBuffer(): Promise<unknown> {
    throw new Error('not used');
  },
  async hgetallBuffer(): Promise<Record<string, Buffer>> {
    return {};
  },
  async zadd(): Promise<unknown> {
    mark();
    return 0;
  },
  async zrangeBuffer(): Promise<Buffer[]> {
    return [];
  },
};

const definition = {
  name: 'hot-path',
  input: TOPIC,
  output: 'hot-path-totals',
  operation: (order: { amount: number }) => ({ op: 'add', by: order.amount }),
} as unknown as ProcessorDefinition<unknown, unknown>;
const fence = new Fence({ redis, store: 'hot-path', mode: MODE });
const signal = new AbortController().signal;
const callUser = userCaller(0, signal);
const planCtx = { decode: jsonDecode, partitionCount: PARTITIONS, partitionCounts: [PARTITIONS], callUser };
const applyCtx = {
  definition,
  fence,
  redisStep: <T>(_w: string, fn: () => Promise<T>) => fn(),
  callUser,
  signal,
};
const emitCtx = {
  outputTopic: 'hot-path-totals',
  deadLetterTopic: 'hot-path-dlq',
  groupId: 'hot-path',
  metrics: undefined,
  counts: new Counts(),
  log: silentLogger,
};

const us = (a: NodeJS.CpuUsage, b: NodeJS.CpuUsage) => b.user - a.user + (b.system - a.system);
type Stage = 'plan' | 'encode' | 'decode' | 'emit';
const STAGES: Stage[] = ['plan', 'encode', 'decode', 'emit'];

async function runOnce(): Promise<Record<Stage, number>> {
  call = 0;
  const sum: Record<Stage, number> = { plan: 0, encode: 0, decode: 0, emit: 0 };
  let outputs = 0;
  for (const records of batches) {
    const first = Number(records[0]?.offset);
    const t0 = process.cpuUsage();
    const planned = await plan(planCtx, TOPIC, 0, records);
    const t1 = process.cpuUsage();
    marked = false;
    const applied = await applyAll(
      applyCtx,
      { topic: TOPIC, partition: 0, epoch: 1, committed: first },
      planned,
    );
    const t2 = process.cpuUsage();
    if (applied.results === 'FENCED') throw new Error('fenced');
    const out = emit(emitCtx, TOPIC, 0, planned, applied as Parameters<typeof emit>[4]);
    const t3 = process.cpuUsage();
    outputs += out.length;
    sum.plan += us(t0, t1);
    sum.encode += us(t1, lastCall);
    sum.decode += us(lastCall, t2);
    sum.emit += us(t2, t3);
  }
  if (outputs !== BATCH * BATCHES) throw new Error(`expected ${BATCH * BATCHES} outputs, got ${outputs}`);
  const n = BATCH * BATCHES;
  return { plan: sum.plan / n, encode: sum.encode / n, decode: sum.decode / n, emit: sum.emit / n };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
};

for (let w = 0; w < 3; w++) await runOnce(); // warm-up: replies computed, code optimized
const runs: Record<Stage, number>[] = [];
for (let r = 0; r < REPS; r++) runs.push(await runOnce());
const result: Record<string, number> = {};
for (const s of STAGES) result[s] = median(runs.map((x) => x[s]));
result.total = median(runs.map((x) => x.plan + x.encode + x.decode + x.emit));
const line = STAGES.map((s) => `${s} ${(result[s] as number).toFixed(2)}`).join('  ');
console.log(
  `hot path, ${MODE}, ${process.env.BENCH_DIST ? 'dist' : 'src'}, ${BATCH}-record batches, ${KEYS} keys, median of ${REPS}: µs CPU per record: ${line}  total ${(result.total as number).toFixed(2)}`,
);
if (process.env.BENCH_JSON)
  console.log(
    JSON.stringify({
      mode: MODE,
      dist: Boolean(process.env.BENCH_DIST),
      batch: BATCH,
      keys: KEYS,
      reps: REPS,
      ...result,
    }),
  );
