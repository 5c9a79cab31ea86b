/**
 * Outbox relay benchmark: redfence's relay (exactly-once and at-least-once) against the seed's relay (one
 * transaction per batch of 100: UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED LIMIT 100)
 * RETURNING, produce, await acks, COMMIT) and a one-row-at-a-time relay (the same with LIMIT 1), all on
 * the same Kafka producer adapter, in the same run.
 *
 * 1. Throughput: a committed backlog of BENCH_ROWS rows (1,000 aggregates) per contender, fresh schema
 *    and topic; rows/s = rows visible to a read_committed reader / time from relay start to the last one
 *    (bounded by BENCH_SECONDS; the one-row relay is stopped there and its rate taken so far).
 * 2. Lag: BENCH_RATE rows/s (default 2,000) committed by a paced writer for BENCH_LAG_SECONDS; lag =
 *    the reader's clock when a row arrives minus the writer's clock when its COMMIT returned; p50/p99.
 *
 * node --import tsx bench/outbox/run.ts   (results in bench/results/outbox-<time>.json)
 * BENCH_ONLY=redfence-eo,one-row picks contenders; BENCH_LAG_SECONDS=0 skips the lag runs; BENCH_ROLES
 * makes the outboxes with that many relay roles (default 4); BENCH_TXN_INTERVAL_MS sets transactionIntervalMs.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { RdKafka } from '@confluentinc/kafka-javascript';
import pg from 'pg';
import { DeliveryProducer } from '../../src/kafka/producer.js';
import { enqueue, initOutbox, OutboxRelay } from '../../src/outbox/index.js';
import { createTopics, kafka } from '../../test/helpers/kafka.js';

const DB = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:15432/redfence_test';
const BROKERS = process.env.KAFKA_BROKERS || '127.0.0.1:19092';
const ROWS = Number(process.env.BENCH_ROWS || 100_000);
const SECONDS = Number(process.env.BENCH_SECONDS || 30);
const RATE = Number(process.env.BENCH_RATE || 2000);
const LAG_SECONDS = Number(process.env.BENCH_LAG_SECONDS || 10);
const AGGREGATES = 1000;
const PARTITIONS = 8;
const run = `obench${Date.now().toString(36)}`;

type Contender = 'redfence-eo' | 'redfence-alo' | 'seed-batch-100' | 'one-row';
const CONTENDERS: Contender[] = ['redfence-eo', 'redfence-alo', 'seed-batch-100', 'one-row'];

// biome-ignore lint/suspicious/noExplicitAny: the client's callbacks differ in their second argument
const cb = <T = void>(fn: (done: (err: any, v?: any) => void) => void) =>
  new Promise<T>((resolve, reject) => fn((err, v) => (err ? reject(err) : resolve(v as T))));

const drops: Array<() => Promise<void>> = [];
async function createTopic(topic: string): Promise<void> {
  drops.push(await createTopics([{ topic, partitions: PARTITIONS }]));
}

async function deleteProgress(topic: string): Promise<void> {
  const a = kafka.admin();
  await a.connect();
  await a.deleteTopics({ topics: [topic] }).catch(() => undefined);
  await a.disconnect();
}

/** A read_committed reader of one topic: arrival time per row id (its `id` header). */
class Reader {
  readonly arrived = new Map<string, number>();
  readonly #c = new RdKafka.KafkaConsumer(
    {
      'metadata.broker.list': BROKERS,
      'group.id': `${run}-reader-${Math.random()}`,
      'enable.auto.commit': false,
      'isolation.level': 'read_committed',
      'fetch.wait.max.ms': 10,
    },
    { 'auto.offset.reset': 'earliest' },
  );
  #stop = false;
  #loop: Promise<void> | undefined;
  /** consume(n) returns after n records or a timeout between two: small n for latency, large for throughput. */
  constructor(readonly perCall: number) {}
  async start(topic: string) {
    await cb((d) => this.#c.connect({ timeout: 30_000 }, d));
    this.#c.assign(Array.from({ length: PARTITIONS }, (_, partition) => ({ topic, partition, offset: 0 })));
    this.#c.setDefaultConsumeTimeout(50);
    this.#loop = (async () => {
      while (!this.#stop) {
        const batch = await cb<RdKafka.Message[]>((d) => this.#c.consume(this.perCall, d));
        const now = performance.now();
        for (const m of batch) {
          const h = m.headers?.find((x) => 'id' in x);
          const id = h ? String(h.id) : '';
          if (!this.arrived.has(id)) this.arrived.set(id, now);
        }
      }
    })();
  }
  async stop() {
    this.#stop = true;
    await this.#loop;
    await cb((d) => this.#c.disconnect(d)).catch(() => undefined);
  }
}

