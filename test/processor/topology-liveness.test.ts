/**
 * A topology processor's liveness and stalled-consumer watchdog, on the real broker and Redis: a running
 * topology marks progress for /livez (without it an orchestrator's liveness probe restarted a healthy
 * instance every 30 s), and a consumer that silently stopped delivering batches is noticed, sought back
 * to its committed offsets, and finishes with the counts the input gives, each once (exactly-once).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { ConfluentKafka } from '../../src/kafka/confluent.js';
import { HealthState } from '../../src/metrics/index.js';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import { type BuiltTopology, serdes, topology } from '../../src/topology/index.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { createTopics, produce, readToEnd, waitCommitted } from '../helpers/kafka.js';
import { capturing } from './offset-resets-helpers.js';
import { StallingPort } from './stalling-port.js';

const s = serdes.string();
const KEYS = 6;
const RECORDS = 120;

/** Orders counted per customer (unwindowed), each update to `<ns>-counts`. */
function counts(ns: string): BuiltTopology {
  const t = topology({ applicationId: ns });
  t.stream<string, { amount: number }>(`${ns}-orders`, { key: s })
    .groupByKey()
    .count({ name: 'orders-per-customer' })
    .toStream()
    .to(`${ns}-counts`, { key: s });
  return t.build();
}

/** The last count per key of the output, and how many updates each key got. */
async function lastCounts(topic: string): Promise<Map<string, { last: string; updates: number }>> {
  const out = new Map<string, { last: string; updates: number }>();
  for (const r of await readToEnd(topic))
    out.set(r.key ?? '-', { last: r.value ?? '-', updates: (out.get(r.key ?? '-')?.updates ?? 0) + 1 });
  return out;
}

describe('topology processor: liveness and the stalled-consumer watchdog', { timeout: 120_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  async function setup(ns: string) {
    const cleanup = await createTopics([
      { topic: `${ns}-orders`, partitions: 2 },
      { topic: `${ns}-counts`, partitions: 2 },
      { topic: `${ns}-orders.DLT`, partitions: 1 },
    ]);
    await produce(
      `${ns}-orders`,
      Array.from({ length: RECORDS }, (_, i) => ({ key: `c${i % KEYS}`, value: '{"amount":1}' })),
    );
    return cleanup;
  }

  it('marks progress for /livez while it runs', async (t) => {
    const ns = uniqueName('tlive');
    t.after(await setup(ns));
    // a clock the test moves: construction counts as progress at 0, so only a mark made while running
    // makes the instance live at 1_030_000
    let now = 0;
    const health = new HealthState({ clock: () => now });
    now = 1_000_000;
    const p = new TopologyProcessor({
      topology: counts(ns),
      redis,
      health,
      kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000 },
    });
    assert.equal(health.live(1_030_000, 29_999), false, 'not live before it runs');
    await p.start();
    try {
      await waitCommitted(ns, `${ns}-orders`);
    } finally {
      await p.close();
    }
    assert.equal(health.live(1_030_000, 30_000), true, 'progress was marked while running');
  });

  it('notices a consumer that stopped delivering, seeks back, and finishes exactly once', async (t) => {
    const ns = uniqueName('tstall');
    t.after(await setup(ns));
    const port = new StallingPort(
      new ConfluentKafka({ brokers: KAFKA_BROKERS.split(','), groupId: ns, transactionalId: `${ns}-tx` }),
    );
    const { logger, warnings } = capturing();
    const p = new TopologyProcessor({
      topology: counts(ns),
      redis,
      kafka: port,
      watchdog: { stallMs: 1500, intervalMs: 300, maxRecoveries: 3 },
      logger,
    });
    await p.start();
    try {
      await waitCommitted(ns, `${ns}-orders`);
    } finally {
      await p.close();
    }
    assert.ok(port.seeks >= 1, 'the watchdog sought the stalled partitions');
    assert.ok(warnings.some((w) => w.msg.startsWith('consumer stalled')));
    // RECORDS orders over KEYS customers: each customer's updates 1..RECORDS/KEYS, each once
    const got = await lastCounts(`${ns}-counts`);
    assert.equal(got.size, KEYS);
    for (const [key, c] of got)
      assert.deepEqual(c, { last: String(RECORDS / KEYS), updates: RECORDS / KEYS }, `counts of ${key}`);
  });
});
