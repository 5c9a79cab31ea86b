/**
 * The cache invalidation consumer on the real broker, standalone and Cluster: entries a `Cache` wrote
 * are gone once their events are consumed (duplicates and missing entries included), in far fewer
 * pipelines than events; a load that began before the invalidation does not write afterwards (and the
 * control without the cache's generation check does); an event without a tenant goes to the dead-letter
 * topic with the reason while the partition goes on; with its Redis killed, then hung (SIGSTOP), nothing
 * is committed past the undone deletes, and once Redis is back they are done and committed.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { type Cluster, Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { RedfenceError } from '../../src/errors/index.js';
import { RedisServer } from '../../src/harness/index.js';
import { readDeadLetterHeaders } from '../../src/index.js';
import { KitKeys } from '../../src/keys/kit.js';
import { Cache, createInvalidation, defineInvalidation } from '../../src/kit/index.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import {
  committedOffsets,
  createTopics,
  endOffsets,
  pollUntil,
  produce,
  readToEnd,
} from '../helpers/kafka.js';
import { KIT_TARGETS } from './support.js';

type QuoteEvent = { tenantId?: string; quoteId: string };

async function metric(
  registry: Registry,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name);
  return (m?.values ?? [])
    .filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))
    .reduce((s, v) => s + v.value, 0);
}

async function committedAll(groupId: string, topic: string): Promise<number> {
  let n = 0;
  for (const v of (await committedOffsets(groupId, topic)).values()) n += Math.max(0, v);
  return n;
}

async function endAll(topic: string): Promise<number> {
  let n = 0;
  for (const v of (await endOffsets(topic)).values()) n += v;
  return n;
}

function event(tenantId: string | undefined, quoteId: string) {
  return { key: quoteId, value: JSON.stringify({ tenantId, quoteId } satisfies QuoteEvent) };
}

async function topics(partitions: number) {
  const topic = uniqueName('inv');
  after(
    await createTopics([
      { topic, partitions },
      { topic: `${topic}.DLT`, partitions: 1 },
    ]),
  );
  return topic;
}

function consumerFor(
  topic: string,
  cache: string | Cache<unknown>,
  redis: Redis | Cluster,
  registry: Registry,
  extra = {},
) {
  const groupId = `${topic}-g`;
  const consumer = createInvalidation(
    defineInvalidation<QuoteEvent>({
      input: { topic },
      name: 'quote-cache',
      cache,
      keys: `${typeof cache === 'string' ? cache : cache.name}:{tenantId}:{quoteId}`,
    }),
    {
      kafka: { brokers: KAFKA_BROKERS.split(',') },
      groupId,
      redis,
      registry,
      commitIntervalMs: 50,
      ...extra,
    },
  );
  after(() => consumer.close());
  return { consumer, groupId };
}

for (const target of KIT_TARGETS) {
  describe(`invalidation consumer on ${target.name} (real broker)`, { timeout: 60_000 }, () => {
    const redis = target.connect();
    after(() => redis.disconnect());

    it('deletes what the cache wrote, in pipelines, and a load begun before cannot write after', async () => {
      const topic = await topics(2);
      const name = uniqueName('quotes');
      const registry = new Registry();
      const quotes = new Cache<{ v: number }>({ redis, name, ttlMs: 600_000 });
      const unsafe = new Cache<{ v: number }>({
        redis,
        name,
        ttlMs: 600_000,
        unsafeSkipGenerationCheck: true,
      });
      after(() => Promise.all([quotes.close(), unsafe.close()]).then(() => undefined));
      const keys = new KitKeys('cache', name);
      const stored = (tenant: string, id: string) =>
        redis.exists(keys.parts({ tenant, id }, 'v')[0] as string);

      // entries of two tenants, written by the cache itself
      const N = 300;
      for (let i = 0; i < N; i++) await quotes.get({ tenant: `t${i % 2}`, id: `q${i}` }, () => ({ v: i }));
      assert.equal(await stored('t1', 'q1'), 1);

      // a load that begins before its invalidation, on each cache (the unsafe one is the control)
      let releaseSafe!: () => void;
      let releaseUnsafe!: () => void;
      let startedSafe!: () => void;
      let startedUnsafe!: () => void;
      const safeStarted = new Promise<void>((r) => {
        startedSafe = r;
      });
      const unsafeStarted = new Promise<void>((r) => {
        startedUnsafe = r;
      });
      const safeLoad = quotes.get({ tenant: 't0', id: 'race' }, async () => {
        startedSafe();
        await new Promise<void>((r) => {
          releaseSafe = r;
        });
        return { v: -1 };
      });
      const unsafeLoad = unsafe.get({ tenant: 't0', id: 'race-control' }, async () => {
        startedUnsafe();
        await new Promise<void>((r) => {
          releaseUnsafe = r;
        });
        return { v: -1 };
      });
      await Promise.all([safeStarted, unsafeStarted]);

      const { consumer, groupId } = consumerFor(topic, name, redis, registry);
      await consumer.start();
      const events = [
        ...Array.from({ length: N }, (_, i) => event(`t${i % 2}`, `q${i}`)),
        ...Array.from({ length: 50 }, (_, i) => event(`t${i % 2}`, `q${i}`)), // duplicates
        ...Array.from({ length: 20 }, (_, i) => event('t0', `never-cached-${i}`)), // missing entries
        event('t0', 'race'),
        event('t0', 'race-control'),
      ];
      await produce(topic, events);
      const total = await endAll(topic);
      assert.equal(total, events.length);
      await pollUntil(
        'all committed',
        async () => (await committedAll(groupId, topic)) === total,
        45_000,
        50,
      );

      for (let i = 0; i < N; i++) assert.equal(await stored(`t${i % 2}`, `q${i}`), 0, `q${i} still cached`);
      assert.equal(await stored('t0', 'never-cached-0'), 0);
      const deletes = await metric(registry, 'redfence_cache_invalidation_deletes_total', {
        name: 'quote-cache',
      });
      assert.ok(deletes >= events.length, `deletes ${deletes}`);
      const pipelines = await metric(registry, 'redfence_cache_invalidation_pipelines_total');
      assert.ok(
        pipelines > 0 && pipelines < events.length / 3,
        `${pipelines} pipelines for ${events.length} events`,
      );
      const lag = await metric(registry, 'redfence_cache_invalidation_lag_seconds', { name: 'quote-cache' });
      assert.ok(lag >= 0 && lag < 120, `lag ${lag}`);
      assert.equal(consumer.counts().deadLettered, 0);

      // the loads finish after their invalidations: their callers get what they loaded, and only the
      // cache without the generation check writes the old value back
      releaseSafe();
      releaseUnsafe();
      assert.deepEqual(await safeLoad, { v: -1 });
      assert.deepEqual(await unsafeLoad, { v: -1 });
      assert.equal(await stored('t0', 'race'), 0, 'a load begun before the invalidation wrote after it');
      assert.equal(
        await stored('t0', 'race-control'),
        1,
        'the control (no generation check) writes the old value back',
      );
      let reloads = 0;
      assert.deepEqual(await quotes.get({ tenant: 't1', id: 'q1' }, () => ({ v: ++reloads })), { v: 1 });
      assert.equal(reloads, 1, 'the next get loads from the source');
      await consumer.invalidate([{ tenant: 't1', id: 'q1' }]); // a manual invalidation, same keys
      assert.equal(await stored('t1', 'q1'), 0);
    });
  });
}

describe('invalidation consumer: bad events and Redis down (real broker)', { timeout: 60_000 }, () => {
  it('dead-letters an event without a tenant with the reason; the partition goes on (hashed ids)', async () => {
    const redis = KIT_TARGETS[0]?.connect() as Redis;
    after(() => redis.disconnect());
    const topic = await topics(1);
    const name = uniqueName('quotes');
    // ids hashed in key names: the consumer, given the Cache, builds the same hashed keys
    const quotes = new Cache<number>({ redis, name, ttlMs: 600_000, keyEncoding: 'hash' });
    after(() => quotes.close());
    await quotes.get({ tenant: 'acme', id: 'a' }, () => 1);
    await quotes.get({ tenant: 'acme', id: 'b' }, () => 2);
    const hashed = new KitKeys('cache', name, { keyEncoding: 'hash' }).parts(
      { tenant: 'acme', id: 'a' },
      'v',
    )[0] as string;
    assert.equal(await redis.exists(hashed), 1);
    assert.ok(!hashed.includes(':a}'), 'the id is not in the key name');
    const { consumer, groupId } = consumerFor(topic, quotes as Cache<unknown>, redis, new Registry(), {
      retry: { attempts: 3, baseMs: 1, maxMs: 5 },
    });
    await consumer.start();
    await produce(topic, [
      event('acme', 'a'),
      event(undefined, 'x'),
      { key: 'y', value: '{"quoteId":"y","tenantId":""}' },
      event('acme', 'b'),
    ]);
    await pollUntil(
      'committed past the bad events',
      async () => (await committedAll(groupId, topic)) === 4,
      45_000,
      50,
    );
    assert.equal(consumer.counts().deadLettered, 2);
    assert.equal(consumer.counts().done, 2);
    let loads = 0;
    await quotes.get({ tenant: 'acme', id: 'b' }, () => ++loads);
    assert.equal(loads, 1, 'the event after the bad ones was applied');
    assert.equal(await redis.exists(hashed), 0, 'the hashed entry was deleted');
    const dlt = await readToEnd(`${topic}.DLT`);
    assert.equal(dlt.length, 2);
    for (const r of dlt) {
      const h = readDeadLetterHeaders(r.headers);
      assert.equal(h.reason, 'processing-error');
      assert.match(h.exceptionMessage ?? '', /no tenant/);
      assert.equal(h.originalTopic, topic);
    }
  });

  it('commits nothing past deletes that failed while Redis was down or hung, and does them once it is back', async () => {
    const server = new RedisServer({ persistent: true });
    await server.start();
    after(() => server.stop());
    const redis = new Redis(server.url, { maxRetriesPerRequest: 1, retryStrategy: () => 50 });
    redis.on('error', () => undefined);
    after(() => redis.disconnect());
    const topic = await topics(2);
    const name = uniqueName('quotes');
    const quotes = new Cache<number>({ redis, name, ttlMs: 600_000 });
    after(() => quotes.close());
    const keys = new KitKeys('cache', name);
    const stored = (id: string) => redis.exists(keys.parts({ tenant: 'acme', id }, 'v')[0] as string);
    for (let i = 0; i < 40; i++) await quotes.get({ tenant: 'acme', id: `q${i}` }, () => i);
    const registry = new Registry();
    const { consumer, groupId } = consumerFor(topic, name, redis, registry, {
      redisTimeoutMs: 200,
      retry: { attempts: 2, baseMs: 20, maxMs: 200 },
    });
    await consumer.start();

    await produce(
      topic,
      Array.from({ length: 20 }, (_, i) => event('acme', `q${i}`)),
    );
    await pollUntil(
      'the first events committed',
      async () => (await committedAll(groupId, topic)) === 20,
      45_000,
      50,
    );
    assert.equal(await stored('q0'), 0);
    assert.equal(await stored('q20'), 1);
    const before = await committedOffsets(groupId, topic);

    await server.kill();
    await produce(
      topic,
      Array.from({ length: 20 }, (_, i) => event('acme', `q${20 + i}`)),
    );
    const errors = () => metric(registry, 'redfence_kit_redis_errors_total', { component: 'invalidation' });
    // the batches have been tried, and failed, several times (each try waits out its deadline)
    await pollUntil('deletes failing', async () => (await errors()) >= 6, 45_000, 50);
    assert.deepEqual(await committedOffsets(groupId, topic), before, 'committed past deletes that failed');
    assert.equal(consumer.counts().deadLettered, 0, 'Redis down dead-lettered a record');

    await server.start(); // same port and directory: the AOF brings the entries back
    await pollUntil('all committed', async () => (await committedAll(groupId, topic)) === 40, 45_000, 50);
    for (let i = 0; i < 40; i++) assert.equal(await stored(`q${i}`), 0, `q${i} still cached`);
    assert.equal(consumer.counts().deadLettered, 0);

    // a Redis that hangs (SIGSTOP: connections open, no answer) is down too, by the pipeline's deadline
    for (let i = 40; i < 50; i++) await quotes.get({ tenant: 'acme', id: `q${i}` }, () => i);
    const atStop = await errors();
    const committedAtStop = await committedOffsets(groupId, topic);
    server.signal('SIGSTOP');
    try {
      await produce(
        topic,
        Array.from({ length: 10 }, (_, i) => event('acme', `q${40 + i}`)),
      );
      await pollUntil('deletes timing out', async () => (await errors()) >= atStop + 4, 45_000, 50);
      assert.deepEqual(
        await committedOffsets(groupId, topic),
        committedAtStop,
        'committed past a hung Redis',
      );
    } finally {
      server.signal('SIGCONT');
    }
    await pollUntil('all committed', async () => (await committedAll(groupId, topic)) === 50, 45_000, 50);
    for (let i = 40; i < 50; i++) assert.equal(await stored(`q${i}`), 0, `q${i} still cached`);
    assert.equal(consumer.counts().deadLettered, 0);
  });

  it('invalidates entries of several caches by hand, each by its own keys; refuses bad ones', async () => {
    const redis = KIT_TARGETS[0]?.connect() as Redis;
    after(() => redis.disconnect());
    const a = new Cache<number>({ redis, name: uniqueName('qa'), ttlMs: 600_000 });
    const b = new Cache<number>({ redis, name: uniqueName('qb'), ttlMs: 600_000, keyEncoding: 'hash' });
    after(() => Promise.all([a.close(), b.close()]).then(() => undefined));
    await a.get({ tenant: 'acme', id: 'x' }, () => 1);
    await b.get({ tenant: 'acme', id: 'x' }, () => 2);
    const consumer = createInvalidation(
      defineInvalidation<QuoteEvent>({
        input: { topic: 'never-started' },
        name: 'two-caches',
        cache: [a, b],
        keys: (r) => [{ cache: a.name, tenant: r.value.tenantId as string, id: r.value.quoteId }],
      }),
      { kafka: { brokers: KAFKA_BROKERS.split(',') }, redis },
    );
    const bad = async (keys: Parameters<typeof consumer.invalidate>[0]) => {
      const e = await consumer.invalidate(keys).then(
        () => undefined,
        (err: unknown) => err,
      );
      assert.ok(RedfenceError.is(e, 'RF_KIT_INVALIDATION_KEY'), String(e));
      return (e as Error).message;
    };
    assert.match(await bad([{ tenant: 'acme', id: 'x' }]), /names no cache/);
    assert.match(await bad([{ cache: 'other', tenant: 'acme', id: 'x' }]), /does not/);
    assert.match(await bad([{ cache: a.name, tenant: '', id: 'x' }]), /no tenant/);
    assert.match(await bad([{ cache: a.name, tenant: 'not a tenant!', id: 'x' }]), /cannot be a cache key/);
    let loads = 0;
    await a.get({ tenant: 'acme', id: 'x' }, () => ++loads);
    assert.equal(loads, 0, 'a refused call invalidated nothing');
    await consumer.invalidate([
      { cache: a.name, tenant: 'acme', id: 'x' },
      { cache: b.name, tenant: 'acme', id: 'x' },
    ]);
    await a.get({ tenant: 'acme', id: 'x' }, () => ++loads);
    await b.get({ tenant: 'acme', id: 'x' }, () => ++loads);
    assert.equal(loads, 2, 'both entries were invalidated');
  });

  it('refuses bad definitions and options before any connection', () => {
    const base = { input: { topic: 't' }, name: 'n', cache: 'quotes', keys: 'quotes:{tenantId}:{id}' };
    const codeOf = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return RedfenceError.is(e) ? `${e.code} ${e.message}` : String(e);
      }
      return 'none';
    };
    assert.match(
      codeOf(() => defineInvalidation({ ...base, keys: 'other:{tenantId}:{id}' })),
      /RF_INVALID_OPTIONS .*cache it names/,
    );
    assert.match(
      codeOf(() => defineInvalidation({ ...base, keys: 'quotes:acme:{id}' })),
      /RF_INVALID_OPTIONS .*tenant/,
    );
    assert.match(
      codeOf(() => defineInvalidation({ ...base, keys: 'quotes:{tenantId}' })),
      /RF_INVALID_OPTIONS .*id/,
    );
    assert.match(
      codeOf(() => defineInvalidation({ ...base, cache: [] })),
      /RF_INVALID_OPTIONS/,
    );
    assert.match(
      codeOf(() => defineInvalidation({ ...base, extra: 1 } as never)),
      /RF_INVALID_OPTIONS .*extra/,
    );
    const redis = new Redis({ lazyConnect: true });
    assert.match(
      codeOf(() =>
        createInvalidation(defineInvalidation(base), {
          kafka: { brokers: ['x:1'] },
          redis,
          concurency: 2,
        } as never),
      ),
      /RF_INVALID_OPTIONS .*concurency/,
    );
    assert.match(
      codeOf(() =>
        createInvalidation(defineInvalidation(base), {
          kafka: { brokers: ['x:1'] },
          redis,
          maxKeysPerPipeline: 0,
        }),
      ),
      /RF_INVALID_OPTIONS .*maxKeysPerPipeline/,
    );
    assert.match(
      codeOf(() =>
        createInvalidation(defineInvalidation(base), {
          kafka: { brokers: ['x:1'] },
          redis,
          retry: { attemptTimeoutMs: 100 },
        }),
      ),
      /RF_INVALID_OPTIONS .*retry.attemptTimeoutMs" does not apply/,
    );
    assert.equal(redis.status, 'wait', 'nothing connected');
  });
});
