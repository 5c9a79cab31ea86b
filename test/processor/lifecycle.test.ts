/**
 * The processor's lifecycle without a broker (MemoryKafka, whose holds and injected failures decide
 * when start() and stop() finish or fail; a real Redis): close() is one drain
 * for every caller, a failed start() leaves nothing running, wrong-state calls say so, the fence's
 * scripts are in Redis before `scripts` is reported ready, and a compare-and-set that keeps conflicting
 * is a conflict, not a Redis outage.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { loadScripts } from '../../src/fence/index.js';
import { startRedisServer } from '../../src/harness/index.js';
import { pollUntil } from '../../src/harness/poll.js';
import { defineProcessor, Fence, HealthState, Processor, RedfenceMetrics } from '../../src/index.js';
import { MemoryKafka, type MemoryKafkaPort } from '../../src/testing/index.js';
import { standalone, uniqueName } from '../helpers/env.js';

/** A cluster with the topics of namespace `ns` (input, output, dead letters) and one port of its group. */
function memory(ns: string): { kafka: MemoryKafka; port: MemoryKafkaPort; groupId: string } {
  const kafka = new MemoryKafka({ topics: { [`${ns}-in`]: 1, [`${ns}-out`]: 1, [`${ns}-in.DLT`]: 1 } });
  const groupId = `${ns}-g`;
  return { kafka, port: kafka.port({ groupId }), groupId };
}

/** Counts the intervals created and not cleared while `fn` runs code that creates them. */
function trackIntervals(): { live(): number; restore(): void } {
  const live = new Set<unknown>();
  const set = globalThis.setInterval;
  const clear = globalThis.clearInterval;
  globalThis.setInterval = ((...args: Parameters<typeof setInterval>) => {
    const t = set(...args);
    live.add(t);
    return t;
  }) as typeof setInterval;
  globalThis.clearInterval = ((t: Parameters<typeof clearInterval>[0]) => {
    live.delete(t);
    clear(t);
  }) as typeof clearInterval;
  return {
    live: () => live.size,
    restore: () => {
      globalThis.setInterval = set;
      globalThis.clearInterval = clear;
    },
  };
}

/** Lets every promise callback that is ready run (no timers involved). */
async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
}

