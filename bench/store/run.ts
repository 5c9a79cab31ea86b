/**
 * Redis time per record of a windowed count as key calls (src/store: one script call per key, and
 * keyCallMany's up to MANY_KEYS_PER_CALL keys per call, what callMany sends on a single Redis) against
 * today's fence scripts on the same records (applyMany: up to 128 keys per call; applyRecords: one key
 * per call), read from INFO commandstats (cmdstat_evalsha usec) around each run. A run is kept only
 * when the server counted exactly this run's EVALSHA calls (no other client's scripts in the window);
 * the median of the kept runs is reported.
 *
 *   REDIS_URL=redis://127.0.0.1:16379 node --import tsx bench/store/run.ts [keys] [recordsPerKey] [batches]
 */
import { Redis } from 'ioredis';
import { type ApplyRequest, Fence } from '../../src/index.js';
import { KeyStore, MANY_KEYS_PER_CALL } from '../../src/store/index.js';
import type { KeyCall } from '../../src/store/types.js';
import { commandStats } from '../fence/stats.js';

const url = process.env.REDIS_URL || 'redis://127.0.0.1:16379';
const KEYS = Number(process.argv[2] ?? 500);
const PER_KEY = Number(process.argv[3] ?? 4);
const BATCHES = Number(process.argv[4] ?? 10);
const TRIES = 7;
const EXPIRE = Date.now() + 3_600_000;

type Variant = { name: string; calls: (batch: number) => number; run: (batch: number) => Promise<void> };

function offsets(batch: number, key: number): number[] {
  return Array.from({ length: PER_KEY }, (_, r) => batch * KEYS * PER_KEY + r * KEYS + key);
}

function variants(redis: Redis, tag: string): Variant[] {
  const store = new KeyStore({ redis, app: `bs_${tag}` });
  const kv = new KeyStore({ redis, app: `bk_${tag}` });
  const many = new Fence({ redis, store: `bm_${tag}`, mode: 'cluster', pendingIndex: false });
  const one = new Fence({ redis, store: `bo_${tag}`, mode: 'cluster', pendingIndex: false });
  const strict = new Fence({ redis, store: `bx_${tag}`, mode: 'strict' });
  const keyCalls = (batch: number, window: boolean): KeyCall[] =>
    Array.from({ length: KEYS }, (_, k) => ({
      partition: 0,
      epoch: 1,
      committedOffset: batch * KEYS * PER_KEY,
      key: `k${k}`,
      records: offsets(batch, k).map((offset) => ({
        offset,
        emit: 1 as const,
        effects: [
          window
            ? {
                store: 1,
                kind: 'window' as const,
                start: Math.floor(offset / 1000) * 1000,
                expireAt: EXPIRE,
                op: { op: 'add' as const, by: 1 },
              }
            : { store: 0, kind: 'kv' as const, op: { op: 'add' as const, by: 1 } },
        ],
      })),
    }));
  const requests = (batch: number): ApplyRequest[] =>
    Array.from({ length: KEYS }, (_, k) => ({
      topic: 'bench',
      partition: 0,
      epoch: 1,
      committedOffset: batch * KEYS * PER_KEY,
      key: `k${k}`,
      records: offsets(batch, k).map((offset) => ({
        offset,
        operation: { op: 'add' as const, by: 1 },
        output: 'state' as const,
      })),
    }));
  const perKey = (s: KeyStore, calls: KeyCall[]) => Promise.all(calls.map((c) => s.call(c)));
  const joined = () => Math.ceil(KEYS / MANY_KEYS_PER_CALL);
  return [
    {
      name: 'keyCall, windowed count, one script call per key',
      calls: () => KEYS,
      run: async (b) => void (await perKey(store, keyCalls(b, true))),
    },
    {
      name: `keyCallMany, windowed count, ${MANY_KEYS_PER_CALL} keys per call`,
      calls: joined,
      run: async (b) => void (await store.callMany(keyCalls(b, true))),
    },
    {
      name: 'keyCall, kv add (store 0), one script call per key',
      calls: () => KEYS,
      run: async (b) => void (await perKey(kv, keyCalls(b, false))),
    },
    {
      name: `keyCallMany, kv add (store 0), ${MANY_KEYS_PER_CALL} keys per call`,
      calls: joined,
      run: async (b) => void (await kv.callMany(keyCalls(b, false))),
    },
    {
      name: 'applyMany (fence today, up to 128 keys per call)',
      calls: () => Math.ceil(KEYS / 128),
      run: async (b) => void (await many.applyBatch(requests(b))),
    },
    {
      name: 'applyManyStrict (the processor: epoch, pending index)',
      calls: () => Math.ceil(KEYS / 128),
      run: async (b) => void (await strict.applyBatch(requests(b))),
    },
    {
      name: 'applyRecords (fence today, one key per call)',
      calls: () => KEYS,
      run: async (b) => void (await Promise.all(requests(b).map((r) => one.apply(r)))),
    },
  ];
}

async function main(): Promise<void> {
  const redis = new Redis(url, { enableAutoPipelining: true });
  const admin = new Redis(url);
  const results = new Map<string, number[]>();
  let rejected = 0;
  for (let t = 0; t < TRIES; t++) {
    const tag = `${Date.now().toString(36)}_${t}`;
    const vs = variants(redis, tag);
    for (const v of vs) await v.run(BATCHES); // warm-up: scripts loaded (no NOSCRIPT inside a run)
    for (const v of vs) {
      const before = (await commandStats(admin)).evalsha ?? { calls: 0, usec: 0 };
      let calls = 0;
      for (let b = 0; b < BATCHES; b++) {
        await v.run(b);
        calls += v.calls(b);
      }
      const after = (await commandStats(admin)).evalsha ?? { calls: 0, usec: 0 };
      if (after.calls - before.calls !== calls) {
        rejected++;
        continue;
      }
      const perRecord = (after.usec - before.usec) / (BATCHES * KEYS * PER_KEY);
      results.set(v.name, [...(results.get(v.name) ?? []), perRecord]);
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
  const base = median(results.get('applyMany (fence today, up to 128 keys per call)') ?? [Number.NaN]);
  console.log(
    `${KEYS} keys x ${PER_KEY} records per key per batch, ${BATCHES} batches; runs kept per variant (of ${TRIES}), ${rejected} rejected (other clients' scripts)`,
  );
  for (const [name, xs] of results)
    console.log(
      `${name.padEnd(56)} ${median(xs).toFixed(2).padStart(6)} us/record  x${(median(xs) / base).toFixed(2)} of applyMany  (${xs.length} runs)`,
    );
  redis.disconnect();
  admin.disconnect();
}

await main();
