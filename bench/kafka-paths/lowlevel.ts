/**
 * The low-level (node-rdkafka style) API of @confluentinc/kafka-javascript: batched `consume(n)`, produce
 * without a promise per message, delivery reports counted before any commit.
 */
import { RdKafka } from '@confluentinc/kafka-javascript';
import type { PathOptions, Running } from './measure.js';

type Consumer = InstanceType<typeof RdKafka.KafkaConsumer>;
type Producer = InstanceType<typeof RdKafka.Producer>;
type Offsets = { topic: string; partition: number; offset: number }[];

function connected<T extends Consumer | Producer>(client: T): Promise<T> {
  return new Promise((resolve, reject) => {
    client.connect({}, (err) => (err ? reject(err) : resolve(client)));
  });
}

function cb(fn: (done: (err: unknown) => void) => void): Promise<void> {
  return new Promise((resolve, reject) => fn((err) => (err ? reject(err) : resolve())));
}

/** The processor's consumer settings (read_committed, cooperative-sticky, no auto-commit), subscribed. */
async function consumer(opts: PathOptions): Promise<Consumer> {
  const c = new RdKafka.KafkaConsumer(
    {
      'bootstrap.servers': opts.brokers.join(','),
      'group.id': opts.groupId,
      'enable.auto.commit': false,
      'isolation.level': 'read_committed',
      'partition.assignment.strategy': 'cooperative-sticky',
      // the library's own handler: incrementalAssign / incrementalUnassign as the group decides
      rebalance_cb: true,
    },
    { 'auto.offset.reset': 'earliest' },
  );
  await connected(c);
  c.setDefaultConsumeTimeout(100);
  // return what is already fetched after the first message instead of waiting to fill n
  (
    c as unknown as { setDefaultIsTimeoutOnlyForFirstMessage(v: boolean): void }
  ).setDefaultIsTimeoutOnlyForFirstMessage(true);
  c.subscribe([opts.input]);
  return c;
}

/** An idempotent acks=all producer whose delivery reports arrive as events (polled in the background). */
async function producer(opts: PathOptions, lingerMs: number, transactionalId?: string): Promise<Producer> {
  const p = new RdKafka.Producer({
    'bootstrap.servers': opts.brokers.join(','),
    'enable.idempotence': true,
    acks: -1,
    'linger.ms': lingerMs,
    partitioner: 'murmur2_random',
    dr_cb: true,
    ...(transactionalId ? { 'transactional.id': transactionalId } : {}),
  });
  await connected(p);
  p.setPollInBackground(true);
  return p;
}

function consume(c: Consumer, n: number): Promise<RdKafka.Message[]> {
  return new Promise((resolve, reject) =>
    c.consume(n, (err, messages) => (err ? reject(err) : resolve(messages))),
  );
}

/** Next offset per partition of a batch (messages arrive in offset order within a partition). */
function nextOffsets(messages: RdKafka.Message[], into = new Map<string, Offsets[number]>()) {
  for (const m of messages)
    into.set(`${m.topic}:${m.partition}`, { topic: m.topic, partition: m.partition, offset: m.offset + 1 });
  return into;
}

interface Loop {
  stats: { records: number; batches: number; delivered: number; failure: string | undefined };
  stopping: boolean;
  finished: Promise<void>;
}

function running(loop: Loop, close: () => Promise<void>): Running {
  return {
    progress: () => loop.stats.records,
    batches: () => loop.stats.batches,
    delivered: () => loop.stats.delivered,
    failure: () => loop.stats.failure,
    async stop() {
      loop.stopping = true;
      await loop.finished.catch(() => undefined);
      await close();
    },
  };
}

function closer(c: Consumer, p: Producer): () => Promise<void> {
  return async () => {
    await new Promise<void>((r) => c.disconnect(() => r()));
    await new Promise<void>((r) => p.flush(10_000, () => p.disconnect(() => r())));
  };
}

