/**
 * Where the Redis time of the strict apply script goes: runs patched copies of it (profiling only,
 * never used by the library) on the bench's own redis-server, with lean explicit pipelines so the
 * client is not the bottleneck, and reports EVALSHA usec and server CPU per record.
 *
 *   node --import tsx bench/fence/profile-lua.ts
 *
 * Env: BENCH_RECORDS (100000), BENCH_KEYS (10000), BENCH_WINDOW (128), BENCH_PARTITIONS (16).
 */
import type { Redis as RedisClient } from 'ioredis';
import { Redis } from 'ioredis';
import { encodeApply, loadScripts, type RedisArg } from '../../src/fence/index.js';

import { KeySpace } from '../../src/index.js';
import { startRedis } from './redis-server.js';
import { commandStats, serverCpuUs } from './stats.js';
import { request } from './throughput.js';
import { addTotals, type Call, keyName, makeWaves, prng, SEED_SOURCE } from './workload.js';

const PORT = 16479;
const num = (name: string, d: number): number => Number(process.env[name] ?? d);
const o = {
  records: num('BENCH_RECORDS', 100_000),
  keys: num('BENCH_KEYS', 10_000),
  window: num('BENCH_WINDOW', 128),
  partitions: num('BENCH_PARTITIONS', 16),
};

function patch(src: string, from: string, to: string): string {
  if (!src.includes(from)) throw new Error(`patch target not found: ${from.slice(0, 60)}`);
  return src.replace(from, to);
}

const HGET_AFTER_INCR =
  "v = redis.call('HGET', stateKey, 'v') -- exact text; Lua numbers would round past 2^53";
const PENDING_HSET = `          redis.call('HSET', stateKey, '#' .. offStr, entry)`;
const FENCE_HSET = `redis.call('HSET', stateKey, 'p', p, 'o', string.format('%d', o or -1), 'e', string.format('%d', e))`;
const INCR = `local r = redis.pcall(op == 'add' and 'HINCRBY' or 'HINCRBYFLOAT', stateKey, 'v', a1)`;

const noHget = (s: string): string => patch(s, HGET_AFTER_INCR, 'v = tostring(r)');
const deferPending = (s: string): string =>
  patch(
    patch(
      patch(s, '  local wrote = false\n', '  local wrote = false\n  local deferred = {}\n'),
      PENDING_HSET,
      "          deferred[#deferred + 1] = '#' .. offStr\n          deferred[#deferred + 1] = entry",
    ),
    FENCE_HSET,
    FENCE_HSET.replace(/\)$/, ', unpack(deferred))'),
  );
/** add computed in Lua (exact below 2^53 only), value written once with the fence: 4 calls per call. */
const luaAdd = (s: string): string =>
  patch(
    patch(noHget(deferPending(s)), INCR, 'local r = (tonumber(v) or 0) + tonumber(a1)'),
    ', unpack(deferred))',
    ", 'v', v, unpack(deferred))",
  );

const REPLY_ONLY = `local n = tonumber(ARGV[6])
local r = {}
for i = 1, n do r[#r + 1] = 'A'; r[#r + 1] = 0; r[#r + 1] = false end
return r`;

interface Variant {
  readonly name: string;
  readonly source: string;
  readonly output: boolean;
}

const strict = loadScripts().get('applyRecordsStrict');
if (!strict) throw new Error('applyRecordsStrict not found');
const ALL_VARIANTS: Variant[] = [
  { name: 'applyRecordsStrict as shipped', source: strict.source, output: true },
  { name: 'as shipped, records without output', source: strict.source, output: false },
  { name: '- HGET after HINCRBY (use its reply)', source: noHget(strict.source), output: true },
  { name: '- per-record pending HSET (one HSET at end)', source: deferPending(strict.source), output: true },
  { name: 'both of the above', source: noHget(deferPending(strict.source)), output: true },
  { name: 'add in Lua, one HSET at end (no per-record call)', source: luaAdd(strict.source), output: true },
  // Floors: the same KEYS/ARGV, no state work at all.
  { name: 'floor: same ARGV, reply of 3 entries/record', source: REPLY_ONLY, output: true },
  { name: 'floor: same ARGV, return 1', source: 'return 1', output: true },
];

/** PROFILE_ONLY: only the variants whose name contains it; PROFILE_PER_CALL: e.g. "100" (for perf). */
const only = process.env.PROFILE_ONLY;
const VARIANTS = ALL_VARIANTS.filter((v) => !only || v.name.includes(only));
const PER_CALL = (process.env.PROFILE_PER_CALL ?? '1,10,100').split(',').map(Number);

interface Cell {
  evalshaUs: number;
  cpuUs: number;
  innerCalls: number;
}

