/**
 * The topology executor's key calls captured once, then replayed on any Redis: what the key-call
 * script costs per record, with the same calls for every script version (instructions counted by
 * callgrind inside EVALSHA do not move with the machine's load, as CPU time does).
 *
 * Capture (a Redis of your own, flushed: the executor runs bench/topology's orders, one partition,
 * batches of BENCH_BATCH, and every KeyStore.callMany's calls are saved, in order):
 *
 *   BENCH_RECORDS=5000 BENCH_KEYS=500 BENCH_TOPOLOGY=windowed-count REDIS_URL=redis://127.0.0.1:16601 \
 *     node --import tsx bench/store/replay.ts capture /tmp/calls-windowed-count.json
 *
 * Replay (on a fresh Redis under callgrind, one per script version; the scripts are loaded first, so
 * every key call runs as EVALSHA; it prints the records, the script calls and a digest of every reply:
 * equal digests, equal replies):
 *
 *   valgrind --tool=callgrind --toggle-collect=evalShaCommand --callgrind-out-file=/tmp/cg.out \
 *     redis-server --port 16601 --save '' --appendonly no &
 *   REDIS_URL=redis://127.0.0.1:16601 node --import tsx bench/store/replay.ts replay /tmp/calls-windowed-count.json
 *   redis-cli -p 16601 shutdown nosave; callgrind_annotate /tmp/cg.out | grep 'PROGRAM TOTALS'
 *
 * Instructions per record = the total / the records printed. BENCH_FROM=<path of a src/ folder>
 * replays with another version's store (codec and scripts: e.g. an older commit's src/ written out with
 * `git archive <commit> src | tar -x -C <dir>` inside this repository, so its imports resolve).
 */
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import type * as Api from '../../src/index.js';
import type * as Store from '../../src/store/index.js';
import type { ModelInput } from '../../src/topology/model.js';
import type * as Exec from '../../src/topology/run/executor.js';
import { envInt, orderMaker } from '../processor/kafka.js';

const [mode, file] = process.argv.slice(2);
if ((mode !== 'capture' && mode !== 'replay') || file === undefined) {
  console.error('usage: replay.ts capture|replay <file>');
  process.exit(2);
}
const from = process.env.BENCH_FROM ?? '../../src';
const { KeyStore, STORE_LUA_DIR }: typeof Store = await import(`${from}/store/index.js`);
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:16379');

/** JSON with Buffers (and Uint8Arrays) and bigints kept. */
function replacer(this: unknown, _k: string, v: unknown): unknown {
  if (typeof v === 'bigint') return { $n: v.toString() };
  if (v instanceof Uint8Array) return { $b: Buffer.from(v).toString('base64') };
  if (v !== null && typeof v === 'object' && (v as { type?: unknown }).type === 'Buffer')
    return { $b: Buffer.from((v as { data: number[] }).data).toString('base64') };
  return v;
}
function reviver(_k: string, v: unknown): unknown {
  if (v !== null && typeof v === 'object') {
    if ('$n' in v) return BigInt((v as { $n: string }).$n);
    if ('$b' in v) return Buffer.from((v as { $b: string }).$b, 'base64');
  }
  return v;
}

interface Captured {
  readonly app: string;
  readonly calls: unknown[];
}

async function capture(path: string): Promise<void> {
  const { serdes, TimeWindows, topology }: typeof Api = await import(`${from}/index.js`);
  const { TopologyExecutor }: typeof Exec = await import(`${from}/topology/run/executor.js`);
  const records = envInt('BENCH_RECORDS', 5_000);
  const batch = envInt('BENCH_BATCH', 500);
  const spanMs = envInt('BENCH_SPAN_MS', 900_000);
  const shape = process.env.BENCH_TOPOLOGY ?? 'windowed-count';
  const orders = orderMaker(envInt('BENCH_KEYS', 500));
  const t0 = Math.floor((Date.now() - spanMs - 3_600_000) / 3_600_000) * 3_600_000;
  const inputs: ModelInput[] = [];
  for (let i = 0; i < records; i++) {
    const o = orders(i);
    inputs.push({
      topic: 'orders',
      partition: 0,
      offset: i,
      key: Buffer.from(o.key),
      value: Buffer.from(o.value),
      timestamp: t0 + Math.floor((i * spanMs) / records),
    });
  }
  // bench/topology/executor.ts's windowed count and fraud topologies
  const app = `bench-replay-${Date.now().toString(36)}`;
  const t = topology({ applicationId: app });
  let s = t.stream<string, { amount: number }>('orders', { key: serdes.string() });
  if (shape === 'fraud') s = s.filter((_c, o) => o.amount > 50);
  let counts = s
    .groupByKey()
    .windowedBy(TimeWindows.ofSizeAndGrace(shape === 'fraud' ? 300_000 : 60_000, 60_000))
    .count({ name: 'counts' })
    .toStream();
  if (shape === 'fraud') counts = counts.filter((_w, n) => n > 10);
  counts
    .map((w, n) => [w.key, { start: w.start, end: w.end, count: n }] as const)
    .to('out', { key: serdes.string() });
  const saved: Captured[] = [];
  const callMany = KeyStore.prototype.callMany;
  KeyStore.prototype.callMany = function (this: Store.KeyStore, calls) {
    saved.push({ app: this.keys.space.store, calls: JSON.parse(JSON.stringify(calls, replacer)) });
    return callMany.call(this, calls);
  };
  const exec = new TopologyExecutor(t.build(), { redis });
  for (let i = 0; i < inputs.length; i += batch)
    await exec.runBatch({
      topic: 'orders',
      partition: 0,
      epoch: 1,
      committedOffset: i,
      records: inputs.slice(i, i + batch),
    });
  writeFileSync(path, JSON.stringify(saved));
  console.log(`${shape}: ${records} records, ${saved.length} callMany batches saved to ${path}`);
}

async function replay(path: string): Promise<void> {
  const { loadScripts }: { loadScripts: (dir: string) => Map<string, { source: string }> } = await import(
    `${from}/fence/index.js`
  );
  for (const name of ['keyCall', 'keyCallMany'])
    await redis.script('LOAD', (loadScripts(STORE_LUA_DIR).get(name) as { source: string }).source);
  const saved = JSON.parse(readFileSync(path, 'utf8'), reviver) as Captured[];
  const stores = new Map<string, Store.KeyStore>();
  const digest = createHash('sha256');
  let records = 0;
  const c0 = await scriptCalls();
  for (const { app, calls } of saved) {
    let store = stores.get(app);
    if (store === undefined) {
      store = new KeyStore({ redis, app });
      stores.set(app, store);
    }
    const keyCalls = calls as Store.KeyCall[];
    for (const c of keyCalls) records += c.records.length;
    digest.update(JSON.stringify(await store.callMany(keyCalls), replacer));
  }
  const calls = (await scriptCalls()) - c0;
  console.log(`records ${records}, script calls ${calls}, replies ${digest.digest('hex').slice(0, 16)}`);
}

async function scriptCalls(): Promise<number> {
  const m = /^cmdstat_evalsha:calls=(\d+)/m.exec(await redis.info('commandstats'));
  return m === null ? 0 : Number(m[1]);
}

await (mode === 'capture' ? capture(file) : replay(file));
redis.disconnect();
