/**
 * The processor's apply calls, replayed the same every run: for counting Redis' instructions per record
 * inside the apply script (callgrind), so that a change to src/fence/lua compares old against new on the
 * same calls whatever the machine's load. One partition, `BENCH_RECORDS` records over `BENCH_KEYS` keys
 * (drawn by a fixed sequence, several records of a key in some batches), batches of `BENCH_BATCH` as the
 * processor groups them (one key's records together, in offset order), the `add` operation with the new
 * value as output (the processor's default shape), strict fencing with the pending index, the committed
 * offset moving one batch behind (so entries are pruned as in a run).
 *
 *   valgrind --tool=callgrind --toggle-collect=evalShaCommand --callgrind-out-file=/tmp/cg.out \
 *     redis-server --port 16620 --save '' --appendonly no &
 *   BENCH_RECORDS=5000 BENCH_KEYS=500 REDIS_URL=redis://127.0.0.1:16620 node --import tsx bench/fence/instructions.ts
 *   redis-cli -p 16620 shutdown nosave; callgrind_annotate /tmp/cg.out | head -20   # Ir / records
 *
 * Without valgrind it prints Redis' own microseconds per record (INFO commandstats, evalsha), which move
 * with the load.
 */
import { Redis } from 'ioredis';
import { BatchResults, Fence, V } from '../../src/fence/index.js';

function envInt(name: string, dflt: number): number {
  const v = process.env[name];
  return v === undefined ? dflt : Number(v);
}

const records = envInt('BENCH_RECORDS', 5000);
const keys = envInt('BENCH_KEYS', 500);
const batchSize = envInt('BENCH_BATCH', 500);
const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:16620');
const store = `bench-instr-${process.env.BENCH_STORE ?? 'a'}`;
const fence = new Fence({ redis, store, mode: 'strict' });

async function evalshaUsec(): Promise<number> {
  const info = await redis.info('commandstats');
  const m = /cmdstat_evalsha:calls=\d+,usec=(\d+)/.exec(info);
  return m ? Number(m[1]) : 0;
}

// a fixed key sequence: a linear congruential walk, squared to favour low keys (some repeat in a batch)
let x = 12345;
function nextKey(): string {
  x = (x * 1103515245 + 12345) % 2147483648;
  const u = x / 2147483648;
  return `c-${Math.floor(u * u * keys)}`;
}

const epoch = await fence.acquireEpoch('orders', 0);
const u0 = await evalshaUsec();
let applied = 0;
for (let start = 0, committed = 0; start < records; start += batchSize) {
  const n = Math.min(batchSize, records - start);
  const byKey = new Map<string, number[]>();
  for (let i = 0; i < n; i++) {
    const k = nextKey();
    const list = byKey.get(k);
    if (list) list.push(i);
    else byKey.set(k, [i]);
  }
  const batch = fence.batch('orders', 0, epoch, committed);
  for (const [k, list] of byKey) {
    batch.key(k);
    for (const i of list) batch.record(i, start + i, { op: 'add', by: 1 + ((start + i) % 7) }, 2);
  }
  const results = new BatchResults(n);
  await fence.applyKeys(batch, results);
  for (let i = 0; i < n; i++) if (results.verdicts[i] === V.APPLY) applied++;
  committed = start + n;
}
const us = (await evalshaUsec()) - u0;
console.log(
  `${records} records, ${keys} keys, batches of ${batchSize}: ${applied} applied; Redis evalsha ${(us / records).toFixed(2)} µs / record`,
);
redis.disconnect();