async function runCalls(
  client: RedisClient,
  sha: string,
  waves: readonly (readonly RedisArg[])[][],
  check: (reply: unknown) => boolean,
): Promise<void> {
  for (const wave of waves) {
    const p = client.pipeline();
    for (const args of wave) p.evalsha(sha, 2, ...args);
    const res = (await p.exec()) ?? [];
    for (const [err, reply] of res) if (err || !check(reply)) throw err ?? new Error('unexpected reply');
  }
}

async function cell(admin: RedisClient, client: RedisClient, v: Variant | 'seed', perCall: number) {
  await admin.flushall('SYNC');
  const keys = new KeySpace({ store: 'prof' });
  const seed = v === 'seed';
  const sha = String(await admin.script('LOAD', seed ? SEED_SOURCE : v.source));
  for (let p = 0; p < o.partitions; p++) await admin.set(keys.epoch('orders', p), '1');
  const next = new Array<number>(o.partitions).fill(0);
  const rand = prng(7);
  const prepop = makeWaves({ ...o, records: o.keys, perCall: 1 }, next, rand);
  const waves = makeWaves({ ...o, perCall }, next, rand);
  const running: number[] = [];
  const encode = (w: readonly Call[]): RedisArg[][] =>
    w.flatMap((c) => {
      const stateKey = keys.state(keyName(c.key));
      const epochKey = keys.epoch('orders', c.partition);
      if (seed)
        return c.amounts.map((a, i) => {
          running[c.key] = (running[c.key] ?? 0) + a;
          return [stateKey, epochKey, c.partition, c.offsets[i] as number, 1, running[c.key] as number];
        });
      const req = request(c, 1);
      const recs = v.output
        ? req.records
        : req.records.map(({ offset, operation }) => ({ offset, operation }));
      return [[stateKey, epochKey, ...encodeApply({ ...req, records: recs }, 0)]];
    });
  const check = seed
    ? (r: unknown) => Array.isArray(r) && r[0] === 'APPLY'
    : (r: unknown) => r === 1 || (Array.isArray(r) && r.every((x, i) => i % 3 !== 0 || x === 'A'));
  await runCalls(client, sha, prepop.map(encode), check);
  const encoded = waves.map(encode);
  await admin.config('RESETSTAT');
  const cpu0 = await serverCpuUs(admin);
  await runCalls(client, sha, encoded, check);
  const cpu1 = await serverCpuUs(admin);
  const stats = await commandStats(admin);
  const totals: number[] = [];
  addTotals(prepop, totals);
  addTotals(waves, totals);
  const stateful = seed || v.source.includes('HSET');
  for (let k = 0; stateful && k < o.keys; k += 97) {
    const got = Number(await admin.hget(keys.state(keyName(k)), seed ? 'value' : 'v'));
    if (got !== totals[k]) throw new Error(`key ${k}: ${got} != ${totals[k]}`);
  }
  const records = waves.reduce((n, w) => n + w.reduce((m, c) => m + c.offsets.length, 0), 0);
  const inner = Object.entries(stats)
    .filter(([k]) => !['evalsha', 'info', 'config|resetstat'].includes(k))
    .reduce((n, [, s]) => n + s.calls, 0);
  return {
    evalshaUs: (stats.evalsha?.usec ?? 0) / records,
    cpuUs: (cpu1 - cpu0) / records,
    innerCalls: inner / records,
  } satisfies Cell;
}

const server = await startRedis(PORT);
const admin = new Redis({ host: '127.0.0.1', port: PORT });
const client = new Redis({ host: '127.0.0.1', port: PORT });
try {
  console.log(
    `${o.records} records over ${o.keys} keys, explicit pipelines of ${o.window} EVALSHA; per record: EVALSHA usec / server CPU usec / redis.call count\n`,
  );
  console.log(`| script | ${PER_CALL.map((n) => `${n} rec/call`).join(' | ')} |`);
  console.log(`|---|${PER_CALL.map(() => '---:').join('|')}|`);
  const fmt = (c: Cell): string =>
    `${c.evalshaUs.toFixed(2)} / ${c.cpuUs.toFixed(2)} / ${c.innerCalls.toFixed(2)}`;
  if (!only) console.log(`| seed sketch (1 rec/call) | ${fmt(await cell(admin, client, 'seed', 1))} | | |`);
  for (const v of VARIANTS) {
    const cells: string[] = [];
    for (const n of PER_CALL) cells.push(fmt(await cell(admin, client, v, n)));
    console.log(`| ${v.name} | ${cells.join(' | ')} |`);
  }
} finally {
  await Promise.allSettled([admin.quit(), client.quit()]);
  await server.stop();
}