/** The baselines: a transaction per batch, rows marked inside it, committed after the acks. */
function baseline(pool: pg.Pool, schema: string, topic: string, limit: number) {
  let stop = false;
  let producer: DeliveryProducer | undefined;
  const loop = (async () => {
    producer = await DeliveryProducer.connect({
      'bootstrap.servers': BROKERS,
      partitioner: 'murmur2_random',
      'enable.idempotence': true,
      acks: -1,
      'linger.ms': 5,
    });
    const c = await pool.connect();
    try {
      while (!stop) {
        await c.query('BEGIN');
        const { rows } = await c.query(
          `UPDATE "${schema}".redfence_outbox SET state = 'published', published_at = clock_timestamp()
           WHERE id IN (SELECT id FROM "${schema}".redfence_outbox WHERE state = 'pending'
                        ORDER BY pos FOR UPDATE SKIP LOCKED LIMIT ${limit})
           RETURNING id, aggregateid, type, payload::text AS payload`,
        );
        await producer.produce(
          rows.map((r) => ({
            topic,
            key: r.aggregateid,
            value: r.payload,
            headers: { id: r.id, type: r.type },
          })),
        );
        await c.query('COMMIT');
        if (rows.length === 0) await new Promise((r) => setTimeout(r, 5));
      }
    } finally {
      c.release();
    }
  })();
  return {
    stop: async () => {
      stop = true;
      await loop;
      await producer?.close();
    },
  };
}

async function contender(c: Contender, pool: pg.Pool, schema: string, topic: string) {
  if (c === 'seed-batch-100') return baseline(pool, schema, topic, 100);
  if (c === 'one-row') return baseline(pool, schema, topic, 1);
  const relay = new OutboxRelay({
    databaseUrl: DB,
    brokers: BROKERS.split(','),
    schema,
    mode: c === 'redfence-eo' ? 'exactly-once' : 'at-least-once',
    topicTemplate: topic,
    progressTopic: `${topic}.progress`,
    transactionalIdPrefix: `${run}-${c}`,
    batchSize: 2000,
    ...(process.env.BENCH_LINGER_MS
      ? { producerConfig: { 'linger.ms': Number(process.env.BENCH_LINGER_MS) } }
      : {}),
    ...(process.env.BENCH_TXN_INTERVAL_MS
      ? { transactionIntervalMs: Number(process.env.BENCH_TXN_INTERVAL_MS) }
      : {}),
    pollIntervalMs: 1000,
    retentionMs: 0,
  });
  await relay.start();
  return {
    stop: async () => {
      if (process.env.BENCH_DEBUG)
        console.log(
          await relay.metrics.registry.getSingleMetricAsString('redfence_outbox_batch_duration_seconds'),
        );
      await relay.close();
    },
  };
}

async function fresh(pool: pg.Pool, label: string) {
  const schema = `rf_obench_${label.replace(/-/g, '_').slice(0, 18)}_${Date.now().toString(36)}`;
  const c = await pool.connect();
  try {
    await initOutbox(c, {
      schema,
      ...(process.env.BENCH_ROLES ? { roles: Number(process.env.BENCH_ROLES) } : {}),
    });
  } finally {
    c.release();
  }
  const topic = `${run}.${label}`;
  await createTopic(topic);
  return { schema, topic };
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0
    ? Number.NaN
    : (s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] as number);
};

async function throughput(pool: pg.Pool, c: Contender) {
  const { schema, topic } = await fresh(pool, `tp-${c}`);
  try {
    await pool.query(
      `INSERT INTO "${schema}".redfence_outbox (aggregatetype, aggregateid, type, payload)
       SELECT 'acct', 'a-' || (g % ${AGGREGATES}), 'moved', jsonb_build_object('n', g, 'pad', repeat('x', 100))
       FROM generate_series(1, ${ROWS}) g`,
    );
    const reader = new Reader(1000);
    await reader.start(topic);
    const t0 = performance.now();
    const r = await contender(c, pool, schema, topic);
    const deadline = t0 + SECONDS * 1000;
    while (reader.arrived.size < ROWS && performance.now() < deadline)
      await new Promise((x) => setTimeout(x, 50));
    const seen = reader.arrived.size;
    const times = [...reader.arrived.values()].sort((a, b) => a - b);
    await r.stop();
    await reader.stop();
    // sustained: from the 10th to the 90th percentile of arrivals (start-up and the tail left out); a
    // contender that did not finish in time: from its first arrival to the deadline
    const done = seen >= ROWS;
    const from = done ? (times[Math.floor(seen * 0.1)] as number) : (times[0] ?? t0);
    const to = done ? (times[Math.floor(seen * 0.9)] as number) : deadline;
    const counted = done ? Math.floor(seen * 0.9) - Math.floor(seen * 0.1) : seen;
    const secs = (to - from) / 1000;
    const first = times[0] ?? t0;
    return {
      contender: c,
      rows: seen,
      seconds: Number(secs.toFixed(2)),
      startupSeconds: Number(((first - t0) / 1000).toFixed(2)),
      finished: done,
      rowsPerSecond: Math.round(counted / secs),
    };
  } finally {
    await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
    await drops.pop()?.();
    await deleteProgress(`${topic}.progress`);
  }
}