describe('processor lifecycle', () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  /** A processor and its port on a cluster of its own. */
  const make = (extra: { health?: HealthState } = {}) => {
    const ns = uniqueName('life');
    const { port, groupId } = memory(ns);
    const processor = new Processor<{ n: number }>({
      definition: defineProcessor<{ n: number }>({
        input: `${ns}-in`,
        output: `${ns}-out`,
        store: ns,
        operation: (r) => ({ op: 'add', by: r.n }),
      }),
      redis,
      kafka: port,
      groupId,
      ...extra,
    });
    return { processor, port };
  };

  it('close() is memoised: a second caller waits for the same drain', async () => {
    const { processor: p, port } = make();
    await p.start();
    const stopping = port.hold('stop');
    const first = p.close();
    const second = p.close();
    let secondDone = false;
    void second.then(() => {
      secondDone = true;
    });
    await stopping.reached;
    await settle();
    assert.equal(secondDone, false, 'the second close() waits while Kafka is still stopping');
    assert.equal(p.state, 'closing');
    assert.equal(second, first, 'every caller gets the same promise');
    stopping.release();
    await Promise.all([first, second]);
    assert.equal(p.state, 'closed');
    assert.equal(port.calls.stop, 1, 'Kafka stopped once');
    assert.equal(port.state, 'stopped');
    await p.close(); // and later calls resolve at once
    assert.equal(port.calls.stop, 1);
  });

  it('a failed start() stops Kafka, clears its timers and ends closed', async () => {
    for (const failAt of ['start', 'partitionCount'] as const) {
      const timers = trackIntervals();
      try {
        const boom = new Error(`broker said no (${failAt})`);
        const health = new HealthState();
        const { processor: p, port } = make({ health });
        port.failNext(failAt, { error: boom });
        await assert.rejects(p.start(), boom);
        assert.equal(p.state, 'closed', `state after a failed ${failAt}`);
        assert.equal(port.calls.stop, 1, `Kafka stopped after a failed ${failAt}`);
        assert.equal(port.state, 'stopped');
        assert.equal(port.calls.partitionCount, failAt === 'start' ? 0 : 1);
        assert.equal(timers.live(), 0, `no interval left running after a failed ${failAt}`);
        assert.deepEqual(health.snapshot().parts, {
          group: false,
          scripts: false,
          redis: false,
          kafka: false,
        });
        await assert.rejects(p.start(), { code: 'RF_INVALID_STATE' });
        await p.close();
        assert.equal(port.calls.stop, 1, 'close() after a failed start has nothing left to stop');
      } finally {
        timers.restore();
      }
    }
  });

  it('close() during start() stops it: start() rejects, nothing keeps running', async () => {
    const timers = trackIntervals();
    try {
      const { processor: p, port } = make();
      const held = port.hold('start');
      const starting = p.start();
      await held.reached; // Redis checked, scripts loaded, Kafka starting
      const closing = p.close();
      held.release();
      await assert.rejects(starting, { code: 'RF_INVALID_STATE', message: /close\(\) was called/ });
      await closing;
      assert.equal(p.state, 'closed');
      assert.ok(port.calls.stop >= 1, 'Kafka stopped');
      assert.equal(port.state, 'stopped');
      assert.equal(timers.live(), 0, 'no interval left running');
    } finally {
      timers.restore();
    }
  });

  it('wrong-state calls throw RF_INVALID_STATE', async () => {
    const { processor: p, port } = make();
    await p.start();
    await assert.rejects(p.start(), {
      code: 'RF_INVALID_STATE',
      message: /start\(\) called in state running/,
    });
    await p.close();
    await assert.rejects(p.start(), { code: 'RF_INVALID_STATE', message: /state closed/ });
    assert.equal(port.calls.start, 1);
  });

  it('reports `scripts` ready only once every fence script is loaded in Redis', async (t) => {
    // a Redis of its own that never ran a redfence script
    const server = await startRedisServer();
    t.after(() => server.stop());
    const client = new Redis(server.url);
    t.after(() => client.disconnect());
    const shas = [...loadScripts().values()].map((s) => s.sha);
    assert.deepEqual(
      await client.script('EXISTS', ...shas),
      shas.map(() => 0),
    );
    const health = new HealthState();
    const ns = uniqueName('scripts');
    const { port, groupId } = memory(ns);
    const p = new Processor({
      definition: defineProcessor({
        input: `${ns}-in`,
        output: `${ns}-out`,
        store: ns,
        operation: () => ({ op: 'add', by: 1 }),
      }),
      redis: client,
      kafka: port,
      groupId,
      health,
    });
    t.after(() => p.close());
    await p.start();
    assert.equal(health.snapshot().parts.scripts, true);
    const exists = (await client.script('EXISTS', ...shas)) as number[];
    assert.deepEqual(
      exists,
      shas.map(() => 1),
      'every script is in the script cache',
    );
  });

  it('a compare-and-set that keeps conflicting is RF_CAS_CONFLICT: nothing committed, no outage', async (t) => {
    const ns = uniqueName('cas');
    const input = `${ns}-in`;
    // The key was last written from another partition, and reads of it are hidden from the processor:
    // every compare-and-set it sends expects "no state" and finds that write, round after round.
    await new Fence({ redis, store: ns, mode: 'strict' }).apply({
      topic: input,
      partition: 7,
      epoch: 1,
      committedOffset: 0,
      key: 'k',
      records: [{ offset: 100, operation: { op: 'set', value: '1' } }],
    });
    const hiding = new Proxy(redis, {
      get(target, prop) {
        if (prop === 'hgetallBuffer') return async () => ({});
        const v = Reflect.get(target, prop, target) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const { kafka, port, groupId } = memory(ns);
    const output = `${ns}-out`;
    kafka.produce([
      { topic: input, key: 'k', value: JSON.stringify({ n: 1 }), partition: 0 },
      { topic: input, key: 'k', value: JSON.stringify({ n: 2 }), partition: 0 },
    ]);
    const health = new HealthState();
    const metrics = new RedfenceMetrics({ registry: new Registry() });
    const p = new Processor<{ n: number }, number>({
      definition: defineProcessor<{ n: number }, number>({
        input,
        output,
        store: ns,
        reduce: (s, r) => ({ state: (s ?? 0) + r.n }),
      }),
      redis: hiding,
      kafka: port,
      groupId,
      health,
      metrics,
    });
    t.after(() => p.close());
    await p.start();
    await pollUntil('the batch handler to fail', () => port.handlerErrors.length > 0, 15_000, 5);
    const [first] = port.handlerErrors as Error[];
    assert.equal((first as { code?: unknown }).code, 'RF_CAS_CONFLICT');
    assert.match(first?.message ?? '', /kept conflicting/);
    assert.deepEqual(port.steps, [], 'no Kafka step: nothing produced, nothing committed');
    assert.deepEqual(kafka.committedOffsets(groupId, input), new Map(), 'the batch is not committed');
    assert.deepEqual(kafka.read(output, { isolation: 'read_uncommitted' }), [], 'nothing of it is produced');
    // no outage: the only pause is the failed batch's backoff of its partition (batch-backoff.ts)
    assert.ok(port.calls.pause >= 1, 'its partition waits before the batch is delivered again');
    assert.equal(health.snapshot().parts.redis, true, 'Redis stays ready');
    assert.match(await metrics.metricsText(), /^redfence_redis_outage 0$/m);
  });
});
