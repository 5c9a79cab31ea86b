/**
 * A fatal Kafka error closes the processor instead of looping: a second instance started with the same
 * instance id (so the same transactional id) fences the first one's producer; the first closes itself
 * and reports it through onFatal, the second finishes with exact results.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { defineProcessor, Processor } from '../../src/index.js';
import { KAFKA_BROKERS, REDIS_URL, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, type Msg, pollUntil, produce, readToEnd } from '../helpers/kafka.js';
import { assertPerKey, countOf, countsUpTo } from '../helpers/outputs.js';

describe('fatal Kafka errors', { timeout: 180_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = new Redis(REDIS_URL, { enableAutoPipelining: true });
  });
  after(() => redis.disconnect());

  it('a fenced transactional producer closes its processor; the newer instance finishes exactly', async () => {
    const ns = uniqueName('fatal');
    const cleanup = await createTopics([
      { topic: `${ns}-in`, partitions: 3 },
      { topic: `${ns}-out`, partitions: 3 },
      { topic: `${ns}-in.DLT`, partitions: 1 },
    ]);
    try {
      const definition = defineProcessor<{ n: number }, number>({
        input: `${ns}-in`,
        output: `${ns}-out`,
        store: ns.replace(/-/g, '_'),
        operation: (r) => ({ op: 'add', by: r.n }),
      });
      const batch = (n: number): Msg[] =>
        Array.from({ length: n }, (_, i) => ({ key: `k${i % 6}`, value: '{"n":1}' }));
      const fatal: Error[] = [];
      const common = {
        definition,
        redis,
        groupId: `${ns}-g`,
        instanceId: 'same',
        kafka: { brokers: KAFKA_BROKERS.split(',') },
      };
      const errors: string[] = [];
      const logger = {
        debug() {},
        info() {},
        warn() {},
        error: (_: object, m?: string) => errors.push(m ?? ''),
      };
      const a = new Processor({ ...common, onFatal: (err) => fatal.push(err), logger });
      await produce(`${ns}-in`, batch(300));
      await a.start();
      await pollUntil('a processed the first wave', () => a.counts().records >= 300, 60_000);
      const b = new Processor(common);
      await b.start(); // its transactional producer, same id, fences a's
      try {
        await produce(`${ns}-in`, batch(300));
        await pollUntil(
          'a closed itself after the fatal error',
          () => a.state === 'closed' && fatal.length === 1,
          90_000,
        );
        // finished = every input committed (its outputs are then committed too, in the same transactions)
        await pollUntil('b committed every input', async () => {
          const committed = await committedOffsets(`${ns}-g`, `${ns}-in`);
          return [...committed.values()].reduce((x, y) => x + Math.max(0, y), 0) === 600;
        });
      } finally {
        await b.close();
        await a.close();
      }
      assert.match(fatal[0]?.message ?? '', /^Kafka: /);
      assert.ok(
        errors.some((m) => m.startsWith('fatal Kafka error')),
        'the fatal error is logged',
      );
      // 600 inputs over k0..k5: each key's count is 100, and its outputs count 1..100 once each
      const perKey = new Map(Array.from({ length: 6 }, (_, i) => [`k${i}`, 100]));
      for (const [key, want] of perKey)
        assert.equal(
          (await b.fence.read(key))?.value?.toString(),
          String(want),
          `state of ${key}: each input applied once`,
        );
      const out = await readToEnd(`${ns}-out`);
      assertPerKey('exactly one committed output per input', out, countOf, countsUpTo(perKey));
    } finally {
      await cleanup();
    }
  });
});
