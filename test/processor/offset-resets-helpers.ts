/**
 * What the tests of the assignment offset check (src/kafka/offset-resets.ts) share: a capturing logger,
 * a group's commits made from outside, log starts, counter values and the check's warnings, and a
 * suite's Redis and Kafka admin.
 */
import { after, before } from 'node:test';
import { RdKafka } from '@confluentinc/kafka-javascript';
import type { Redis } from 'ioredis';
import { KafkaAdmin } from '../../src/kafka/admin.js';
import type { RedfenceMetrics } from '../../src/metrics/index.js';
import type { Logger } from '../../src/runtime/logger.js';
import { KAFKA_BROKERS, standalone } from '../helpers/env.js';
import { committedOffsets, pollUntil } from '../helpers/kafka.js';

export interface Warning {
  readonly fields: Record<string, unknown>;
  readonly msg: string;
}

/** A suite's Redis and Kafka admin: made before its tests, closed after them (call inside `describe`). */
export function suiteClients(): { redis: () => Redis; admin: () => KafkaAdmin } {
  let redis: Redis | undefined;
  let admin: KafkaAdmin | undefined;
  before(() => {
    redis = standalone();
    admin = new KafkaAdmin({ 'bootstrap.servers': KAFKA_BROKERS });
  });
  after(async () => {
    redis?.disconnect();
    await admin?.close();
  });
  const made = <T>(v: T | undefined): T => {
    if (v === undefined) throw new Error('suiteClients: used before the suite started');
    return v;
  };
  return { redis: () => made(redis), admin: () => made(admin) };
}

/** A logger keeping every warning with its fields. */
export function capturing(): { logger: Logger; warnings: Warning[] } {
  const warnings: Warning[] = [];
  const none = () => undefined;
  return {
    warnings,
    logger: {
      debug: none,
      info: none,
      error: none,
      warn: (fields: object, msg?: string) =>
        warnings.push({ fields: fields as Record<string, unknown>, msg: msg ?? '' }),
    },
  };
}

/** The check's warnings: its findings (they carry a reason) and its failures ("not compared"). */
export function checkWarnings(warnings: readonly Warning[]): Warning[] {
  return warnings.filter((w) => w.fields.reason !== undefined || /not compared/.test(w.msg));
}

/** Commits `offsets` for `group` as a consumer outside any subscription would, and waits to see them. */
export async function commitAt(group: string, topic: string, offsets: Map<number, number>): Promise<void> {
  const c = new RdKafka.KafkaConsumer(
    { 'bootstrap.servers': KAFKA_BROKERS, 'group.id': group, 'enable.auto.commit': false, log_level: 0 },
    {},
  );
  await new Promise<void>((resolve, reject) => c.connect({}, (err) => (err ? reject(err) : resolve())));
  try {
    const tps = [...offsets].map(([partition, offset]) => ({ topic, partition, offset }));
    c.assign(tps);
    c.commitSync(tps);
  } finally {
    await new Promise<void>((resolve) => c.disconnect(() => resolve()));
  }
  await pollUntil(
    `group ${group} to hold its commits`,
    async () => {
      const held = await committedOffsets(group, topic);
      return [...offsets].every(([p, o]) => held.get(p) === o);
    },
    30_000,
  );
}

/** Low watermarks (log start offsets) of a topic. */
export async function logStarts(admin: KafkaAdmin, topic: string): Promise<Map<number, number>> {
  return new Map([...(await admin.watermarks(topic))].map(([p, w]) => [p, w.low]));
}

/** The value of a counter's series with these labels (0 when it has none). */
export async function counterValue(
  m: RedfenceMetrics,
  name: string,
  labels: Record<string, string>,
): Promise<number> {
  const metric = m.registry.getSingleMetric(name);
  if (metric === undefined) return 0;
  const { values } = await metric.get();
  const hit = values.find((v) => Object.entries(labels).every(([k, x]) => String(v.labels[k]) === x));
  return hit?.value ?? 0;
}
