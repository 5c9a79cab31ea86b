/**
 * destroy() of the runtimes on the real broker and Redis: it returns without draining, so work applied
 * or running is not committed, and the group's next member does it again, exactly (as after a crash).
 * - processor (both modes): with a long commit interval, every record is applied in Redis while its
 *   Kafka step waits; destroy() leaves the commits behind the end; a second instance finishes with exact
 *   state and outputs per key.
 * - handler: a `handle` call held open is aborted by destroy() (its signal fires) and not committed; a
 *   second handler handles that record.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { createHandler, defineHandler, type ProcessingMode, Processor } from '../../src/index.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import {
  committedOffsets,
  createTopics,
  endOffsets,
  pollUntil,
  produce,
  readToEnd,
} from '../helpers/kafka.js';
import { assertPerKey, countOf, countsUpTo, customerOrders } from '../helpers/outputs.js';
import { type Order, totalsAre, totalsDefinition } from '../helpers/totals.js';

const brokers = KAFKA_BROKERS.split(',');

describe('destroy() on the real broker', { timeout: 180_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  for (const mode of ['exactly-once', 'at-least-once'] as const) {
    it(`processor, ${mode}: returns without committing what waits; the next instance finishes exactly`, async () => {
      const ns = uniqueName(`destroy-${mode === 'exactly-once' ? 'eos' : 'alo'}`);
      const cleanup = await createTopics([
        { topic: `${ns}-orders`, partitions: 2 },
        { topic: `${ns}-totals`, partitions: 2 },
        { topic: `${ns}-orders.DLT`, partitions: 1 },
      ]);
      const definition = totalsDefinition(ns);
      const instance = (m: ProcessingMode, commitIntervalMs: number) =>
        new Processor<Order>({
          definition: definition as never,
          redis,
          mode: m,
          groupId: `${ns}-group`,
          commitIntervalMs,
          groupCommitRecords: 1_000_000,
          kafka: { brokers, sessionTimeoutMs: 6000, maxBatchSize: 50 },
        });
      const probe = instance('at-least-once', 0);
      const { messages, amounts } = customerOrders(600, 20);
      const stateIs = () => totalsAre(probe, amounts);
      const a = instance(mode, 60_000);
      const b = instance(mode, 0);
      try {
        await produce(`${ns}-orders`, messages);
        await a.start();
        await pollUntil('every order applied by the first instance', stateIs);
        const d = a.destroy(new Error('test'));
        assert.equal(a.destroy(), d, 'every call returns the same promise');
        await d;
        assert.equal(a.state, 'closed');
        const ends = await endOffsets(`${ns}-orders`);
        const at = await committedOffsets(`${ns}-group`, `${ns}-orders`);
        const behind = [...ends].filter(([p, end]) => (at.get(p) ?? -1) < end);
        assert.ok(behind.length > 0, 'destroy() committed nothing that waited: commits stay behind the end');

        await b.start();
        await pollUntil('the second instance committed to the end', async () => {
          const now = await committedOffsets(`${ns}-group`, `${ns}-orders`);
          return [...ends].every(([p, end]) => now.get(p) === end);
        });
        await b.close();
        assert.ok(await stateIs(), 'exact state per customer');
        const counts = countsUpTo(new Map([...amounts].map(([c, l]) => [c, l.length])));
        assertPerKey('outputs per customer', await readToEnd(`${ns}-totals`), countOf, counts, {
          duplicates: mode === 'exactly-once' ? 'none' : 'allowed',
        });
      } finally {
        await Promise.allSettled([a.destroy(), b.destroy()]);
        await cleanup();
      }
    });
  }

  it('handler: a held handle call is aborted and not committed; the next handler handles it', async () => {
    const ns = uniqueName('destroy-h');
    const cleanup = await createTopics([
      { topic: `${ns}-in`, partitions: 1 },
      { topic: `${ns}-in.DLT`, partitions: 1 },
    ]);
    const seen: Array<{ who: string; n: number }> = [];
    let aborted = false;
    const handler = (who: string) =>
      createHandler(
        defineHandler<{ n: number }>({
          input: `${ns}-in`,
          name: ns,
          handle: async (r, ctx) => {
            seen.push({ who, n: r.value.n });
            if (who === 'a' && r.value.n === 1)
              await new Promise<void>((_, reject) =>
                ctx.signal.addEventListener('abort', () => {
                  aborted = true;
                  reject(ctx.signal.reason);
                }),
              );
          },
        }),
        { kafka: { brokers, sessionTimeoutMs: 6000 }, groupId: `${ns}-group`, commitIntervalMs: 50 },
      );
    const a = handler('a');
    const b = handler('b');
    try {
      await produce(
        `${ns}-in`,
        [0, 1, 2].map((n) => ({ key: 'k', value: JSON.stringify({ n }) })),
      );
      await a.start();
      await pollUntil('record 1 held by the first handler', () =>
        seen.some((s) => s.who === 'a' && s.n === 1),
      );
      await a.destroy();
      assert.ok(aborted, "destroy() aborted the held call's signal");
      const at = await committedOffsets(`${ns}-group`, `${ns}-in`);
      assert.ok((at.get(0) ?? -1) <= 1, `nothing past the held record committed (at ${at.get(0)})`);
      await b.start();
      await pollUntil('the second handler handled records 1 and 2', () =>
        [1, 2].every((n) => seen.some((s) => s.who === 'b' && s.n === n)),
      );
      await b.close();
      assert.deepEqual(
        seen.filter((s) => s.who === 'a').map((s) => s.n),
        [0, 1],
        'the first handler never went past the held record',
      );
      assert.equal((await committedOffsets(`${ns}-group`, `${ns}-in`)).get(0), 3);
    } finally {
      await Promise.allSettled([a.destroy(), b.destroy()]);
      await cleanup();
    }
  });
});
