/**
 * The consumer side of a rate limit, on the real broker with the limiter on Redis standalone and Cluster: a handler whose records call
 * `limiter.take()` is held by the limit — each refusal pauses the record's partition until
 * retryAfterMs and tries the same record again, never counted as a failed attempt — so the limited
 * tenant is handled within the GCRA bound (burst + rate x time), while the poll loop goes on: another
 * partition's records, produced while the limited one is held, are all handled before it finishes.
 * Nothing is lost or dead-lettered. Then the same with `RateLimited(retryAfterMs)` for a limit that is
 * not the kit's (a partner's 429), on the in-memory Kafka.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { createHandler, defineHandler, RateLimited } from '../../src/index.js';
import { ConfluentKafka } from '../../src/kafka/confluent.js';
import type { KafkaPort, TopicPartition } from '../../src/kafka/types.js';
import { RateLimiter } from '../../src/kit/index.js';
import { MemoryKafka } from '../../src/testing/index.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, endOffsets, pollUntil, produce } from '../helpers/kafka.js';
import { KIT_TARGETS } from './support.js';

type Job = { tenant: string; i: number };

/** The port with its pause and resume calls recorded (time, partition). */
function spied(port: KafkaPort) {
  const pauses: Array<{ at: number; partition: number }> = [];
  const resumes: Array<{ at: number; partition: number }> = [];
  const pause = port.pause.bind(port);
  const resume = port.resume.bind(port);
  port.pause = (tps: TopicPartition[]) => {
    for (const tp of tps) pauses.push({ at: Date.now(), partition: tp.partition });
    pause(tps);
  };
  port.resume = (tps: TopicPartition[]) => {
    for (const tp of tps) resumes.push({ at: Date.now(), partition: tp.partition });
    resume(tps);
  };
  return { port, pauses, resumes };
}

for (const target of KIT_TARGETS) {
  describe(`a rate-limited handler on ${target.name} (real broker)`, { timeout: 60_000 }, () => {
    it('holds the limited partition to the GCRA bound while the others flow; nothing lost', async () => {
      const redis = target.connect();
      after(() => redis.disconnect());
      const topic = uniqueName('rl');
      const groupId = `${topic}-g`;
      after(
        await createTopics([
          { topic, partitions: 2 },
          { topic: `${topic}.DLT`, partitions: 1 },
        ]),
      );
      const RATE = 10;
      const BURST = 5;
      const N = 70;
      const FREE = 200;
      const limiter = new RateLimiter({ redis, name: uniqueName('partner'), rate: RATE, burst: BURST });
      const admitted: number[] = [];
      const freeDone: number[] = [];
      /** Per key, the `i` of every record handled (the limited ones once admitted), in handling order. */
      const handled = new Map<string, number[]>();
      const attempts = new Set<number>();
      const { port, pauses, resumes } = spied(
        new ConfluentKafka({ brokers: KAFKA_BROKERS.split(','), groupId, clientId: `${topic}-c` }),
      );
      const h = createHandler(
        defineHandler<Job>({
          input: topic,
          name: 'rl',
          handle: async (r, ctx) => {
            if (r.value.tenant === 'limited') {
              await limiter.take({ tenant: 'limited', id: 'partner-api' });
              admitted.push(Date.now());
              attempts.add(ctx.attempt);
            } else freeDone.push(Date.now());
            const key = String(r.key);
            handled.set(key, [...(handled.get(key) ?? []), r.value.i]);
          },
        }),
        { kafka: port, groupId, commitIntervalMs: 50, retry: { attempts: 2, baseMs: 10, maxMs: 50 } },
      );
      after(() => h.close());
      await h.start();
      await produce(
        topic,
        Array.from({ length: N }, (_, i) => ({
          key: `L${i % 4}`,
          partition: 0,
          value: JSON.stringify({ tenant: 'limited', i }),
        })),
      );
      await pollUntil('the limited partition held', () => pauses.some((p) => p.partition === 0), 30_000, 10);
      // produced while partition 0 is held: they must not wait for it
      await produce(
        topic,
        Array.from({ length: FREE }, (_, i) => ({
          key: `F${i % 20}`,
          partition: 1,
          value: JSON.stringify({ tenant: 'free', i }),
        })),
      );
      await pollUntil('the free partition done', () => freeDone.length === FREE, 30_000, 10);
      const limitedWhenFreeDone = admitted.length;
      assert.ok(limitedWhenFreeDone < N, 'the free records waited for the limited partition');
      await pollUntil('the limited partition done', () => admitted.length === N, 45_000, 20);

      // per key, every record handled exactly once and in order (totals cannot see a loss beside a
      // duplicate)
      const want = new Map<string, number[]>();
      const add = (key: string, i: number) => want.set(key, [...(want.get(key) ?? []), i]);
      for (let i = 0; i < N; i++) add(`L${i % 4}`, i);
      for (let i = 0; i < FREE; i++) add(`F${i % 20}`, i);
      assert.deepEqual([...handled.keys()].sort(), [...want.keys()].sort(), 'the keys handled');
      for (const [key, is] of want)
        assert.deepEqual(handled.get(key), is, `key ${key}: each record once, in order`);

      // the GCRA bound: by each admission, at most burst + rate x elapsed (+1 for rounding and the
      // client's view of Redis's clock), never more; fewer only means the machine was slow
      const t0 = admitted[0] as number;
      admitted.forEach((t, k) => {
        const bound = BURST + (RATE * (t - t0 + 100)) / 1000 + 1;
        assert.ok(
          k + 1 <= bound,
          `admission ${k + 1} at +${t - t0} ms is over the bound ${bound.toFixed(1)}`,
        );
      });
      const spanMs = (admitted[N - 1] as number) - t0;
      assert.ok(spanMs >= ((N - BURST - 1) / RATE) * 1000 - 100, `all ${N} admitted within ${spanMs} ms`);

      // a refusal is a hold, not a failure: no record used up its attempts or went to the DLT
      assert.deepEqual([...attempts], [1]);
      assert.equal(h.counts().deadLettered, 0);
      assert.ok(!pauses.some((p) => p.partition === 1), 'the free partition was paused');
      assert.ok(
        resumes.some((r) => r.partition === 0),
        'the limited partition was resumed',
      );
      const ends = await endOffsets(topic);
      await pollUntil(
        'everything committed',
        async () => {
          const c = await committedOffsets(groupId, topic);
          return c.get(0) === ends.get(0) && c.get(1) === ends.get(1);
        },
        30_000,
        50,
      );
    });
  });
}

