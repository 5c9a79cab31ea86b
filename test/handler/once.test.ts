/**
 * ctx.once against the real Redis: an id marked done is skipped (a redelivery, a second record with
 * the same event id); a zombie cannot mark work done: when a newer owner raised the partition's epoch
 * (before the work, or while it ran) the mark is refused, RF_HANDLER_FENCED stops the partition here
 * and nothing of it is committed past the record.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { createHandler, defineHandler, Fence, KeySpace } from '../../src/index.js';
import { MemoryKafka } from '../../src/testing/index.js';
import { REDIS_URL, uniqueName } from '../helpers/env.js';
import { until } from '../testing/support.js';

type Ev = { eventId: string; n: number };

function redisFor(t: { after(fn: () => unknown): void }, name: string): Redis {
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 2 });
  t.after(async () => {
    const keys = await redis.keys(`rf:{${name}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });
  return redis;
}

describe('ctx.once on Redis', () => {
  it('runs each id once: a duplicate event id and a full replay by a new group are skipped', async (t) => {
    const name = uniqueName('once').replace(/-/g, '_');
    const redis = redisFor(t, name);
    const kafka = new MemoryKafka({ topics: { in: 2, 'in.DLT': 1 } });
    const events: Ev[] = [1, 2, 3, 2, 4].map((n) => ({ eventId: `e${n}`, n }));
    kafka.produce(events.map((e) => ({ topic: 'in', key: 'k', value: JSON.stringify(e) })));
    const calls: string[] = [];
    const results: boolean[] = [];
    const def = defineHandler<Ev>({
      input: 'in',
      name,
      id: (r) => r.value.eventId,
      handle: async (r, ctx) => {
        const out = await ctx.once(async () => calls.push(r.value.eventId));
        results.push(out.ran);
      },
    });
    for (const group of ['a', 'b']) {
      const h = createHandler(def, {
        kafka: kafka.port({ groupId: `${name}-${group}` }),
        groupId: `${name}-${group}`,
        redis,
        commitIntervalMs: 10,
      });
      await h.start();
      await until(`group ${group} done`, () => h.counts().done === 5);
      await h.close();
    }
    assert.deepEqual(calls, ['e1', 'e2', 'e3', 'e4']);
    assert.deepEqual(results, [true, true, true, false, true, false, false, false, false, false]);
    const marker = new KeySpace({ store: name }).once('in', 0, 'e1');
    const where =
      (await redis.exists(marker)) === 1 ? marker : new KeySpace({ store: name }).once('in', 1, 'e1');
    assert.equal(await redis.exists(where), 1);
    assert.ok((await redis.pttl(where)) > 6 * 24 * 3600 * 1000, 'kept for onceTtlMs (7 days)');
  });

  it('a zombie cannot mark work done: the epoch raised while the work ran refuses the mark', async (t) => {
    const name = uniqueName('zombie').replace(/-/g, '_');
    const redis = redisFor(t, name);
    const kafka = new MemoryKafka({ topics: { in: 1, 'in.DLT': 1 } });
    kafka.produce(
      [0, 1, 2, 3].map((n) => ({
        topic: 'in',
        key: `k${n}`,
        value: JSON.stringify({ eventId: `e${n}`, n }),
      })),
    );
    const newOwner = new Fence({ redis, store: name, mode: 'strict' });
    const groupId = `${name}-g`;
    const ran: number[] = [];
    const failures: unknown[] = [];
    const h = createHandler(
      defineHandler<Ev>({
        input: 'in',
        name,
        handle: async (r, ctx) => {
          try {
            await ctx.once(async () => {
              ran.push(r.value.n);
              // another instance is assigned the partition while this call runs
              if (r.value.n === 2) await newOwner.acquireEpoch('in', 0);
            });
          } catch (err) {
            failures.push(err);
            throw err;
          }
        },
      }),
      {
        kafka: kafka.port({ groupId, maxBatchSize: 1 }),
        groupId,
        redis,
        concurrency: 1,
        commitIntervalMs: 10,
        closeTimeoutMs: 100,
      },
    );
    t.after(() => h.close());
    await h.start();
    await until('fenced', () => failures.length > 0);
    assert.equal((failures[0] as { code?: string }).code, 'RF_HANDLER_FENCED');
    const keys = new KeySpace({ store: name });
    assert.equal(
      await redis.exists(keys.once('in', 0, 'in/0/2')),
      0,
      'the zombie did not mark record 2 done',
    );
    assert.equal(await redis.exists(keys.once('in', 0, 'in/0/1')), 1);
    await h.close();
    // nothing committed past the fenced record, and record 3 never ran here
    assert.ok((kafka.committedOffsets(groupId, 'in').get(0) ?? -1) <= 2);
    assert.deepEqual(ran, [0, 1, 2]);
  });
});
