/**
 * The secured broker of `dev/kafka.sh up s`: its listeners, the user's passwords and the certificates
 * it made under $RF_DEV_DIR/kafka-secure, and topic helpers over its INTERNAL (plaintext) listener for
 * setting up and reading back (the code under test always goes through the secured listeners).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { type ReadRecord, readToEnd, waitCommitted } from './kafka.js';

const ROOT = new URL('../..', import.meta.url).pathname;
export const SECURE_DIR = join(process.env.RF_DEV_DIR || join(ROOT, '.dev'), 'kafka-secure');
export const TLS_DIR = join(SECURE_DIR, 'tls');
export const LISTENERS = {
  saslSsl: '127.0.0.1:19492',
  ssl: '127.0.0.1:19493',
  saslPlaintext: '127.0.0.1:19494',
  internal: '127.0.0.1:19496',
};
export const secret = (name: 'plain' | 'scram' | 'key') =>
  readFileSync(join(SECURE_DIR, 'secrets', `${name}.password`), 'utf8').trim();
export const tlsFile = (name: string) => join(TLS_DIR, name);
export const pem = (name: string) => readFileSync(tlsFile(name), 'utf8');

const quiet = { logLevel: KafkaJS.logLevel.NOTHING };
const kafka = new KafkaJS.Kafka({ kafkaJS: { brokers: [LISTENERS.internal], ...quiet } });

export async function createSecureTopics(
  topics: Array<{ topic: string; partitions: number }>,
): Promise<() => Promise<void>> {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({
    topics: topics.map((t) => ({ topic: t.topic, numPartitions: t.partitions, replicationFactor: 1 })),
  });
  return async () => {
    await admin.deleteTopics({ topics: topics.map((t) => t.topic) }).catch(() => undefined);
    await admin.disconnect();
  };
}

export async function produceSecure(
  topic: string,
  messages: Array<{ key: string; value: string; partition?: number; timestamp?: string }>,
) {
  const producer = kafka.producer({ partitioner: 'murmur2_random', 'linger.ms': 5, kafkaJS: quiet });
  await producer.connect();
  try {
    await producer.send({ topic, messages });
  } finally {
    await producer.disconnect();
  }
}

/**
 * Runs Kafka's ACL tool (AclCommand) against the INTERNAL listener (a super user on the secured node),
 * e.g. `aclTool('--add', '--deny-principal', 'User:redfence', '--operation', 'Write', '--topic', t)`.
 * The node's authorizer allows everything on a resource without ACLs (dev/kafka/secure.properties.tmpl).
 */
export async function aclTool(...args: string[]): Promise<string> {
  const { execFile } = await import('node:child_process');
  const dev = join(ROOT, 'dev', 'kafka.sh');
  const argv = [
    dev,
    'tool',
    'org.apache.kafka.tools.AclCommand',
    '--bootstrap-server',
    LISTENERS.internal,
    ...args,
  ];
  return new Promise((resolve, reject) =>
    execFile('bash', argv, { timeout: 60_000 }, (err, stdout, stderr) =>
      err ? reject(new Error(`AclCommand ${args.join(' ')}: ${err.message}\n${stderr}`)) : resolve(stdout),
    ),
  );
}

/**
 * Every record of `topic` (read_committed) up to the end offsets it has when called, through the
 * INTERNAL listener; throws on timeout instead of returning part of the topic (readToEnd).
 */
export function readSecureToEnd(topic: string, timeoutMs = 60_000): Promise<ReadRecord[]> {
  return readToEnd(topic, timeoutMs, LISTENERS.internal);
}

/** Waits until `groupId` has committed `topic` to the end offsets it has when called (waitCommitted). */
export function waitSecureCommitted(groupId: string, topic: string, timeoutMs = 60_000): Promise<void> {
  return waitCommitted(groupId, topic, timeoutMs, LISTENERS.internal);
}
