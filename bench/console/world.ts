/**
 * The console benchmark's world on the real broker and Redis (bench/console/run.ts): an input topic of
 * `partitions` partitions with `perPartition` records each and a group that committed half of each
 * (lagging), a dead-letter topic of `dltPartitions` partitions holding `deadLetters` redfence dead
 * letters (produced in batches of 1,000, 8 sends in flight), a key with fence state, and `instances`
 * registered instances owning the input's partitions, all with one metrics server's address. Every
 * topic, key and registration goes in {@link World.drop}.
 */
import { KafkaJS } from '@confluentinc/kafka-javascript';
import type { Redis } from 'ioredis';
import { deadLetterRecord } from '../../src/dead-letter/record.js';
import { Fence } from '../../src/fence/index.js';
import { HealthState, RedfenceMetrics, startMetricsServer } from '../../src/index.js';
import { InstanceRegistration, setRegistryMetricsAddress } from '../../src/runtime/registry.js';

export interface WorldOptions {
  brokers: string[];
  partitions: number;
  perPartition: number;
  deadLetters: number;
  dltPartitions: number;
  instances: number;
}

export interface World {
  input: string;
  dlt: string;
  group: string;
  store: string;
  stateKey: string;
  /** Seconds each setup step took. */
  setup: Record<string, number>;
  drop(): Promise<void>;
}

const quiet = { logLevel: KafkaJS.logLevel.NOTHING };
const CHUNK = 1000;
const WINDOW = 8;

async function timed<T>(into: Record<string, number>, name: string, f: () => Promise<T>): Promise<T> {
  const t0 = performance.now();
  const r = await f();
  into[name] = Number(((performance.now() - t0) / 1000).toFixed(2));
  return r;
}

async function createTopics(admin: KafkaJS.Admin, topics: Array<{ topic: string; partitions: number }>) {
  await admin.createTopics({
    topics: topics.map((t) => ({ topic: t.topic, numPartitions: t.partitions, replicationFactor: 1 })),
  });
  // every partition led before anything is produced (1,000 partitions take the controller a while)
  for (let i = 0; ; i++) {
    const seen = await admin.fetchTopicMetadata({ topics: topics.map((t) => t.topic) }).catch(() => []);
    const ready = topics.every((t) => {
      const m = seen.find((x) => x.name === t.topic);
      return m?.partitions.length === t.partitions && m.partitions.every((p) => p.leader >= 0);
    });
    if (ready) return;
    if (i > 600) throw new Error('topics without leaders after 5 minutes');
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** Sends `count` messages made by `make(i)`: batches of CHUNK, WINDOW sends in flight. */
async function produce(
  producer: KafkaJS.Producer,
  topic: string,
  count: number,
  make: (i: number) => KafkaJS.Message,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const from = next;
      next = Math.min(count, next + CHUNK);
      const messages: KafkaJS.Message[] = [];
      for (let i = from; i < next; i++) messages.push(make(i));
      await producer.send({ topic, messages });
    }
  };
  await Promise.all(Array.from({ length: WINDOW }, worker));
}

export async function buildWorld(o: WorldOptions, redis: Redis, run: string): Promise<World> {
  const input = `bench-console-${run}`;
  const dlt = `${input}.DLT`;
  const group = `${input}-g`;
  const store = `bench_console_${run}`;
  const stateKey = 'customer-7';
  const setup: Record<string, number> = {};
  const kafka = new KafkaJS.Kafka({ kafkaJS: { brokers: o.brokers, ...quiet } });
  const admin = kafka.admin();
  await admin.connect();
  const registrations: InstanceRegistration[] = [];
  let metricsServer: { close(): Promise<void> } | undefined;
  const drop = async () => {
    await Promise.all(registrations.map((r) => r.stop()));
    await metricsServer?.close();
    await admin.deleteTopics({ topics: [input, dlt] }).catch(() => undefined);
    await admin.deleteGroups([group]).catch(() => undefined);
    await admin.disconnect();
    const keys = await redis.keys(`rf:*${store}*`);
    if (keys.length > 0) await redis.del(...keys);
  };
  try {
    await timed(setup, 'createTopics', () =>
      createTopics(admin, [
        { topic: input, partitions: o.partitions },
        { topic: dlt, partitions: o.dltPartitions },
      ]),
    );
    const producer = kafka.producer({
      'enable.idempotence': true,
      'linger.ms': 20,
      kafkaJS: quiet,
    } as KafkaJS.ProducerConstructorConfig);
    await producer.connect();
    try {
      await timed(setup, 'produceInput', () =>
        produce(producer, input, o.partitions * o.perPartition, (i) => ({
          key: `k${i}`,
          value: JSON.stringify({ customer: `c-${i % 1000}`, amount: 1 }),
          partition: i % o.partitions,
        })),
      );
      const error = new Error('bench: rejected');
      await timed(setup, 'produceDeadLetters', () =>
        produce(producer, dlt, o.deadLetters, (i) => {
          const partition = i % o.partitions;
          const dl = deadLetterRecord(
            dlt,
            group,
            {
              topic: input,
              partition,
              offset: String(Math.floor(i / o.partitions)),
              key: Buffer.from(`k${i}`),
              value: Buffer.from(`{"customer":"c-${i % 1000}","amount":"bad"}`),
              headers: {},
              timestamp: String(Date.now()),
            },
            i % 10 === 0 ? 'undecodable' : 'rejected',
            error,
          );
          return {
            key: dl.key,
            value: dl.value,
            headers: dl.headers as KafkaJS.IHeaders,
            partition: i % o.dltPartitions,
          };
        }),
      );
    } finally {
      await producer.disconnect();
    }
    // the lagging group: half of each partition committed (a commit without joining the group)
    await timed(setup, 'commitHalf', async () => {
      const consumer = kafka.consumer({
        'group.id': group,
        kafkaJS: quiet,
      } as KafkaJS.ConsumerConstructorConfig);
      await consumer.connect();
      try {
        const half = String(Math.floor(o.perPartition / 2));
        for (let p = 0; p < o.partitions; p += 500)
          await consumer.commitOffsets(
            Array.from({ length: Math.min(500, o.partitions - p) }, (_, k) => ({
              topic: input,
              partition: p + k,
              offset: half,
            })),
          );
      } finally {
        await consumer.disconnect();
      }
    });
    const fence = new Fence({ redis, store, mode: 'strict' });
    const epoch = await fence.acquireEpoch(input, 0);
    await fence.apply({
      topic: input,
      partition: 0,
      epoch,
      committedOffset: -1,
      key: stateKey,
      records: [{ offset: 3, operation: { op: 'add', by: 250 }, output: 'state' }],
    });
    const metrics = new RedfenceMetrics();
    const server = await startMetricsServer({ metrics, health: new HealthState(), port: 0 });
    metricsServer = server;
    setRegistryMetricsAddress(server.host, server.port);
    for (let n = 0; n < o.instances; n++) {
      const owned: Array<{ topic: string; partition: number; epoch: number }> = [];
      for (let p = n; p < o.partitions; p += o.instances)
        owned.push({ topic: input, partition: p, epoch: 1 });
      const reg = new InstanceRegistration(redis, 'processor', () => ({
        id: `${input}-${n}`,
        group,
        module: store,
        mode: 'exactly-once',
        partitions: owned,
      }));
      reg.start();
      registrations.push(reg);
    }
  } catch (err) {
    await drop();
    throw err;
  }
  return { input, dlt, group, store, stateKey, setup, drop };
}
