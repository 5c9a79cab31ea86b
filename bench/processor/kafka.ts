/** Small Kafka helpers for the processor benchmark (own copies; the bench does not import from test/). */
import { KafkaJS } from '@confluentinc/kafka-javascript';

const quiet = { logLevel: KafkaJS.logLevel.NOTHING };

export function kafkaClient(brokers: string[]): KafkaJS.Kafka {
  return new KafkaJS.Kafka({ kafkaJS: { brokers, ...quiet } });
}

export async function createTopics(
  kafka: KafkaJS.Kafka,
  topics: string[],
  partitions: number,
): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.createTopics({
      topics: topics.map((topic) => ({ topic, numPartitions: partitions, replicationFactor: 1 })),
    });
  } finally {
    await admin.disconnect();
  }
}

export async function deleteTopics(kafka: KafkaJS.Kafka, topics: string[]): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.deleteTopics({ topics }).catch(() => undefined);
  } finally {
    await admin.disconnect();
  }
}

/** Sum over partitions of a topic's end offsets (records + transaction markers). */
export async function endOffsetSum(kafka: KafkaJS.Kafka, topic: string): Promise<number> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const rows = await admin.fetchTopicOffsets(topic);
    return rows.reduce((s, r) => s + Number(r.high), 0);
  } finally {
    await admin.disconnect();
  }
}

/** Sum over a topic's partitions of a group's committed offsets (0 for never committed). */
export async function committedSum(kafka: KafkaJS.Kafka, group: string, topic: string): Promise<number> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const rows = await admin.fetchOffsets({ groupId: group, topics: [topic] });
    return (rows[0]?.partitions ?? []).reduce((s, p) => s + Math.max(0, Number(p.offset)), 0);
  } finally {
    await admin.disconnect();
  }
}

/** Produces `count` messages made by `make(i)`, `window` sends of `chunk` messages in flight. */
export async function preload(
  kafka: KafkaJS.Kafka,
  topic: string,
  count: number,
  make: (i: number) => { key: string; value: string; timestamp?: string },
  chunk = 1000,
  window = 8,
): Promise<void> {
  const producer = kafka.producer({
    partitioner: 'murmur2_random',
    'enable.idempotence': true,
    'linger.ms': 5,
    kafkaJS: quiet,
  } as KafkaJS.ProducerConstructorConfig);
  await producer.connect();
  try {
    let next = 0;
    const worker = async () => {
      while (next < count) {
        const from = next;
        next = Math.min(count, next + chunk);
        const messages = [];
        for (let i = from; i < next; i++) messages.push(make(i));
        await producer.send({ topic, messages });
      }
    };
    await Promise.all(Array.from({ length: window }, worker));
  } finally {
    await producer.disconnect();
  }
}

/** The processor's producer and consumer settings, connected and subscribed to `input`. */
async function connectPair(
  kafka: KafkaJS.Kafka,
  opts: { input: string; groupId: string; maxBatchSize: number; lingerMs?: number },
): Promise<{ producer: KafkaJS.Producer; consumer: KafkaJS.Consumer }> {
  const producer = kafka.producer({
    partitioner: 'murmur2_random',
    'enable.idempotence': true,
    acks: -1,
    'linger.ms': opts.lingerMs ?? 5,
    kafkaJS: quiet,
  } as KafkaJS.ProducerConstructorConfig);
  await producer.connect();
  const consumer = kafka.consumer({
    'group.id': opts.groupId,
    'enable.auto.commit': false,
    'auto.offset.reset': 'earliest',
    'isolation.level': 'read_committed',
    'js.consumer.max.batch.size': opts.maxBatchSize,
    'partition.assignment.strategy': 'cooperative-sticky',
    kafkaJS: quiet,
  } as unknown as KafkaJS.ConsumerConstructorConfig);
  await consumer.connect();
  await consumer.subscribe({ topics: [opts.input] });
  return { producer, consumer };
}

