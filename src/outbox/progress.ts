/**
 * Exactly-once bookkeeping in Kafka: every relay transaction also writes one progress record (the ids
 * of the rows it publishes) to partition <role> of a compacted progress topic. The rows are marked
 * published in PostgreSQL only after the transaction commits, so a relay can die (or freeze) between
 * the two. The next holder of the role first fences the old one (initTransactions with the role's
 * transactional id: an open transaction is aborted, a later commit refused), then reads the role's last
 * committed progress record (read_committed) and marks those rows: whatever the old holder committed
 * is marked, whatever it did not is published again, once. The records are read with the one log
 * reader (src/kafka/log-reader.ts): assigned, read_committed, never committing.
 */
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { RedfenceError } from '../errors/index.js';
import { LogReader } from '../kafka/log-reader.js';
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

/**
 * The last committed progress record of a role, or undefined. Call it only after fencing the role's
 * transactional id: then no transaction of the role is open and the partition's end is stable.
 * `signal`: stops the read (a relay's destroy).
 */
export async function lastProgress(
  properties: Record<string, unknown>,
  topic: string,
  role: number,
  timeoutMs = 30_000,
  signal?: AbortSignal,
): Promise<Progress | undefined> {
  return (await lastProgresses(properties, topic, [role], timeoutMs, signal)).get(role);
}

/**
 * Refuses (RF_OUTBOX_NAME_CLASH) when the last committed progress record of one of `roles` was written
 * by another outbox. Read without fencing (before any transactional producer of the relay exists), so
 * it sees what is committed, and waits for a transaction still open on a partition to end (fails after
 * `timeoutMs` without progress).
 */
export async function checkProgressOwner(
  properties: Record<string, unknown>,
  topic: string,
  roles: readonly number[],
  identity: OutboxIdentity,
  timeoutMs = 30_000,
  signal?: AbortSignal,
): Promise<void> {
  for (const p of (await lastProgresses(properties, topic, roles, timeoutMs, signal)).values())
    if (p !== undefined && !sameOutbox(identity, p.outbox)) throw nameClash(topic, identity, p.outbox);
}

/** The last committed progress record of each of `roles`: the log reader, partition after partition. */
async function lastProgresses(
  properties: Record<string, unknown>,
  topic: string,
  roles: readonly number[],
  timeoutMs: number,
  signal: AbortSignal | undefined,
): Promise<Map<number, Progress | undefined>> {
  try {
    const reader = await LogReader.open({
      client: { properties },
      timeoutMs,
      ...(signal === undefined ? {} : { signal }),
    });
    const out = new Map<number, Progress | undefined>();
    try {
      for (const role of roles) {
        const m = await reader.last(topic, role);
        out.set(role, m?.value ? (JSON.parse(m.value.toString()) as Progress) : undefined);
      }
      return out;
    } finally {
      await reader.close();
    }
  } catch (err) {
    // the reader's RF_KAFKA_FATAL (a watermark or fetch that failed, no progress in time) ends a read,
    // not the relay's Kafka client: the caller tries again (a worker's fatal means a fenced producer)
    if (!RedfenceError.is(err, 'RF_KAFKA_FATAL')) throw err;
    throw new Error(`reading progress topic ${topic} failed: ${err.message}`, { cause: err });
  }
}
