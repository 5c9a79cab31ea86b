/**
 * Processor options that change how it talks to Kafka and Redis, on the real services:
 * the KIP-848 `consumer` group protocol and static membership, and WAIT for replicas before commit.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { defineProcessor, Processor } from '../../src/index.js';
import { KAFKA_BROKERS, REDIS_URL, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, type Msg, pollUntil, produce, readToEnd } from '../helpers/kafka.js';
import { assertPerKey, countOf, countsUpTo } from '../helpers/outputs.js';

function setup(ns: string) {
  return createTopics([
    { topic: `${ns}-in`, partitions: 3 },
    { topic: `${ns}-out`, partitions: 3 },
    { topic: `${ns}-in.DLT`, partitions: 1 },
  ]);
}

function counter(ns: string) {
  return defineProcessor<{ n: number }, number>({
    input: `${ns}-in`,
    output: `${ns}-out`,
    store: ns.replace(/-/g, '_'),
    operation: (r) => ({ op: 'add', by: r.n }),
  });
}

const inputs = (n: number): Msg[] =>
  Array.from({ length: n }, (_, i) => ({ key: `k${i % 9}`, value: JSON.stringify({ n: 1 }) }));
/** key -> how many of `inputs(n)` it gets. */
function perKey(n: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const m of inputs(n)) out.set(m.key ?? '', (out.get(m.key ?? '') ?? 0) + 1);
  return out;
}

describe('group protocol, static membership and WAIT', { timeout: 180_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = new Redis(REDIS_URL, { enableAutoPipelining: true });
  });
  after(() => redis.disconnect());

  it('runs with the KIP-848 consumer group protocol and a static member id (exactly-once)', async () => {
    const ns = uniqueName('kip848');
    const cleanup = await setup(ns);
    try {
      await produce(`${ns}-in`, inputs(300));
      const p = new Processor({
        definition: counter(ns),
        redis,
        groupId: `${ns}-g`,
        kafka: {
          brokers: KAFKA_BROKERS.split(','),
          groupProtocol: 'consumer',
          groupInstanceId: `${ns}-member-1`,
        },
      });
      await p.start();
      try {
        await pollUntil('300 records', () => p.counts().records >= 300, 90_000);
      } finally {
        await p.close();
      }
      const want = perKey(300);
      for (const [key, count] of want)
        assert.equal((await p.fence.read(key))?.value?.toString(), String(count), `state of ${key}`);
      const out = await readToEnd(`${ns}-out`);
      assertPerKey('one committed output per input', out, countOf, countsUpTo(want));
    } finally {
      await cleanup();
    }
  });

  it('WAIT: commits only after the replica acknowledged the Redis writes; never while it cannot', async () => {
    const ns = uniqueName('wait');
    const cleanup = await setup(ns);
    try {
      await produce(`${ns}-in`, inputs(90));
      // The dev standalone Redis has one replica (dev/redis.sh): WAIT 1 succeeds.
      const ok = new Processor({
        definition: counter(ns),
        redis,
        mode: 'at-least-once',
        groupId: `${ns}-g`,
        waitReplicas: { replicas: 1, timeoutMs: 2000 },
        kafka: { brokers: KAFKA_BROKERS.split(',') },
      });
      await ok.start();
      try {
        await pollUntil('90 records', () => ok.counts().records >= 90, 60_000);
      } finally {
        await ok.close();
      }
      const committed = await committedOffsets(`${ns}-g`, `${ns}-in`);
      assert.equal(
        [...committed.values()].reduce((a, b) => a + b, 0),
        90,
      );
      for (const [key, count] of perKey(90))
        assert.equal((await ok.fence.read(key))?.value?.toString(), String(count), `state of ${key}`);

      // Asking for two replicas cannot be met: the processor applies, WAIT fails, and it never commits.
      await produce(`${ns}-in`, inputs(30));
      const warnings: string[] = [];
      const logger = {
        debug() {},
        info() {},
        error() {},
        warn: (_: object, msg?: string) => {
          warnings.push(msg ?? '');
        },
      };
      const withLog = new Processor({
        definition: counter(ns),
        redis,
        mode: 'at-least-once',
        groupId: `${ns}-g`,
        waitReplicas: { replicas: 2, timeoutMs: 200 },
        kafka: { brokers: KAFKA_BROKERS.split(',') },
        logger,
      });
      await withLog.start();
      try {
        await pollUntil(
          'the unmet WAIT paused consumption',
          () => warnings.some((w) => w.startsWith('Redis unavailable')),
          60_000,
        );
        const again = await committedOffsets(`${ns}-g`, `${ns}-in`);
        assert.equal(
          [...again.values()].reduce((a, b) => a + b, 0),
          90,
          'nothing committed past the unacknowledged writes',
        );
        assert.equal(withLog.counts().records, 0);
      } finally {
        await withLog.close();
      }
    } finally {
      await cleanup();
    }
  });
});
