/**
 * One console test's world, against the real broker and Redis: its own dead-letter and source topics
 * with planted dead letters (redfence's headers, a known key and value), a key with fence state in its
 * own store, a Redis ACL user with a password the console connects as, and the console itself (actions
 * enabled with a token, on a free loopback port). Everything is removed when the test ends.
 */
import { randomBytes } from 'node:crypto';
import type { TestContext } from 'node:test';
import { RdKafka } from '@confluentinc/kafka-javascript';
import { Redis } from 'ioredis';
import { type ConsoleServer, startConsole } from '../../src/console/server.js';
import type { OutboxSource } from '../../src/console/view.js';
import { Fence } from '../../src/fence/index.js';
import { redfenceHeaders } from '../dead-letter/fixtures.js';
import { KAFKA_BROKERS, REDIS_URL, standalone, uniqueName } from '../helpers/env.js';
import { createTopics, kafka, pollUntil, produce } from '../helpers/kafka.js';

export const SECRET_KEY = 'secret-key-4711';
export const SECRET_VALUE = 'secret-value-0815';

export interface World {
  console: ConsoleServer;
  admin: Redis;
  dlt: string;
  source: string;
  store: string;
  stateKey: string;
  token: string;
  redisPassword: string;
  redisUrl: string;
}

/** Plants `n` redfence dead letters (reason `rejected`) on partition 0 of `dlt`, all from `source`. */
export async function plant(dlt: string, source: string, n: number, firstOffset = 0): Promise<void> {
  const producer = kafka.producer({ 'enable.idempotence': true });
  await producer.connect();
  try {
    await producer.send({
      topic: dlt,
      messages: Array.from({ length: n }, (_, i) => {
        const headers: Record<string, Buffer[]> = {};
        for (const [name, v] of redfenceHeaders(source, 0, firstOffset + i, 'rejected')) {
          const list = headers[name] ?? [];
          headers[name] = list;
          list.push(v);
        }
        return { key: SECRET_KEY, value: SECRET_VALUE, partition: 0, headers };
      }),
    });
  } finally {
    await producer.disconnect();
  }
}

export interface WorldOptions {
  actions?: boolean;
  letters?: number;
  /** Consumer groups whose lag the console samples. */
  groups?: string[];
  outbox?: OutboxSource;
  /** The Prometheus the console reads the alert rules' state from. */
  prometheus?: string;
}

export async function world(t: TestContext, o: WorldOptions = {}): Promise<World> {
  const dlt = uniqueName('console-dlt');
  const source = uniqueName('console-src');
  const store = uniqueName('console-store');
  const stateKey = 'customer-9';
  const admin = standalone();
  const cleanup: Array<() => Promise<void> | void> = [];
  t.after(async () => {
    for (const f of cleanup.reverse()) await f();
  });
  const drop = await createTopics([
    { topic: dlt, partitions: 2 },
    { topic: source, partitions: 1 },
  ]);
  const user = uniqueName('console-user');
  const redisPassword = randomBytes(18).toString('hex');
  await admin.call('ACL', 'SETUSER', user, 'on', `>${redisPassword}`, '~*', '&*', '+@all');
  const url = new URL(REDIS_URL);
  url.username = user;
  url.password = redisPassword;
  const redis = new Redis(url.toString(), { maxRetriesPerRequest: 2 });
  const token = randomBytes(24).toString('base64url');
  cleanup.push(async () => {
    redis.disconnect();
    await admin.call('ACL', 'DELUSER', user).catch(() => undefined);
    const keys = await admin.keys(`rf:dlq:{${dlt}}:*`);
    if (keys.length > 0) await admin.del(...keys);
    const state = await admin.keys(`rf:*${store}*`);
    if (state.length > 0) await admin.del(...state);
    admin.disconnect();
    await drop();
  });
  await plant(dlt, source, o.letters ?? 1);
  const fence = new Fence({ redis: admin, store, mode: 'strict' });
  const epoch = await fence.acquireEpoch(source, 0);
  await fence.apply({
    topic: source,
    partition: 0,
    epoch,
    committedOffset: -1,
    key: stateKey,
    records: [
      { offset: 41, operation: { op: 'add', by: 250 }, output: 'state' },
      { offset: 42, operation: { op: 'add', by: 5 }, output: 'state' },
    ],
  });
  const c = await startConsole({
    redis,
    kafka: { brokers: KAFKA_BROKERS.split(','), clientId: 'console-test' },
    dlqTopics: [dlt],
    groups: o.groups ?? [],
    ...(o.outbox === undefined ? {} : { outbox: o.outbox }),
    ...(o.prometheus === undefined ? {} : { prometheus: o.prometheus }),
    port: 0,
    ...(o.actions === false ? {} : { actionToken: token }),
    lagIntervalMs: 500,
    timeoutMs: 15_000,
  });
  cleanup.push(() => c.close());
  return {
    console: c,
    admin,
    dlt,
    source,
    store,
    stateKey,
    token,
    redisPassword,
    redisUrl: url.toString(),
  };
}

/**
 * A stalled partition: `group` committed at 2 of the 20 records of partition 0 of its own `topic`, and a
 * member of the group that owns the partition and never commits (as test/ops/lag-cli.test.ts makes
 * one): `redfence lag` says STALL (committed-stuck). Leaves the group when the test ends.
 */
export async function stalledGroup(t: TestContext): Promise<{ topic: string; group: string }> {
  const topic = uniqueName('console-stall');
  const group = uniqueName('console-stall-group');
  t.after(await createTopics([{ topic, partitions: 1 }]));
  await produce(
    topic,
    Array.from({ length: 20 }, (_, i) => ({ key: `k${i}`, value: 'x', partition: 0 })),
  );
  const props = { 'bootstrap.servers': KAFKA_BROKERS, 'group.id': group };
  const committer = new RdKafka.KafkaConsumer(props, {});
  await new Promise<void>((resolve, reject) => committer.connect({}, (e) => (e ? reject(e) : resolve())));
  try {
    committer.commitSync([{ topic, partition: 0, offset: 2 }]);
  } finally {
    await new Promise<void>((r) => committer.disconnect(() => r()));
  }
  const member = new RdKafka.KafkaConsumer({ ...props, 'enable.auto.commit': false }, {});
  await new Promise<void>((resolve, reject) => member.connect({}, (e) => (e ? reject(e) : resolve())));
  t.after(() => new Promise<void>((r) => member.disconnect(() => r())));
  member.subscribe([topic]);
  // consumes (never commits) until the group assigned it the partition
  await pollUntil(
    'the member to own the partition',
    async () => {
      await new Promise<void>((r) => member.consume(10, () => r()));
      return member.assignments().length === 1;
    },
    30_000,
  );
  return { topic, group };
}
