/**
 * Pending outputs below the committed offset do not stay in Redis: the processor sweeps the partitions it
 * committed when it closes and when they are revoked, and on a timer as well as every N commits.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { defineProcessor, Fence, Processor, type ProcessorOptions } from '../../src/index.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, endOffsets, pollUntil, produce } from '../helpers/kafka.js';

const RECORDS = 2000;
const KEYS = 50;
const PARTITIONS = 3;
/** Sweep settings that never sweep during the test (only close and revocation do). */
const NEVER = { sweepEvery: 1_000_000, sweepIntervalMs: 600_000 };

describe('sweeping pending outputs', { timeout: 240_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  async function setUp(prefix: string) {
    const ns = uniqueName(prefix);
    const input = `${ns}-in`;
    const drop = await createTopics([
      { topic: input, partitions: PARTITIONS },
      { topic: `${ns}-out`, partitions: PARTITIONS },
      { topic: `${input}.DLT`, partitions: 1 },
    ]);
    await produce(
      input,
      Array.from({ length: RECORDS }, (_, i) => ({ key: `k${i % KEYS}`, value: '{"n":1}' })),
    );
    const ends = await endOffsets(input);
    const fence = new Fence({ redis, store: ns, mode: 'strict' });
    const make = (extra: Partial<ProcessorOptions<{ n: number }>> = {}) =>
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
        kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 100 },
        ...extra,
      });
    const allCommitted = async () => {
      const now = await committedOffsets(`${ns}-g`, input);
      return [...ends].every(([p, end]) => now.get(p) === end);
    };
    /** Pending entries (and pending-index members) below the committed offset, per partition. */
    const pendingBelowCommitted = async (): Promise<Map<number, number>> => {
      const committed = await committedOffsets(`${ns}-g`, input);
      const below = new Map<number, number>();
      for (let p = 0; p < PARTITIONS; p++) {
        const c = committed.get(p) ?? -1;
        const members = await redis.zrangebyscore(fence.keys.pendingIndex(input, p), '-inf', `(${c}`);
        below.set(p, members.length);
      }
      for (let k = 0; k < KEYS; k++) {
        const state = await fence.read(`k${k}`);
        assert.ok(state, `k${k} has state`);
        const c = committed.get(state.partition) ?? -1;
        const n = state.pending.filter((e) => e.offset < c).length;
        below.set(state.partition, (below.get(state.partition) ?? 0) + n);
      }
      return below;
    };
    const total = (m: Map<number, number>) => [...m.values()].reduce((a, b) => a + b, 0);
    return { ns, drop, fence, make, allCommitted, pendingBelowCommitted, total };
  }

  it('a clean close leaves no pending output below the committed offsets (default settings)', async () => {
    const t = await setUp('sweep-close');
    try {
      const p = t.make();
      await p.start();
      try {
        await pollUntil('every record committed', t.allCommitted, 120_000);
      } finally {
        await p.close();
      }
      assert.deepEqual(
        [...(await t.pendingBelowCommitted())],
        [...Array(PARTITIONS).keys()].map((p) => [p, 0]),
      );
      for (let k = 0; k < KEYS; k++) {
        const state = await t.fence.read(`k${k}`);
        assert.equal(Number(state?.value?.toString()), RECORDS / KEYS, `k${k} applied once per record`);
      }
    } finally {
      await t.drop();
    }
  });

  it('revocation sweeps the partitions that go, close sweeps the rest', async () => {
    const t = await setUp('sweep-revoke');
    try {
      const a = t.make(NEVER);
      const b = t.make(NEVER);
      try {
        await a.start();
        await pollUntil('every record committed', t.allCommitted, 120_000);
        const before = await t.pendingBelowCommitted();
        for (const [p, n] of before) assert.ok(n > 0, `without a sweep partition ${p} keeps pending entries`);

        await b.start();
        await pollUntil(
          'b took partitions over',
          () => b.assignment.length > 0 && a.assignment.length < PARTITIONS,
          90_000,
        );
        const moved = new Set(b.assignment.map((tp) => tp.partition));
        const mid = await t.pendingBelowCommitted();
        for (const [p, n] of mid) {
          if (moved.has(p)) assert.equal(n, 0, `partition ${p} was swept when it was revoked from a`);
          else assert.ok(n > 0, `partition ${p}, still a's, is not swept yet`);
        }
        await a.close();
        assert.equal(
          t.total(await t.pendingBelowCommitted()),
          0,
          "a's close swept the partitions it still had",
        );
      } finally {
        await a.close();
        await b.close();
      }
    } finally {
      await t.drop();
    }
  });

  for (const [name, settings, what] of [
    [
      'sweeps every N commits while running, beside the Kafka step (no timer)',
      { sweepEvery: 1, sweepIntervalMs: 600_000 },
      'the sweeps after the commits',
    ],
    [
      'sweeps on a timer while running (sweepIntervalMs), without waiting for N commits',
      { sweepEvery: 1_000_000, sweepIntervalMs: 300 },
      'the timer',
    ],
  ] as const)
    it(name, async () => {
      const t = await setUp(settings.sweepEvery === 1 ? 'sweep-every' : 'sweep-timer');
      try {
        const p = t.make(settings);
        await p.start();
        try {
          await pollUntil('every record committed', t.allCommitted, 120_000);
          await pollUntil(
            `${what} swept every partition`,
            async () => t.total(await t.pendingBelowCommitted()) === 0,
            30_000,
          );
          assert.equal(p.state, 'running', 'swept while running, not by close()');
        } finally {
          await p.close();
        }
      } finally {
        await t.drop();
      }
    });
});
