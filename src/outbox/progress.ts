/**
 * Exactly-once bookkeeping in Kafka: every relay transaction also writes one progress record (the ids
 * of the rows it publishes) to partition <role> of a compacted progress topic. The rows are marked
 * published in PostgreSQL only after the transaction commits, so a relay can die (or freeze) between
 * the two. The next holder of the role first fences the old one (initTransactions with the role's
 * transactional id: an open transaction is aborted, a later commit refused), then reads the role's last
 * committed progress record (read_committed) and marks those rows: whatever the old holder committed
 * is marked, whatever it did not is published again, once.
 */
import { KafkaJS, RdKafka } from '@confluentinc/kafka-javascript';
import { RedfenceError } from '../errors/index.js';
import { connectWatched } from '../kafka/connect.js';
import type { OutRecord } from '../kafka/types.js';
import { nameClash, type OutboxIdentity, sameOutbox } from './identity.js';

export interface Progress {
  readonly epoch: number;
  readonly ids: string[];
  /** The outbox that wrote it (identity.ts); absent in records of relays older than the field. */
  readonly outbox?: OutboxIdentity;
}

export function progressRecord(topic: string, role: number, p: Progress): OutRecord {
  return { topic, partition: role, key: `role-${role}`, value: JSON.stringify(p) };
}

/**
 * Creates the progress topic (one partition per role, compacted) if it is missing. `properties`:
 * librdkafka's, brokers and security included.
 */
export async function ensureProgressTopic(
  properties: Record<string, unknown>,
  topic: string,
  roles: number,
): Promise<void> {
  const kafka = new KafkaJS.Kafka({
    ...properties,
    kafkaJS: { logLevel: KafkaJS.logLevel.NOTHING },
  } as unknown as KafkaJS.CommonConstructorConfig);
  const admin = kafka.admin();
  await admin.connect();
  try {
    const meta = await admin.fetchTopicMetadata({ topics: [topic] }).catch(() => undefined);
    const have = meta?.[0]?.partitions.length ?? 0;
    if (have >= roles) return;
    if (have > 0)
      throw new RedfenceError(
        'RF_TOPIC_MISSING',
        `progress topic ${topic} has ${have} partitions, fewer than the outbox's ${roles} roles: delete it or add partitions`,
      );
    await admin
      .createTopics({
        topics: [
          {
            topic,
            numPartitions: roles,
            replicationFactor: -1,
            configEntries: [{ name: 'cleanup.policy', value: 'compact' }],
          },
        ],
      })
      .catch((err: unknown) => {
        // another relay made it meanwhile
        if ((err as { code?: unknown })?.code !== KafkaJS.ErrorCodes.ERR_TOPIC_ALREADY_EXISTS) throw err;
      });
  } finally {
    await admin.disconnect();
  }
}

type Consumer = InstanceType<typeof RdKafka.KafkaConsumer>;
const cb = <T>(fn: (done: (err: unknown, v?: T) => void) => void) =>
  new Promise<T>((resolve, reject) => fn((err, v) => (err ? reject(err) : resolve(v as T))));

/**
 * The last committed progress record of a role, or undefined. Call it only after fencing the role's
 * transactional id: then no transaction of the role is open and the partition's end is stable.
 */
export async function lastProgress(
  properties: Record<string, unknown>,
  topic: string,
  role: number,
  timeoutMs = 30_000,
): Promise<Progress | undefined> {
  return (await lastProgresses(properties, topic, [role], timeoutMs)).get(role);
}

/**
 * Refuses (RF_OUTBOX_NAME_CLASH) when the last committed progress record of one of `roles` was written
 * by another outbox. Read without fencing (before any transactional producer of the relay exists), so
 * it sees what is committed, and waits for a transaction still open on a partition to end.
 */
export async function checkProgressOwner(
  properties: Record<string, unknown>,
  topic: string,
  roles: readonly number[],
  identity: OutboxIdentity,
  timeoutMs = 30_000,
): Promise<void> {
  for (const p of (await lastProgresses(properties, topic, roles, timeoutMs)).values())
    if (p !== undefined && !sameOutbox(identity, p.outbox)) throw nameClash(topic, identity, p.outbox);
}

/** The last committed progress record of each of `roles` (one consumer, partition after partition). */
async function lastProgresses(
  properties: Record<string, unknown>,
  topic: string,
  roles: readonly number[],
  timeoutMs: number,
): Promise<Map<number, Progress | undefined>> {
  const consumer: Consumer = new RdKafka.KafkaConsumer(
    {
      ...properties,
      'group.id': `redfence-outbox-progress-${process.pid}-${Date.now()}`,
      'enable.auto.commit': false,
      'isolation.level': 'read_committed',
    },
    { 'auto.offset.reset': 'earliest' },
  );
  consumer.on('event.error', () => undefined);
  await connectWatched(consumer, 'progress reader', {
    timeoutMs,
    brokers: String(properties['bootstrap.servers'] ?? 'the bootstrap servers'),
  });
  const deadline = Date.now() + timeoutMs;
  const out = new Map<number, Progress | undefined>();
  try {
    for (const role of roles) out.set(role, await readLast(consumer, topic, role, deadline));
    return out;
  } finally {
    await cb((done) => consumer.disconnect(done)).catch(() => undefined);
  }
}

async function readLast(
  consumer: Consumer,
  topic: string,
  role: number,
  deadline: number,
): Promise<Progress | undefined> {
  const w = await cb<{ lowOffset: number; highOffset: number }>((done) =>
    consumer.queryWatermarkOffsets(topic, role, Math.max(1000, deadline - Date.now()), done),
  );
  const high = w.highOffset;
  // A committed transaction is a record and a marker; aborted ones add the same. Look back far enough
  // to meet one record, doubling the window.
  for (let span = 8; ; span *= 4) {
    const from = Math.max(w.lowOffset, high - span);
    let last: Progress | undefined;
    consumer.assign([{ topic, partition: role, offset: from }]);
    for (;;) {
      const at = consumer.position([{ topic, partition: role }])[0]?.offset;
      const pos = at === undefined || at < 0 ? from : at;
      if (pos >= high) break;
      if (Date.now() > deadline) throw new Error(`reading progress topic ${topic}[${role}] timed out`);
      const batch = await cb<Array<{ value?: Buffer | null }>>((done) => consumer.consume(500, done));
      for (const m of batch) if (m.value) last = JSON.parse(m.value.toString()) as Progress;
    }
    consumer.unassign();
    if (last !== undefined || from === w.lowOffset) return last;
  }
}
