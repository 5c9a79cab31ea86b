/**
 * waitReplicas on Redis Cluster: the processor WAITs on every master it writes to (the test cluster has
 * one replica per master), commits once they acknowledged, and never commits while they cannot.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Cluster } from 'ioredis';
import { defineProcessor, HealthState, Processor } from '../../src/index.js';
import { cluster, KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, pollUntil, produce } from '../helpers/kafka.js';

describe('waitReplicas on Redis Cluster', { timeout: 180_000 }, () => {
  let redis: Cluster;
  before(() => {
    redis = cluster();
  });
  after(() => redis.disconnect());

  it('commits after one replica of each master acknowledged; with two asked for, never commits', async () => {
    const ns = uniqueName('cwait');
    const input = `${ns}-in`;
    const drop = await createTopics([
      { topic: input, partitions: 3 },
      { topic: `${ns}-out`, partitions: 3 },
      { topic: `${input}.DLT`, partitions: 1 },
    ]);
    const make = (replicas: number, health?: HealthState) =>
      new Processor<{ n: number }>({
        definition: defineProcessor<{ n: number }>({
          input,
          output: `${ns}-out`,
          store: ns,
          operation: (r) => ({ op: 'add', by: r.n }),
        }),
        redis,
        mode: 'at-least-once',
        groupId: `${ns}-g`,
        waitReplicas: { replicas, timeoutMs: 300 },
        kafka: { brokers: KAFKA_BROKERS.split(',') },
        ...(health ? { health } : {}),
      });
    const committedSum = async () =>
      [...(await committedOffsets(`${ns}-g`, input)).values()].reduce((a, b) => a + Math.max(0, b), 0);
    try {
      // keys spread over all three masters' slots
      await produce(
        input,
        Array.from({ length: 90 }, (_, i) => ({ key: `k${i % 30}`, value: '{"n":1}' })),
      );
      const ok = make(1);
      await ok.start();
      try {
        await pollUntil('90 records committed', async () => (await committedSum()) === 90, 60_000);
      } finally {
        await ok.close();
      }

      await produce(
        input,
        Array.from({ length: 30 }, (_, i) => ({ key: `k${i}`, value: '{"n":1}' })),
      );
      const health = new HealthState();
      const unmet = make(2, health);
      await unmet.start();
      try {
        await pollUntil('the unmet WAIT paused consumption', () => !health.snapshot().parts.redis, 60_000);
        assert.equal(await committedSum(), 90, 'nothing committed past the unacknowledged writes');
        assert.equal(unmet.counts().records, 0);
      } finally {
        await unmet.close();
      }
    } finally {
      await drop();
    }
  });
});