async function lag(pool: pg.Pool, c: Contender) {
  const { schema, topic } = await fresh(pool, `lag-${c}`);
  try {
    const reader = new Reader(10);
    await reader.start(topic);
    const r = await contender(c, pool, schema, topic);
    // warm-up: rows of every aggregate (so of every role) published before the clock starts
    const warm = await pool.connect();
    try {
      await warm.query('BEGIN');
      const aggs = Array.from({ length: AGGREGATES }, (_, i) => i);
      const ids = await enqueue(
        warm,
        aggs.map((i) => ({ aggregateType: 'acct', aggregateId: `a-${i}`, type: 'warm' })),
        { schema },
      );
      await warm.query('COMMIT');
      const until = performance.now() + 60_000;
      while (ids.some((id) => !reader.arrived.has(id)) && performance.now() < until)
        await new Promise((x) => setTimeout(x, 20));
    } finally {
      warm.release();
    }
    const committedAt = new Map<string, number>();
    const tick = 10;
    const perTick = Math.max(1, Math.round((RATE * tick) / 1000));
    const t0 = performance.now();
    let n = 0;
    const writers = Array.from({ length: 4 }, async () => {
      const cl = await pool.connect();
      try {
        for (let k = 0; performance.now() - t0 < LAG_SECONDS * 1000; ) {
          const due = t0 + (k * tick * 4 + 0);
          k++;
          const wait = due - performance.now();
          if (wait > 0) await new Promise((x) => setTimeout(x, wait));
          await cl.query('BEGIN');
          const ids = await enqueue(
            cl,
            Array.from({ length: perTick }, () => ({
              aggregateType: 'acct',
              aggregateId: `a-${n++ % AGGREGATES}`,
              type: 'moved',
              payload: { n },
            })),
            { schema },
          );
          await cl.query('COMMIT');
          const at = performance.now();
          for (const id of ids) committedAt.set(id, at);
        }
      } finally {
        cl.release();
      }
    });
    await Promise.all(writers);
    const offered = committedAt.size / ((performance.now() - t0) / 1000);
    const until = performance.now() + 15_000;
    const missing = () => [...committedAt.keys()].some((id) => !reader.arrived.has(id));
    while (missing() && performance.now() < until) await new Promise((x) => setTimeout(x, 50));
    await r.stop();
    await reader.stop();
    const lags: number[] = [];
    for (const [id, at] of committedAt) {
      const got = reader.arrived.get(id);
      if (got !== undefined) lags.push(got - at);
    }
    return {
      contender: c,
      offeredPerSecond: Math.round(offered),
      committed: committedAt.size,
      received: lags.length,
      p50ms: Number(pct(lags, 50).toFixed(1)),
      p99ms: Number(pct(lags, 99).toFixed(1)),
      maxms: Number(Math.max(...lags).toFixed(1)),
    };
  } finally {
    await pool.query(`DROP SCHEMA "${schema}" CASCADE`);
    await drops.pop()?.();
    await deleteProgress(`${topic}.progress`);
  }
}

async function main() {
  const pool = new pg.Pool({ connectionString: DB, max: 16 });
  const only = (process.env.BENCH_ONLY || '').split(',').filter(Boolean);
  const list = CONTENDERS.filter((c) => only.length === 0 || only.includes(c));
  const result: Record<string, unknown> = { rows: ROWS, rate: RATE, when: new Date().toISOString() };
  const tp: Array<Awaited<ReturnType<typeof throughput>>> = [];
  for (const c of list) {
    const x = await throughput(pool, c);
    console.log(JSON.stringify(x));
    tp.push(x);
  }
  const lg: Array<Awaited<ReturnType<typeof lag>>> = [];
  for (const c of LAG_SECONDS > 0 ? list : []) {
    const x = await lag(pool, c);
    console.log(JSON.stringify(x));
    lg.push(x);
  }
  const rate = (c: Contender) => tp.find((x) => x.contender === c)?.rowsPerSecond ?? Number.NaN;
  result.throughput = tp;
  result.lag = lg;
  result.ratios = {
    eoOverOneRow: Number((rate('redfence-eo') / rate('one-row')).toFixed(1)),
    aloOverOneRow: Number((rate('redfence-alo') / rate('one-row')).toFixed(1)),
    eoOverSeed: Number((rate('redfence-eo') / rate('seed-batch-100')).toFixed(2)),
    aloOverSeed: Number((rate('redfence-alo') / rate('seed-batch-100')).toFixed(2)),
  };
  console.log(JSON.stringify(result.ratios));
  mkdirSync('bench/results', { recursive: true });
  const file = `bench/results/outbox-${Date.now()}.json`;
  writeFileSync(file, `${JSON.stringify(result, null, 2)}\n`);
  console.log(`results: ${file}`);
  await pool.end();
  await Promise.all(drops.map((d) => d()));
}

await main();
