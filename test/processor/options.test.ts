/** Processor configuration is checked once, at construction or start, with errors naming the problem. */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { defineProcessor, Processor } from '../../src/index.js';
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
    const own = new Redis(REDIS_URL);
    const previous = ((await own.config('GET', 'maxmemory-policy')) as string[])[1] ?? 'noeviction';
    const ns = uniqueName('evict');
    await own.config('SET', 'maxmemory-policy', 'allkeys-lru');
    try {
      const p = new Processor({
        definition: { ...definition, store: ns },
        redis: own,
        kafka: { brokers: ['127.0.0.1:1'] }, // never reached: the check comes first
      });
      await assert.rejects(p.start(), {
        code: 'RF_UNSAFE_REDIS',
        message: /maxmemory-policy is allkeys-lru/,
      });
      assert.equal(await own.exists(`rf:{${ns}:orders:0}:epoch`), 0);
    } finally {
      await own.config('SET', 'maxmemory-policy', previous);
      own.disconnect();
    }
  });
});
