/**
 * e: @platformatic/kafka (pure TypeScript), when it is installed outside this package
 * (BENCH_PLATFORMATIC_DIR, /tmp/pk) and run on Node >= 22.22 (run.ts starts this file with it). Consumer
 * stream (committed offsets, earliest without, read_committed, autocommit off); up to 5,000 fetched
 * records per step are produced unchanged (idempotent, acks=all; send() resolves when the broker
 * acknowledged), then their next offsets committed. Imports no @confluentinc code (its binding is
 * built for the other Node).
 */
import { pathOptions, type Running, report, timed } from './measure.js';

interface Message {
  topic: string;
  partition: number;
  offset: bigint;
  key: Buffer | undefined;
  value: Buffer | undefined;
  timestamp: bigint;
}
interface Stream extends AsyncIterable<Message> {
  readableLength: number;
  close(): Promise<void>;
}
interface Module {
  Consumer: new (
    o: Record<string, unknown>,
  ) => {
    consume(o: Record<string, unknown>): Promise<Stream>;
    commit(o: {
      offsets: { topic: string; partition: number; offset: bigint; leaderEpoch: number }[];
    }): Promise<void>;
    close(force?: boolean): Promise<void>;
  };
  Producer: new (
    o: Record<string, unknown>,
  ) => {
    send(o: { messages: Record<string, unknown>[] }): Promise<unknown>;
    close(): Promise<void>;
  };
  FetchIsolationLevels: { READ_COMMITTED: number };
}

const opts = pathOptions();
const PER_STEP = 5000;
const dir = process.env.BENCH_PLATFORMATIC_DIR ?? '/tmp/pk';
const kafka = (await import(`${dir}/node_modules/@platformatic/kafka/dist/index.js`)) as Module;
const pkg = (await import(`${dir}/node_modules/@platformatic/kafka/package.json`, {
  with: { type: 'json' },
})) as { default: { version: string } };

async function start(): Promise<Running> {
  const base = { bootstrapBrokers: opts.brokers, clientId: opts.groupId };
  const producer = new kafka.Producer({ ...base, idempotent: true, acks: -1 });
  const consumer = new kafka.Consumer({ ...base, groupId: opts.groupId, autocommit: false });
  const stream = await consumer.consume({
    topics: [opts.input],
    mode: 'committed',
    fallbackMode: 'earliest',
    isolationLevel: kafka.FetchIsolationLevels.READ_COMMITTED,
  });
  const stats = { records: 0, batches: 0, failure: undefined as string | undefined };
  let stopping = false;
  let batch: Message[] = [];
  const step = async () => {
    const messages = batch;
    batch = [];
    await producer.send({
      messages: messages.map((m) => ({
        topic: opts.output,
        key: m.key,
        value: m.value,
        timestamp: m.timestamp,
      })),
    });
    const next = new Map<string, { topic: string; partition: number; offset: bigint; leaderEpoch: number }>();
    for (const m of messages)
      next.set(`${m.topic}:${m.partition}`, {
        topic: m.topic,
        partition: m.partition,
        offset: m.offset + 1n,
        leaderEpoch: -1,
      });
    await consumer.commit({ offsets: [...next.values()] });
    stats.records += messages.length;
    stats.batches++;
  };
  const finished = (async () => {
    for await (const m of stream) {
      if (stopping) break;
      batch.push(m);
      if (batch.length >= PER_STEP || stream.readableLength === 0) await step();
    }
  })();
  finished.catch((err: unknown) => (stats.failure = String(err)));
  return {
    progress: () => stats.records,
    batches: () => stats.batches,
    delivered: () => stats.records,
    failure: () => stats.failure,
    async stop() {
      stopping = true;
      await stream.close().catch(() => undefined);
      await finished.catch(() => undefined);
      await consumer.close(true).catch(() => undefined);
      await producer.close().catch(() => undefined);
    },
  };
}

report(await timed(opts.records, `@platformatic/kafka ${pkg.default.version}`, start));
