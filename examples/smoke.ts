/**
 * The smoke job: per-customer order totals through a real Kafka broker and a real Redis, with the
 * fence in between. Produces N keyed orders, consumes them in batches, applies each key's records in
 * one fence call (Redis write), produces the running totals (produce), then commits (commit), and
 * prints a verification table. Exits non-zero if anything does not add up.
 *
 * Until the processor exists this is the demo; the processor turns it into the two-instance kill run.
 *
 *   KAFKA_BROKERS (127.0.0.1:19092)  REDIS_URL (redis://127.0.0.1:16379)
 *   SMOKE_RECORDS (20000)  SMOKE_CUSTOMERS (500)
 */
import { randomBytes } from 'node:crypto';
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { Redis } from 'ioredis';
import { type ApplyRequest, Fence, partitionFor } from '../src/index.js';

const BROKERS = (process.env.KAFKA_BROKERS ?? '127.0.0.1:19092').split(',');
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:16379';
const N = Number(process.env.SMOKE_RECORDS ?? 20_000);
const K = Number(process.env.SMOKE_CUSTOMERS ?? 500);
const PARTITIONS = 6;
const DEADLINE_MS = 120_000;

const run = `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
const ORDERS = `rf-smoke-orders-${run}`;
const TOTALS = `rf-smoke-totals-${run}`;
const quiet = { logLevel: KafkaJS.logLevel.NOTHING };

const kafka = new KafkaJS.Kafka({ kafkaJS: { brokers: BROKERS, ...quiet } });
const admin = kafka.admin();
const redis = new Redis(REDIS_URL, { enableAutoPipelining: true, maxRetriesPerRequest: 3 });
const fence = new Fence({ redis, store: `smoke_${run}`, mode: 'strict' });

async function main(): Promise<number> {
  await admin.connect();
  await admin.createTopics({
    topics: [
      { topic: ORDERS, numPartitions: PARTITIONS, replicationFactor: 1 },
      { topic: TOTALS, numPartitions: PARTITIONS, replicationFactor: 1 },
    ],
  });

  // 1. N orders keyed by customer, placed by the Java-compatible partitioner.
  const producer = kafka.producer({
    partitioner: 'murmur2_random',
    'enable.idempotence': true,
    'linger.ms': 5,
    kafkaJS: quiet,
  });
  await producer.connect();
  let inputSum = 0n;
  const orders = Array.from({ length: N }, (_, i) => {
    const amount = 1 + ((i * 7919) % 10_000); // cents
    inputSum += BigInt(amount);
    const customer = `customer-${(i * 31) % K}`;
    return { key: customer, value: JSON.stringify({ id: i, customer, amount }) };
  });
  for (let i = 0; i < orders.length; i += 1000)
    await producer.send({ topic: ORDERS, messages: orders.slice(i, i + 1000) });

  // 2. Consume in batches: Redis write (fence), then produce, then commit.
  const verdicts = new Map<string, number>();
  const epochs = new Map<number, number>();
  const committed = new Map<number, number>();
  let consumed = 0;
  let produced = 0;
  let dlq = 0;
  const consumer = kafka.consumer({
    'js.consumer.max.batch.size': 500,
    kafkaJS: { groupId: `rf-smoke-${run}`, fromBeginning: true, autoCommit: false, ...quiet },
  });
  await consumer.connect();
  await consumer.subscribe({ topics: [ORDERS] });
  const started = performance.now();
  let finish: () => void = () => undefined;
  const done = new Promise<void>((resolve) => {
    finish = resolve;
  });

  await consumer.run({
    eachBatch: async ({ batch }) => {
      const { partition } = batch;
      let epoch = epochs.get(partition);
      if (epoch === undefined) {
        epoch = await fence.acquireEpoch(ORDERS, partition); // the processor does this on assignment
        epochs.set(partition, epoch);
      }
      const byKey = new Map<string, ApplyRequest['records'][number][]>();
      for (const m of batch.messages) {
        const key = m.key?.toString() ?? '';
        if (partitionFor(key, PARTITIONS) !== partition) {
          dlq++; // the processor sends these to the dead-letter topic
          continue;
        }
        const { amount } = JSON.parse(m.value?.toString() ?? '{}') as { amount: number };
        const list = byKey.get(key) ?? [];
        if (list.length === 0) byKey.set(key, list);
        list.push({ offset: Number(m.offset), operation: { op: 'add', by: amount }, output: 'state' });
      }
      const requests = [...byKey].map(([key, records]) => ({
        topic: ORDERS,
        partition,
        epoch: epoch as number,
        committedOffset: committed.get(partition) ?? -1,
        key,
        records,
      }));
      const results = await fence.applyBatch(requests);
      const messages: { key: string; value: string }[] = [];
      requests.forEach((req, i) => {
        for (const r of results[i] ?? []) {
          verdicts.set(r.verdict, (verdicts.get(r.verdict) ?? 0) + 1);
          if (r.verdict === 'FENCE') throw new Error(`fenced on partition ${partition}`);
          const out = 'output' in r ? r.output : undefined;
          if (out?.value)
            messages.push({
              key: String(req.key),
              value: JSON.stringify({ customer: req.key, total: Number(out.value) }),
            });
        }
      });
      if (messages.length > 0) await producer.send({ topic: TOTALS, messages });
      produced += messages.length;
      const next = Number(batch.lastOffset()) + 1;
      await consumer.commitOffsets([{ topic: ORDERS, partition, offset: String(next) }]);
      committed.set(partition, next);
      consumed += batch.messages.length;
      if (consumed >= N) finish();
    },
  });

  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    done,
    new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`consumed only ${consumed}/${N} records in ${DEADLINE_MS / 1000} s`)),
        DEADLINE_MS,
      );
    }),
  ]).finally(() => clearTimeout(timer));
  const seconds = (performance.now() - started) / 1000;
  await consumer.disconnect();
  await producer.disconnect();

  // 3. Verify: Redis totals against the inputs; outputs on the totals topic.
  let stateSum = 0n;
  for (let c = 0; c < K; c++) {
    const s = await fence.read(`customer-${c}`);
    stateSum += BigInt(s?.value?.toString() ?? '0');
  }
  const ends = await admin.fetchTopicOffsets(TOTALS);
  const outputs = ends.reduce((a, p) => a + Number(p.high), 0);
  await admin.deleteTopics({ topics: [ORDERS, TOTALS] });

  const rows: Array<[string, string, boolean]> = [
    ['input records', String(N), true],
    ['records consumed', String(consumed), consumed === N],
    ['outputs produced', String(produced), produced === N],
    ['outputs on the totals topic', String(outputs), outputs === N],
    ['sum of input amounts', String(inputSum), true],
    ['sum of totals in Redis', String(stateSum), stateSum === inputSum],
    ['dead letters (wrong partition)', String(dlq), dlq === 0],
    ['verdicts', JSON.stringify(Object.fromEntries(verdicts)), (verdicts.get('APPLY') ?? 0) === N],
    ['records per second', (N / seconds).toFixed(0), true],
  ];
  const ok = rows.every(([, , pass]) => pass);
  process.stdout.write(`\nredfence smoke job: ${N} orders over ${K} customers, ${PARTITIONS} partitions\n\n`);
  process.stdout.write('| check | value | ok |\n| --- | --- | --- |\n');
  for (const [name, value, pass] of rows)
    process.stdout.write(`| ${name} | ${value} | ${pass ? 'yes' : 'NO'} |\n`);
  process.stdout.write(`\n${ok ? 'PASS' : 'FAIL'}\n`);
  return ok ? 0 : 1;
}

main()
  .then((code) => {
    process.exitCode = code;
  })
  .catch((err: unknown) => {
    process.stderr.write(
      `smoke job failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exitCode = 1;
  })
  .finally(async () => {
    await admin.disconnect().catch(() => undefined);
    redis.disconnect();
  });
