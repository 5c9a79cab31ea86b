/**
 * Cache invalidation throughput: a topic of invalidation events over 4 partitions, each naming a
 * distinct entry a `Cache` wrote, consumed twice in the same run from the beginning by two groups:
 *   - baseline: the per-key awaited loop — one DEL awaited per event, then the next event (the
 *     consume loop waits for each batch's loop);
 *   - the invalidation consumer (createInvalidation, default options): pipelined, generation-moving.
 * Entries are written again between the two, so both delete real entries. deletes/s is events over the
 * time from the first event done to the last; cpuUsPerEvent is this process's CPU time per event.
 *
 * Two set-ups, each with its own topic and both consumers:
 *   - direct: Redis on 127.0.0.1 (BENCH_EVENTS, default 50,000);
 *   - rtt: the same Redis behind a proxy in this process that holds each reply BENCH_DELAY_MS
 *     (default 1) before passing it on — a Redis one network hop away (BENCH_RTT_EVENTS, default 10,000).
 *     Standalone only (a Cluster client follows the nodes' own addresses past a proxy).
 * BENCH_TARGET=cluster runs the direct set-up on the Redis Cluster. Writes
 * bench/results/kit-invalidation-<target>.raw.json.
 *
 *   node --import tsx bench/kit/invalidation.ts
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, connect as netConnect, type Server } from 'node:net';
import { loadavg } from 'node:os';
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { Cluster, Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { ConfluentKafka } from '../../src/kafka/confluent.js';
import { KitKeys } from '../../src/keys/kit.js';
import { Cache, createInvalidation, defineInvalidation } from '../../src/kit/index.js';

const target = process.env.BENCH_TARGET === 'cluster' ? 'cluster' : 'standalone';
const EVENTS = Number(process.env.BENCH_EVENTS ?? 50_000);
const RTT_EVENTS = Number(process.env.BENCH_RTT_EVENTS ?? 10_000);
const DELAY_MS = Number(process.env.BENCH_DELAY_MS ?? 1);
const PARTITIONS = 4;
const BROKERS = (process.env.KAFKA_BROKERS || '127.0.0.1:19092').split(',');
const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:16379';
const NODES = process.env.REDIS_CLUSTER_NODES || '127.0.0.1:17001,127.0.0.1:17002,127.0.0.1:17003';
const kafka = new KafkaJS.Kafka({ kafkaJS: { brokers: BROKERS, logLevel: KafkaJS.logLevel.NOTHING } });
const tenantOf = (i: number) => `t${i % 8}`;

/** A TCP proxy to Redis that holds every reply `ms` before passing it on (order kept). */
async function delayProxy(ms: number): Promise<{ port: number; server: Server }> {
  const url = new URL(REDIS_URL);
  const server = createServer((client) => {
    const upstream = netConnect(Number(url.port), url.hostname);
    client.on('data', (d) => upstream.write(d));
    upstream.on('data', (d) => setTimeout(() => client.write(d), ms));
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const a = server.address();
  return { port: typeof a === 'object' && a !== null ? a.port : 0, server };
}

/** This process's CPU time per event, in µs. */
const cpuPer = (u: NodeJS.CpuUsage, events: number) => Number(((u.user + u.system) / events).toFixed(1));

/** Waits until `done()` reaches `events`; returns the span from the first event done to the last. */
async function measure(
  events: number,
  first: () => number,
  done: () => number,
  last: () => number,
): Promise<number> {
  const deadline = Date.now() + 600_000;
  while (done() < events) {
    if (Date.now() > deadline) throw new Error(`only ${done()} of ${events} done`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return last() - first();
}

async function setUp(label: string, redis: Redis | Cluster, events: number) {
  const run = `bench-inv-${label}-${Date.now().toString(36)}`;
  const topic = run;
  const cacheName = run;
  const keys = new KitKeys('cache', cacheName);
  const admin = kafka.admin();
  await admin.connect();

  const populate = async () => {
    const cache = new Cache<number>({ redis, name: cacheName, ttlMs: 3_600_000 });
    for (let i = 0; i < events; i += 500) {
      const n = Math.min(500, events - i);
      await Promise.all(
        Array.from({ length: n }, (_, j) =>
          cache.get({ tenant: tenantOf(i + j), id: `q${i + j}` }, () => i + j),
        ),
      );
    }
    await cache.close();
  };
  const stored = async (sample: number) => {
    let n = 0;
    for (let i = 0; i < events; i += Math.floor(events / sample))
      n += await redis.exists(keys.parts({ tenant: tenantOf(i), id: `q${i}` }, 'v')[0] as string);
    return n;
  };

  const baseline = async () => {
    const port = new ConfluentKafka({ brokers: BROKERS, groupId: `${run}-loop`, clientId: `${run}-loop` });
    let done = 0;
    let first = 0;
    let last = 0;
    await port.start([topic], {
      onAssign: async () => undefined,
      onRevoke: async () => undefined,
      onBatch: async (_t, _p, records) => {
        if (first === 0) first = Date.now();
        for (const r of records) {
          const e = JSON.parse(String(r.value)) as { tenantId: string; quoteId: string };
          await redis.del(keys.parts({ tenant: e.tenantId, id: e.quoteId }, 'v')[0] as string);
          done++;
        }
        last = Date.now();
      },
    });
    const ms = await measure(
      events,
      () => first,
      () => done,
      () => last,
    );
    await port.stop();
    return ms;
  };

  const consumer = async () => {
    const registry = new Registry();
    const c = createInvalidation(
      defineInvalidation({
        input: { topic },
        name: 'bench',
        cache: cacheName,
        keys: `${cacheName}:{tenantId}:{quoteId}`,
      }),
      { kafka: { brokers: BROKERS }, groupId: `${run}-inv`, redis, registry },
    );
    await c.start();
    let first = 0;
    let last = 0;
    const timer = setInterval(() => {
      const n = c.counts().done;
      if (n > 0 && first === 0) first = Date.now();
      if (n === events && last === 0) last = Date.now();
    }, 5);
    const ms = await measure(
      events,
      () => first,
      () => c.counts().done,
      () => last || Date.now(),
    );
    clearInterval(timer);
    const m = (await registry.getMetricsAsJSON()).find(
      (x) => x.name === 'redfence_cache_invalidation_pipelines_total',
    );
    await c.close();
    return { ms, pipelines: m?.values.reduce((s, v) => s + v.value, 0) ?? 0 };
  };

  try {
    await admin.createTopics({
      topics: [
        { topic, numPartitions: PARTITIONS, replicationFactor: 1 },
        { topic: `${topic}.DLT`, numPartitions: 1, replicationFactor: 1 },
      ],
    });
    const producer = kafka.producer({ 'linger.ms': 5, kafkaJS: { logLevel: KafkaJS.logLevel.NOTHING } });
    await producer.connect();
    for (let i = 0; i < events; i += 1000) {
      await producer.send({
        topic,
        messages: Array.from({ length: Math.min(1000, events - i) }, (_, j) => ({
          key: `q${i + j}`,
          value: JSON.stringify({ tenantId: tenantOf(i + j), quoteId: `q${i + j}` }),
        })),
      });
    }
    await producer.disconnect();
    await populate();
    let cpu = process.cpuUsage();
    const loopMs = await baseline();
    const loopCpu = process.cpuUsage(cpu);
    const leftByLoop = await stored(100);
    await populate();
    cpu = process.cpuUsage();
    const inv = await consumer();
    const invCpu = process.cpuUsage(cpu);
    const leftByConsumer = await stored(100);
    return {
      events,
      partitions: PARTITIONS,
      loop: {
        ms: loopMs,
        deletesPerSecond: Math.round((events * 1000) / loopMs),
        sampledLeft: leftByLoop,
        cpuUsPerEvent: cpuPer(loopCpu, events),
      },
      consumer: {
        ms: inv.ms,
        deletesPerSecond: Math.round((events * 1000) / inv.ms),
        pipelines: inv.pipelines,
        keysPerPipeline: Number((events / Math.max(1, inv.pipelines)).toFixed(1)),
        sampledLeft: leftByConsumer,
        cpuUsPerEvent: cpuPer(invCpu, events),
      },
      ratio: Number((loopMs / inv.ms).toFixed(2)),
      loadAverage: loadavg().map((l) => Number(l.toFixed(2))),
    };
  } finally {
    await admin.deleteTopics({ topics: [topic, `${topic}.DLT`] }).catch(() => undefined);
    await admin.disconnect().catch(() => undefined);
    for (let i = 0; i < events; i += 500) {
      const part = Array.from({ length: Math.min(500, events - i) }, (_, j) =>
        keys.parts({ tenant: tenantOf(i + j), id: `q${i + j}` }, 'v', 'g', 'lease'),
      );
      await Promise.all(part.flat().map((k) => redis.del(k).catch(() => 0)));
    }
  }
}

const report: Record<string, unknown> = { target, startedAt: new Date().toISOString() };
const direct =
  target === 'cluster'
    ? new Cluster(NODES.split(',').map((hp) => ({ host: hp.split(':')[0], port: Number(hp.split(':')[1]) })))
    : new Redis(REDIS_URL);
try {
  report.direct = await setUp('direct', direct, EVENTS);
  process.stdout.write(`${JSON.stringify({ direct: report.direct })}\n`);
  if (target === 'standalone' && RTT_EVENTS > 0) {
    const proxy = await delayProxy(DELAY_MS);
    const far = new Redis({ host: '127.0.0.1', port: proxy.port });
    try {
      report.rtt = { delayMs: DELAY_MS, ...(await setUp('rtt', far, RTT_EVENTS)) };
      process.stdout.write(`${JSON.stringify({ rtt: report.rtt })}\n`);
    } finally {
      far.disconnect();
      proxy.server.close();
    }
  }
  mkdirSync('bench/results', { recursive: true });
  writeFileSync(`bench/results/kit-invalidation-${target}.raw.json`, `${JSON.stringify(report, null, 2)}\n`);
} finally {
  direct.disconnect();
}
