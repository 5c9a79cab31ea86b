/** Processor configuration is checked once, at construction or start, with errors naming the problem. */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Cluster, Redis } from 'ioredis';
import { RedisServer } from '../../src/harness/index.js';
import { createProcessor, defineProcessor, Processor } from '../../src/index.js';
import { KeySpace } from '../../src/keys/index.js';
import { KAFKA_BROKERS, REDIS_URL, uniqueName } from '../helpers/env.js';

const definition = defineProcessor<{ amount: number }, number>({
  input: 'opts-in',
  output: 'opts-out',
  store: 'opts',
  operation: (o) => ({ op: 'add', by: o.amount }),
});

describe('processor options', () => {
  let redis: Redis;
  before(() => {
    redis = new Redis(REDIS_URL, { lazyConnect: true });
  });
  after(() => redis.disconnect());

  it('rejects unknown options and bad values, naming them', () => {
    const kafka = { brokers: KAFKA_BROKERS.split(',') };
    assert.throws(() => new Processor({ definition, redis, kafka, modes: 'x' } as never), {
      code: 'RF_INVALID_OPTIONS',
      message: /unknown processor option "modes"/,
    });
    assert.throws(() => new Processor({ definition, redis, kafka, mode: 'maybe-once' as never }), {
      message: /option "mode"/,
    });
    assert.throws(() => new Processor({ definition, redis, kafka: { brokers: [] } }), {
      message: /kafka\.brokers/,
    });
    for (const bad of [-1, 1.5, Number.NaN])
      assert.throws(() => new Processor({ definition, redis, kafka, groupCommitRecords: bad }), {
        code: 'RF_INVALID_OPTIONS',
        message: /option "groupCommitRecords" must be an integer >= 0/,
      });
    for (const bad of [0, 65, 1.5])
      assert.throws(() => new Processor({ definition, redis, kafka, partitionsInFlight: bad }), {
        code: 'RF_INVALID_OPTIONS',
        message: /option "partitionsInFlight" must be an integer from 1 to 64/,
      });
  });

  it('createProcessor(definition, options) checks the same options before any connection', () => {
    const kafka = { brokers: KAFKA_BROKERS.split(',') };
    const p = createProcessor(definition, { redis, kafka, groupId: uniqueName('create') });
    assert.ok(p instanceof Processor);
    assert.equal(p.state, 'idle');
    assert.throws(() => createProcessor(definition, { redis, kafka, modes: 'x' } as never), {
      code: 'RF_INVALID_OPTIONS',
      message: /unknown processor option "modes"/,
    });
    assert.throws(() => createProcessor({ ...definition, store: '' }, { redis, kafka }), {
      code: 'RF_INVALID_OPTIONS',
    });
  });

  it('checks nested options for unknown keys, naming the path', () => {
    const brokers = KAFKA_BROKERS.split(',');
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ kafka: { brokers, sesionTimeoutMs: 6000 } }, /unknown processor option "kafka\.sesionTimeoutMs"/],
      [{ watchdog: { stalMs: 1000 } }, /unknown processor option "watchdog\.stalMs"/],
      [
        { waitReplicas: { replicas: 1, timeoutMs: 100, timeout: 5 } },
        /unknown processor option "waitReplicas\.timeout"/,
      ],
    ];
    for (const [extra, message] of cases)
      assert.throws(() => new Processor({ definition, redis, kafka: { brokers }, ...extra } as never), {
        code: 'RF_INVALID_OPTIONS',
        message,
      });
  });

  it('checks the type and range of every number; a 0 is checked, never taken for "not given"', () => {
    const brokers = KAFKA_BROKERS.split(',');
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ kafka: { brokers, maxBatchSize: 0 } }, /option "kafka\.maxBatchSize" must be an integer from 1/],
      [
        { kafka: { brokers, sessionTimeoutMs: 0 } },
        /option "kafka\.sessionTimeoutMs" must be an integer from 1/,
      ],
      [
        { kafka: { brokers, sessionTimeoutMs: '6000' } },
        /option "kafka\.sessionTimeoutMs" must be an integer/,
      ],
      [{ kafka: { brokers, transactionTimeoutMs: 0 } }, /option "kafka\.transactionTimeoutMs"/],
      [{ sweepEvery: 0 }, /option "sweepEvery" must be an integer >= 1, got 0/],
      [{ sweepEvery: 2.5 }, /option "sweepEvery" must be an integer >= 1/],
      [{ ownerCache: { maxBytes: 0 } }, /option "ownerCache.maxBytes" must be an integer >= 1, got 0/],
      [{ ownerCache: true }, /option "ownerCache" must be \{ maxBytes: n \} or false/],
      [{ ownerCache: { maxKeys: 5 } }, /option "ownerCache" must be \{ maxBytes: n \} or false/],
      [{ sweepIntervalMs: 0 }, /option "sweepIntervalMs" must be an integer from 1/],
      [{ userRetries: -1 }, /option "userRetries"/],
      [{ watchdog: { stallMs: 0 } }, /option "watchdog\.stallMs" must be an integer from 1/],
      [{ watchdog: { maxRecoveries: Number.NaN } }, /option "watchdog\.maxRecoveries"/],
      [{ waitReplicas: { replicas: 0, timeoutMs: 100 } }, /option "waitReplicas\.replicas"/],
      [{ waitReplicas: { replicas: 1, timeoutMs: 0 } }, /option "waitReplicas\.timeoutMs"/],
      [{ waitReplicas: { replicas: 1 } }, /option "waitReplicas" needs both/],
      [{ replicationFactor: 0 }, /option "replicationFactor" must be an integer from 1 to 32767/],
      [{ replicationFactor: 1.5 }, /option "replicationFactor"/],
      [{ replicationFactor: -2 }, /option "replicationFactor"/],
      [{ createTopics: 'yes' }, /option "createTopics" must be true or false/],
      [{ requireNoEviction: 0 }, /option "requireNoEviction" must be true or false/],
      [{ groupId: '' }, /option "groupId" must be a non-empty string/],
      [{ onFatal: 'restart' }, /option "onFatal" must be a function/],
      [{ watchdog: true }, /option "watchdog" must be an object or false/],
    ];
    for (const [extra, message] of cases)
      assert.throws(
        () => new Processor({ definition, redis, kafka: { brokers }, ...extra } as never),
        { code: 'RF_INVALID_OPTIONS', message },
        JSON.stringify(extra),
      );
    // allowed edges
    for (const extra of [
      { replicationFactor: -1 },
      { replicationFactor: 3 },
      { createTopics: true },
      { sweepEvery: 1 },
    ])
      assert.ok(new Processor({ definition, redis, kafka: { brokers }, ...extra }), JSON.stringify(extra));
  });

  it('takes librdkafka pass-through properties, refusing those the guarantees depend on', () => {
    const brokers = KAFKA_BROKERS.split(',');
    assert.ok(
      new Processor({
        definition,
        redis,
        kafka: { brokers, consumerConfig: { 'client.rack': 'a' }, producerConfig: { 'linger.ms': 20 } },
      }),
    );
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [
        { consumerConfig: { 'enable.auto.commit': true } },
        /kafka\.consumerConfig" may not set "enable\.auto\.commit"/,
      ],
      [{ consumerConfig: { 'isolation.level': 'read_uncommitted' } }, /may not set "isolation\.level"/],
      [{ consumerConfig: { 'session.timeout.ms': 6000 } }, /use kafka\.sessionTimeoutMs/],
      [
        { producerConfig: { partitioner: 'consistent_random' } },
        /kafka\.producerConfig" may not set "partitioner"/,
      ],
      [{ producerConfig: { acks: 1 } }, /may not set "acks"/],
      [{ consumerConfig: 'x' }, /kafka\.consumerConfig" must be an object/],
    ];
    for (const [extra, message] of cases)
      assert.throws(() => new Processor({ definition, redis, kafka: { brokers, ...extra } } as never), {
        code: 'RF_INVALID_OPTIONS',
        message,
      });
    // a bad value is named by its property, never shown (pass-through blocks carry credentials)
    assert.throws(
      () =>
        new Processor({
          definition,
          redis,
          kafka: { brokers, consumerConfig: { 'sasl.oauthbearer.client.secret': { secret: 'hunter2' } } },
        } as never),
      (err: Error) =>
        /kafka\.consumerConfig\.sasl\.oauthbearer\.client\.secret" must be a string/.test(err.message) &&
        !err.message.includes('hunter2'),
    );
  });

  it("refuses 'strict' fencing on a Redis Cluster client (its two keys are in different slots)", () => {
    const c = new Cluster([{ host: '127.0.0.1', port: 1 }], { lazyConnect: true });
    try {
      assert.throws(
        () =>
          new Processor({
            definition,
            redis: c,
            fencing: 'strict',
            kafka: { brokers: KAFKA_BROKERS.split(',') },
          }),
        { code: 'RF_INVALID_OPTIONS', message: /option "fencing" is 'strict'.*use 'cluster'/ },
      );
    } finally {
      c.disconnect();
    }
  });

  it('rejects malformed processor definitions, naming the field', () => {
    assert.throws(() => defineProcessor({ ...definition, store: '' }), {
      message: /store must be a non-empty string/,
    });
    assert.throws(() => defineProcessor({ input: 'a', output: 'b', store: 's' } as never), {
      message: /exactly one of them/,
    });
    assert.throws(() => defineProcessor({ ...definition, output: 'opts-in' }), {
      message: /output must differ from input/,
    });
    assert.throws(() => defineProcessor({ ...definition, extra: 1 } as never), {
      message: /extra is not a known field/,
    });
  });

  it('refuses to start on a Redis whose maxmemory-policy evicts, before touching Kafka or state', async () => {
    // A private server: setting the policy on the shared Redis would refuse other files' processors.
    const server = new RedisServer({ args: ['--maxmemory', '64mb', '--maxmemory-policy', 'allkeys-lru'] });
    await server.start();
    after(() => server.stop());
    const own = new Redis(server.url, { maxRetriesPerRequest: 1 });
    after(() => own.disconnect());
    const ns = uniqueName('evict');
    const p = new Processor({
      definition: { ...definition, store: ns },
      redis: own,
      kafka: { brokers: ['127.0.0.1:1'] }, // never reached: the check comes first
    });
    await assert.rejects(p.start(), {
      code: 'RF_UNSAFE_REDIS',
      message: /maxmemory-policy is allkeys-lru/,
    });
    assert.equal(await own.exists(new KeySpace({ store: ns }).epoch(definition.input, 0)), 0);
    assert.deepEqual(await own.keys('*'), [], 'no key of any kind written');
  });
});
