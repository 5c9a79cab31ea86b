/**
 * The invalidation consumer in a group that rebalances while its Redis hangs: a second instance joins
 * while the first one's batches wait on a stopped (SIGSTOP) Redis; the first one's revocation waits for
 * them up to drainTimeoutMs, abandons them and commits nothing past them; once Redis answers again the
 * two instances between them invalidate every entry and commit every event.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { RedisServer } from '../../src/harness/index.js';
import { KitKeys } from '../../src/keys/kit.js';
import { Cache, createInvalidation, defineInvalidation } from '../../src/kit/index.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, pollUntil, produce } from '../helpers/kafka.js';

async function committedAll(groupId: string, topic: string): Promise<number> {
  let n = 0;
  for (const v of (await committedOffsets(groupId, topic)).values()) n += Math.max(0, v);
  return n;
}

describe('invalidation consumer: a rebalance while Redis hangs (real broker)', { timeout: 60_000 }, () => {
  it('the revoked partitions commit nothing past undone deletes; the group finishes them later', async () => {
    const server = new RedisServer();
    await server.start();
    after(() => server.stop());
    const redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
    redis.on('error', () => undefined);
    after(() => redis.disconnect());
    const topic = uniqueName('invreb');
    after(
      await createTopics([
        { topic, partitions: 4 },
        { topic: `${topic}.DLT`, partitions: 1 },
      ]),
    );
    const name = uniqueName('quotes');
    const quotes = new Cache<number>({ redis, name, ttlMs: 600_000 });
    after(() => quotes.close());
    const keys = new KitKeys('cache', name);
    const stored = (i: number) => redis.exists(keys.parts({ tenant: 'acme', id: `q${i}` }, 'v')[0] as string);
    for (let i = 0; i < 80; i++) await quotes.get({ tenant: 'acme', id: `q${i}` }, () => i);
    const groupId = `${topic}-g`;
    const registry = new Registry();
    const instance = () => {
      const c = createInvalidation(
        defineInvalidation<{ tenantId: string; quoteId: string }>({
          input: { topic },
          name: 'quote-cache',
          cache: name,
          keys: `${name}:{tenantId}:{quoteId}`,
        }),
        {
          kafka: { brokers: KAFKA_BROKERS.split(',') },
          groupId,
          redis,
          registry,
          commitIntervalMs: 50,
          drainTimeoutMs: 300,
          closeTimeoutMs: 3000,
          redisTimeoutMs: 200,
          retry: { baseMs: 20, maxMs: 200 },
        },
      );
      after(() => c.close());
      return c;
    };
    const events = (from: number) =>
      Array.from({ length: 40 }, (_, i) => ({
        key: `q${from + i}`,
        value: JSON.stringify({ tenantId: 'acme', quoteId: `q${from + i}` }),
      }));
    const errors = async () => {
      const m = (await registry.getMetricsAsJSON()).find((x) => x.name === 'redfence_kit_redis_errors_total');
      return (m?.values ?? []).reduce((s, v) => s + v.value, 0);
    };

    let b: ReturnType<typeof instance> | undefined;
    const a = instance();
    await a.start();
    await produce(topic, events(0));
    await pollUntil(
      'the first events committed',
      async () => (await committedAll(groupId, topic)) === 40,
      45_000,
      50,
    );

    server.signal('SIGSTOP');
    try {
      await produce(topic, events(40));
      await pollUntil('batches waiting on Redis', async () => (await errors()) >= 2, 15_000, 50);
      b = instance();
      await b.start();
      await pollUntil(
        'the revocation abandoned the waiting batches',
        async () => a.counts().abandoned > 0,
        15_000,
        50,
      );
      assert.equal(await committedAll(groupId, topic), 40, 'committed past deletes that did not answer');
    } finally {
      server.signal('SIGCONT');
    }
    await pollUntil(
      'every event committed',
      async () => (await committedAll(groupId, topic)) === 80,
      20_000,
      50,
    );
    for (let i = 0; i < 80; i++) assert.equal(await stored(i), 0, `q${i} still cached`);
    assert.equal(a.counts().deadLettered, 0);
    // closed here, while their Redis still runs (the after hooks stop the server first)
    await Promise.all([a.close(), b?.close()]);
  });
});
