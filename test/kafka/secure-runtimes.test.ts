/**
 * Every runtime's clients come from one translation of the `kafka` option (adapterSettings), security
 * included: the handler and the cache invalidation consumer run end to end over SCRAM-SHA-512 on
 * SASL_SSL (each record handled, each entry invalidated, every offset committed, read back on the
 * broker's internal listener), and with a wrong password every runtime (processor, handler,
 * invalidation consumer, outbox relay) fails start() with RF_KAFKA_AUTH from the auth watch (not a connect timeout). The
 * invalidation consumer used to hand `securityProtocol`, `sasl` and `ssl` to the adapter at the top
 * level, where it reads only `security`: it connected in plaintext to the SASL_SSL listener and timed
 * out (`Local: Timed out`) with the right password and with a wrong one.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KafkaJS } from '@confluentinc/kafka-javascript';
import type { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { createHandler, defineHandler, defineProcessor, Processor, RedfenceError } from '../../src/index.js';
import { KitKeys } from '../../src/keys/kit.js';
import { Cache, createInvalidation, defineInvalidation } from '../../src/kit/index.js';
import { OutboxRelay } from '../../src/outbox/index.js';
import { DATABASE_URL, standalone, uniqueName } from '../helpers/env.js';
import { pollUntil } from '../helpers/kafka.js';
import { createSecureTopics, LISTENERS, pem, produceSecure, secret } from '../helpers/secure-kafka.js';
import { testSchema } from '../outbox/support.js';

const scram = (password: string) => ({
  brokers: [LISTENERS.saslSsl],
  sasl: { mechanism: 'SCRAM-SHA-512' as const, username: 'redfence', password },
  ssl: { ca: pem('ca.crt') },
  sessionTimeoutMs: 6000,
});

/** The group's committed offsets, per partition, read on the internal listener. */
async function committed(groupId: string, topic: string): Promise<Map<number, number>> {
  const admin = new KafkaJS.Kafka({
    kafkaJS: { brokers: [LISTENERS.internal], logLevel: KafkaJS.logLevel.NOTHING },
  }).admin();
  await admin.connect();
  try {
    const [t] = await admin.fetchOffsets({ groupId, topics: [topic] });
    return new Map((t?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
  } finally {
    await admin.disconnect();
  }
}

interface Runtime {
  start(): Promise<void>;
  close(): Promise<void>;
}

describe('every runtime on the secured Kafka (SCRAM-SHA-512 over SASL_SSL)', { timeout: 240_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  it('a handler handles every record and commits', async (t) => {
    const topic = uniqueName('sechandler');
    t.after(
      await createSecureTopics([
        { topic, partitions: 2 },
        { topic: `${topic}.DLT`, partitions: 2 },
      ]),
    );
    const seen = new Map<string, number>();
    const h = createHandler(
      defineHandler<{ i: number }>({
        input: topic,
        name: 'secured',
        handle: async (r) => {
          seen.set(String(r.key), (seen.get(String(r.key)) ?? 0) + 1);
        },
      }),
      { kafka: scram(secret('scram')), groupId: `${topic}-g`, commitIntervalMs: 100 },
    );
    t.after(() => h.close());
    await produceSecure(
      topic,
      Array.from({ length: 40 }, (_, i) => ({ key: `k${i % 4}`, value: JSON.stringify({ i }) })),
    );
    await h.start();
    await pollUntil('every record handled', () => h.counts().done === 40, 60_000, 20);
    assert.deepEqual(
      [...seen.entries()].sort(),
      [
        ['k0', 10],
        ['k1', 10],
        ['k2', 10],
        ['k3', 10],
      ],
      'each key handled ten times',
    );
    await pollUntil(
      'committed to the end of both partitions',
      async () => [...(await committed(`${topic}-g`, topic)).values()].reduce((a, b) => a + b, 0) === 40,
      30_000,
      100,
    );
  });

  it('an invalidation consumer deletes every entry its events name and commits', async (t) => {
    const topic = uniqueName('secinv');
    t.after(
      await createSecureTopics([
        { topic, partitions: 2 },
        { topic: `${topic}.DLT`, partitions: 1 },
      ]),
    );
    const name = uniqueName('quotes');
    const cache = new Cache<number>({ redis, name, ttlMs: 600_000 });
    t.after(() => cache.close());
    const N = 30;
    for (let i = 0; i < N; i++) await cache.get({ tenant: 'acme', id: `q${i}` }, () => i);
    const keys = new KitKeys('cache', name);
    const left = async () => {
      let n = 0;
      for (let i = 0; i < N; i++)
        n += await redis.exists(keys.parts({ tenant: 'acme', id: `q${i}` }, 'v')[0] as string);
      return n;
    };
    assert.equal(await left(), N, 'every entry cached before');
    const consumer = createInvalidation(
      defineInvalidation<{ tenantId: string; quoteId: string }>({
        input: { topic },
        name: 'quote-cache',
        cache: name,
        keys: `${name}:{tenantId}:{quoteId}`,
      }),
      {
        kafka: scram(secret('scram')),
        groupId: `${topic}-g`,
        redis,
        registry: new Registry(),
        commitIntervalMs: 50,
      },
    );
    t.after(() => consumer.close());
    await produceSecure(
      topic,
      Array.from({ length: N }, (_, i) => ({
        key: `q${i}`,
        value: JSON.stringify({ tenantId: 'acme', quoteId: `q${i}` }),
      })),
    );
    await consumer.start();
    await pollUntil(
      'committed to the end of both partitions',
      async () => [...(await committed(`${topic}-g`, topic)).values()].reduce((a, b) => a + b, 0) === N,
      60_000,
      100,
    );
    assert.equal(await left(), 0, 'every entry its events name is gone');
    assert.equal(consumer.counts().deadLettered, 0);
  });

  const wrong = () => scram('not-the-password');
  const runtimes: Array<[string, (ns: string) => Promise<Runtime>]> = [
    [
      'processor',
      async (ns) =>
        new Processor({
          definition: defineProcessor({
            input: `${ns}-in`,
            output: `${ns}-out`,
            store: ns,
            operation: () => ({ op: 'add', by: 1 }),
          }),
          redis,
          groupId: `${ns}-g`,
          kafka: wrong(),
        }),
    ],
    [
      'handler',
      async (ns) =>
        createHandler(defineHandler({ input: `${ns}-in`, name: 'h', handle: async () => undefined }), {
          kafka: wrong(),
          groupId: `${ns}-g`,
        }),
    ],
    [
      'invalidation consumer',
      async (ns) =>
        createInvalidation(
          defineInvalidation<{ tenant: string; id: string }>({
            input: { topic: `${ns}-in` },
            name: 'inv',
            cache: ns,
            keys: `${ns}:{tenant}:{id}`,
          }),
          { kafka: wrong(), groupId: `${ns}-g`, redis, registry: new Registry() },
        ),
    ],
    [
      'outbox relay',
      async () => {
        const s = await testSchema();
        after(() => s.drop());
        const { sessionTimeoutMs: _, brokers, ...kafka } = wrong();
        return new OutboxRelay({ databaseUrl: DATABASE_URL, brokers, schema: s.schema, kafka });
      },
    ],
  ];
  for (const [what, make] of runtimes) {
    it(`${what}: a wrong password fails start() with RF_KAFKA_AUTH from the auth watch (not a connect timeout)`, async (t) => {
      const ns = uniqueName('secwrong');
      t.after(
        await createSecureTopics(
          [`${ns}-in`, `${ns}-out`, `${ns}-in.DLT`].map((topic) => ({ topic, partitions: 1 })),
        ),
      );
      const r = await make(ns);
      const err = await r.start().then(
        () => undefined,
        (e: unknown) => e,
      );
      await r.close();
      assert.ok(RedfenceError.is(err, 'RF_KAFKA_AUTH'), `RF_KAFKA_AUTH, got ${(err as Error)?.message}`);
      assert.match((err as Error).message, /SASL authentication error/);
      assert.doesNotMatch((err as Error).message, /not-the-password/);
    });
  }
});