/** Positive integer from the environment, or the fallback. */
export function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer, got ${raw}`);
  return n;
}

/** Comma-separated positive integers from the environment, or the fallback list. */
export function envIntList(name: string, fallback: string): number[] {
  return (process.env[name] || fallback).split(',').map((s) => {
    const n = Number(s.trim());
    if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`${name}: bad entry ${JSON.stringify(s)}`);
    return n;
  });
}

/** The benchmarks' orders: customer by a multiplicative hash of i over `keys`, amount 1..100, ~100 bytes. */
export function orderMaker(keys: number): (i: number) => { key: string; value: string } {
  return (i) => {
    const customer = `c${((i * 2654435761) >>> 0) % keys}`;
    const amount = (i % 100) + 1;
    const base = JSON.stringify({ customer, amount, pad: '' });
    const value = JSON.stringify({ customer, amount, pad: 'x'.repeat(Math.max(0, 100 - base.length)) });
    return { key: customer, value };
  };
}

/** Produces a batch's outputs, awaits delivery, commits the batch and counts it. */
async function sendAndCommit(
  to: {
    producer: KafkaJS.Producer;
    consumer: KafkaJS.Consumer;
    output: string;
    stats: { records: number; batches: number };
  },
  batch: { topic: string; partition: number; messages: { offset: string }[] },
  messages: KafkaJS.Message[],
): Promise<void> {
  await to.producer.send({ topic: to.output, messages });
  const next = Number(batch.messages.at(-1)?.offset) + 1;
  await to.consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: String(next) }]);
  to.stats.records += batch.messages.length;
  to.stats.batches++;
}

function contender(
  producer: KafkaJS.Producer,
  consumer: KafkaJS.Consumer,
  stats: { records: number; batches: number },
): Passthrough {
  return {
    stats,
    async stop() {
      await consumer.disconnect().catch(() => undefined);
      await producer.disconnect().catch(() => undefined);
    },
  };
}

export interface Passthrough {
  /** Records whose batch was produced and committed. */
  readonly stats: { records: number; batches: number };
  stop(): Promise<void>;
}

/**
 * The Kafka I/O ceiling: the processor's consumer and producer settings (read_committed, cooperative-sticky,
 * idempotent acks=all producer, linger 5 ms), eachBatch with one partition at a time; each record is produced
 * unchanged (key, value, timestamp) to `output`, delivery awaited, then the batch's offset committed.
 * `lingerMs` (5) is the producer's linger.ms.
 */
export async function startPassthrough(
  kafka: KafkaJS.Kafka,
  opts: { input: string; output: string; groupId: string; maxBatchSize: number; lingerMs?: number },
): Promise<Passthrough> {
  const { producer, consumer } = await connectPair(kafka, opts);
  const stats = { records: 0, batches: 0 };
  await consumer.run({
    partitionsConsumedConcurrently: 1,
    eachBatch: async ({ batch }) => {
      if (batch.messages.length === 0) return;
      await sendAndCommit(
        { producer, consumer, output: opts.output, stats },
        batch,
        batch.messages.map((m) => ({ key: m.key ?? null, value: m.value ?? null, timestamp: m.timestamp })),
      );
    },
  });
  return contender(producer, consumer, stats);
}

/**
 * The naive contender, seed 000 section 6 done literally: the same consumer and producer as the
 * passthrough; for each record, one after another, read the customer's total (HGET), add the amount,
 * and run the one-record sketch script (EVALSHA) with the new total; then produce the batch's outputs,
 * await delivery and commit the batch.
 */
export async function startNaive(
  kafka: KafkaJS.Kafka,
  redis: import('ioredis').Redis,
  opts: { input: string; output: string; groupId: string; maxBatchSize: number; store: string },
): Promise<Passthrough> {
  const { readFileSync } = await import('node:fs');
  // the sketch as seed 000 wrote it, kept as a test fixture (read as data, as bench/fence does)
  const script = readFileSync(new URL('../../test/fence/fixtures/seed-sketch.lua', import.meta.url), 'utf8');
  const sha = (await redis.script('LOAD', script)) as string;
  const { producer, consumer } = await connectPair(kafka, opts);
  const epochs = new Map<number, number>();
  const stats = { records: 0, batches: 0 };
  await consumer.run({
    partitionsConsumedConcurrently: 1,
    eachBatch: async ({ batch }) => {
      if (batch.messages.length === 0) return;
      const epochKey = `rf:{${opts.store}:epoch:${batch.partition}}`;
      let epoch = epochs.get(batch.partition);
      if (epoch === undefined) {
        epoch = await redis.incr(epochKey);
        epochs.set(batch.partition, epoch);
      }
      const out: { key: Buffer | null; value: string; timestamp: string }[] = [];
      for (const m of batch.messages) {
        const key = m.key?.toString('utf8') ?? '';
        const order = JSON.parse(m.value?.toString('utf8') ?? '{}') as { amount: number };
        const stateKey = `rf:{${opts.store}:${key}}`;
        const total = Number((await redis.hget(stateKey, 'value')) ?? 0) + order.amount;
        const reply = (await redis.evalsha(
          sha,
          2,
          stateKey,
          epochKey,
          batch.partition,
          m.offset,
          epoch,
          String(total),
        )) as string[];
        const timestamp = m.timestamp;
        if (reply[0] === 'APPLY' || reply[0] === 'REBASE')
          out.push({ key: m.key ?? null, value: String(total), timestamp });
        else if (reply[0] === 'REEMIT') out.push({ key: m.key ?? null, value: String(reply[1]), timestamp });
      }
      await sendAndCommit({ producer, consumer, output: opts.output, stats }, batch, out);
    },
  });
  return contender(producer, consumer, stats);
}