describe('RateLimited for any limit (in-memory Kafka)', () => {
  it('holds for retryAfterMs and tries the same record again, not as an attempt', async () => {
    const kafka = new MemoryKafka({ topics: { in: 1, 'in.DLT': 1 } });
    const groupId = uniqueName('h');
    const { port, pauses, resumes } = spied(kafka.port({ groupId }));
    const tries: Array<{ at: number; attempt: number; seq: number }> = [];
    const h = createHandler(
      defineHandler<{ seq: number }>({
        input: 'in',
        name: 'partner',
        handle: async (r, ctx) => {
          tries.push({ at: Date.now(), attempt: ctx.attempt, seq: r.value.seq });
          if (tries.filter((t) => t.seq === r.value.seq).length <= 3) throw new RateLimited(40);
        },
      }),
      { kafka: port, groupId, commitIntervalMs: 10, retry: { attempts: 1 } },
    );
    after(() => h.close());
    await h.start();
    kafka.produce([{ topic: 'in', key: 'k', value: JSON.stringify({ seq: 1 }) }]);
    await pollUntil('done', () => h.counts().done === 1, 10_000, 5);
    const mine = tries.filter((t) => t.seq === 1);
    assert.equal(mine.length, 4, 'three holds, then the try that succeeded');
    assert.deepEqual(
      mine.map((t) => t.attempt),
      [1, 1, 1, 1],
    );
    for (let i = 1; i < mine.length; i++) {
      const gap = (mine[i] as { at: number }).at - (mine[i - 1] as { at: number }).at;
      assert.ok(gap >= 35, `tried again after ${gap} ms, before retryAfterMs`);
    }
    assert.equal(h.counts().deadLettered, 0, 'with attempts: 1, a counted failure would dead-letter it');
    assert.ok(pauses.length >= 1 && resumes.length >= 1);
    await pollUntil('committed', () => kafka.committedOffsets(groupId, 'in').get(0) === 1, 10_000, 5);
  });
});