/**
 * c: consume(n) -> produce each record unchanged -> wait for the batch's delivery reports -> commit the
 * batch's next offsets (asynchronous commit; the next batch is consumed meanwhile).
 */
export async function startLowLevel(opts: PathOptions, n: number, lingerMs: number): Promise<Running> {
  const c = await consumer(opts);
  const p = await producer(opts, lingerMs);
  const loop: Loop = {
    stats: { records: 0, batches: 0, delivered: 0, failure: undefined },
    stopping: false,
    finished: Promise.resolve(),
  };
  let waiter: (() => void) | undefined;
  let wanted = 0;
  p.on('delivery-report', (err) => {
    if (err) loop.stats.failure = `delivery failed: ${err.message}`;
    loop.stats.delivered++;
    if (waiter && loop.stats.delivered >= wanted) waiter();
  });
  let produced = 0;
  loop.finished = (async () => {
    while (!loop.stopping && loop.stats.failure === undefined) {
      const messages = await consume(c, n);
      if (messages.length === 0) continue;
      for (const m of messages) p.produce(opts.output, null, m.value, m.key, m.timestamp);
      produced += messages.length;
      wanted = produced;
      if (loop.stats.delivered < wanted) await new Promise<void>((r) => (waiter = r));
      waiter = undefined;
      if (loop.stats.failure !== undefined) break;
      c.commit([...nextOffsets(messages).values()]);
      loop.stats.records += messages.length;
      loop.stats.batches++;
    }
  })();
  loop.finished.catch((err: unknown) => (loop.stats.failure = String(err)));
  return running(loop, closer(c, p));
}

/**
 * d: one transaction per ~`per` records: beginTransaction, consume(n) until `per` records (or an empty
 * poll), produce each unchanged, sendOffsetsToTransaction with the consumer (group metadata), then
 * commitTransaction (which waits for the broker's acknowledgement of every record of the transaction);
 * the transaction counts once its delivery reports have all arrived here.
 */
export async function startTransactional(opts: PathOptions, per: number, lingerMs: number): Promise<Running> {
  const c = await consumer(opts);
  const p = await producer(opts, lingerMs, `${opts.groupId}-tx`);
  await cb((done) => p.initTransactions(30_000, done));
  const loop: Loop = {
    stats: { records: 0, batches: 0, delivered: 0, failure: undefined },
    stopping: false,
    finished: Promise.resolve(),
  };
  let waiter: (() => void) | undefined;
  let produced = 0;
  p.on('delivery-report', (err) => {
    if (err) loop.stats.failure = `delivery failed: ${err.message}`;
    loop.stats.delivered++;
    if (waiter && loop.stats.delivered >= produced) waiter();
  });
  loop.finished = (async () => {
    while (!loop.stopping && loop.stats.failure === undefined) {
      const first = await consume(c, per);
      if (first.length === 0) continue;
      await cb((done) => p.beginTransaction(done));
      const offsets = new Map<string, Offsets[number]>();
      let count = 0;
      let batch = first;
      for (;;) {
        for (const m of batch) p.produce(opts.output, null, m.value, m.key, m.timestamp);
        produced += batch.length;
        nextOffsets(batch, offsets);
        count += batch.length;
        if (count >= per) break;
        batch = await consume(c, per - count);
        if (batch.length === 0) break;
      }
      await cb((done) => p.sendOffsetsToTransaction([...offsets.values()], c, 30_000, done));
      await cb((done) => p.commitTransaction(30_000, done));
      // the commit waited for the broker's acknowledgements; their reports reach this thread just after
      if (loop.stats.delivered < produced) await new Promise<void>((r) => (waiter = r));
      waiter = undefined;
      loop.stats.records += count;
      loop.stats.batches++;
    }
  })();
  loop.finished.catch((err: unknown) => (loop.stats.failure = String(err)));
  return running(loop, closer(c, p));
}
