/**
 * GCRA accuracy over a long run: two processes each offer calls at the limiter's rate (2x together)
 * for BENCH_SECONDS (default 60) against one key; admitted is compared with rate x time + burst.
 * BENCH_TARGET=cluster runs it on the Redis Cluster. Writes bench/results/kit-gcra-<target>.raw.json.
 *
 *   node --import tsx bench/kit/gcra.ts
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { Cluster, Redis } from 'ioredis';
import { Child } from '../../src/harness/index.js';

const target = process.env.BENCH_TARGET === 'cluster' ? 'cluster' : 'standalone';
const seconds = Number(process.env.BENCH_SECONDS ?? 60);
const rate = Number(process.env.BENCH_RATE ?? 1000);
const burst = Number(process.env.BENCH_BURST ?? 100);
const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:16379';
const NODES = process.env.REDIS_CLUSTER_NODES || '127.0.0.1:17001,127.0.0.1:17002,127.0.0.1:17003';
const name = `bench-${Date.now().toString(36)}`;
const go = `rf-bench:{${name}}:go`;

const redis =
  target === 'cluster'
    ? new Cluster(NODES.split(',').map((hp) => ({ host: hp.split(':')[0], port: Number(hp.split(':')[1]) })))
    : new Redis(REDIS_URL);
const env = {
  ...process.env,
  KIT_TARGET: target,
  REDIS_URL,
  REDIS_CLUSTER_NODES: NODES,
  LIMITER: name,
  RATE: String(rate),
  BURST: String(burst),
  ID: 'hot',
  SEND_RATE: String(rate),
  DURATION_MS: String(seconds * 1000),
  GO: go,
};
const children = [1, 2].map(
  (i) =>
    new Child({
      name: `gcra-${i}`,
      command: process.execPath,
      args: ['--import', 'tsx', 'test/kit/fixtures/ratelimit-child.ts'],
      env,
    }),
);
try {
  await Promise.all(
    children.map((c) => c.ready({ label: 'ready', log: (l) => l.msg === 'ready', timeoutMs: 30_000 })),
  );
  await redis.rpush(go, '1', '1');
  const results = await Promise.all(
    children.map((c) => c.log.waitFor('result', (l) => l.msg === 'result', (seconds + 60) * 1000)),
  );
  const admitted = results.reduce((s, r) => s + (r.allowed as number), 0);
  const sent = results.reduce((s, r) => s + (r.sent as number), 0);
  const errors = results.reduce((s, r) => s + (r.errors as number), 0);
  const span =
    Math.max(...results.map((r) => r.last as number)) - Math.min(...results.map((r) => r.first as number));
  const expected = (rate * span) / 1000 + burst;
  const report = {
    target,
    seconds,
    rate,
    burst,
    offered: sent,
    admitted,
    errors,
    spanMs: span,
    expected: Number(expected.toFixed(1)),
    maxTickGapMs: Math.max(...results.map((r) => r.maxGapMs as number)),
    loadAverage: (await import('node:os')).loadavg().map((l) => Number(l.toFixed(2))),
    errorPercent: Number(((Math.abs(admitted - expected) / expected) * 100).toFixed(3)),
  };
  mkdirSync('bench/results', { recursive: true });
  writeFileSync(`bench/results/kit-gcra-${target}.raw.json`, `${JSON.stringify(report, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify(report)}\n`);
} finally {
  await Promise.all(children.map((c) => c.kill()));
  await redis.del(go);
  redis.disconnect();
}
