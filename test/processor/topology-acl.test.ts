/**
 * A topology under exactly the least-privilege ACL of docs/operations.md: Redis checks every command a
 * script runs against the caller's ACL, so a store script using a command the documented rule set leaves
 * out fails with NOPERM in production and nowhere else. A redis-server of the test's own gets a user
 * with the documented rules; a TopologyProcessor runs, as that user, one store of each kind the executor
 * runs (a hopping-window count with emit final and its close-time index, a JS aggregate read and written
 * back with a token, a session count), exactly-once on the real broker; its outputs equal the reference
 * model's, and TopologyState reads each store as that user. A user without one of those commands is
 * not an outage to wait out: the processor closes with RF_REDIS_AUTH naming the command (before, it
 * paused and retried forever).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { type RedisServer, startRedisServer } from '../../src/harness/index.js';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import {
  type BuiltTopology,
  SessionWindows,
  serdes,
  TimeWindows,
  topology,
} from '../../src/topology/index.js';
import { TopologyState } from '../../src/topology/state/state.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { pollUntil, waitCommitted } from '../helpers/kafka.js';
import { START_MS } from '../topology/scenarios.js';
import { assertOutputsEqualModel, type Case, PARTITIONS, prepare, processor } from './topology-helpers.js';

const ROOT = resolve(import.meta.dirname, '../..');
const s = serdes.string();
const SEC = 1000;
const MIN = 60 * SEC;

/** The rule set of the `ACL SETUSER redfence` line in docs/operations.md. */
function docAclRules(): string[] {
  const doc = readFileSync(join(ROOT, 'docs', 'operations.md'), 'utf8');
  const m = /^ACL SETUSER redfence on >PASSWORD (.+)$/m.exec(doc);
  assert.ok(m, 'docs/operations.md has the ACL SETUSER line');
  return (m[1] as string).split(' ');
}

interface Stats {
  n: number;
  sum: number;
}
const stats = serdes.json<Stats>();

function everyStoreKind(ns: string): BuiltTopology {
  const t = topology({ applicationId: ns });
  const g = t.stream<string, { amount: number } | null>(`${ns}-orders`, { key: s }).groupByKey();
  g.windowedBy(TimeWindows.ofSizeAndGrace(MIN, 10 * SEC).advanceBy(20 * SEC))
    .emit('final')
    .count({ name: 'hop-final' })
    .toStream()
    .map((w, n) => [JSON.stringify([w.key, w.start]), n] as const)
    .to(`${ns}-hop`, { key: s });
  g.aggregate(
    (): Stats => ({ n: 0, sum: 0 }),
    (_k, o, a) => ({ n: a.n + 1, sum: a.sum + (o?.amount ?? 0) }),
    { name: 'stats', value: stats },
  )
    .toStream()
    .to(`${ns}-stats`, { key: s, value: stats });
  g.windowedBy(SessionWindows.ofInactivityGapAndGrace(2 * MIN, 10 * SEC))
    .count({ name: 'visits' })
    .toStream()
    .map((w, n) => [JSON.stringify([w.key, w.start, w.end]), n] as const)
    .to(`${ns}-visits`, { key: s });
  return t.build();
}

const CASE: Case = {
  name: 'one store of each kind',
  build: everyStoreKind,
  outputs: (ns) => [`${ns}-hop`, `${ns}-stats`, `${ns}-visits`],
  input: {
    keys: 5,
    records: 300,
    partitions: PARTITIONS,
    startMs: START_MS,
    spanMs: 20 * MIN,
    outOfOrderFraction: 0.15,
    lateFraction: 0.05,
    nullKeyFraction: 0.03,
    disorderMs: 15 * SEC,
    lateByMs: 2 * MIN,
  },
};

describe('a topology under the documented least-privilege ACL', { timeout: 180_000 }, () => {
  let server: RedisServer;
  let user: Redis;
  before(async () => {
    server = await startRedisServer();
    const admin = new Redis(server.port, '127.0.0.1');
    await admin.call('ACL', 'SETUSER', 'rf-doc', 'on', '>doc-password', ...docAclRules());
    const without = docAclRules().filter((r) => r !== '+zrangebyscore');
    await admin.call('ACL', 'SETUSER', 'rf-short', 'on', '>short-password', ...without);
    admin.disconnect();
    user = new Redis({
      port: server.port,
      host: '127.0.0.1',
      username: 'rf-doc',
      password: 'doc-password',
      maxRetriesPerRequest: 1,
    });
  });
  after(async () => {
    user?.disconnect();
    await server?.stop();
  });

  it('runs exactly-once and equals the model; every store reads back as that user', async () => {
    const ns = uniqueName('tacl');
    const { built, model, records, produce, cleanup } = await prepare(CASE, ns, 31);
    try {
      await produce(0, records);
      const p = processor(built, user, 'exactly-once');
      await p.start();
      try {
        await waitCommitted(p.groupId, `${ns}-orders`, 120_000);
      } finally {
        await p.close();
      }
      assert.equal(p.counts().records, records, 'every input record committed once');
      await assertOutputsEqualModel(CASE, ns, model);
      const state = new TopologyState(built, { redis: user });
      const key = model.outputs.find((o) => o.topic === `${ns}-stats` && o.key !== null)?.key?.toString();
      assert.ok(key !== undefined, 'the model aggregated some key');
      const got = await state.keyValueStore<string, Stats>('stats').get(key);
      assert.ok(got.value !== null && got.value.n > 0, 'the aggregate reads back');
      assert.ok(got.stamp !== null);
      await state.windowStore<string, number>('hop-final').fetch(key, START_MS, START_MS + 30 * MIN);
      await state.sessionStore<string, number>('visits').fetch(key);
    } finally {
      await cleanup();
    }
  });

  it('a user missing a command: the processor closes with RF_REDIS_AUTH naming it', async () => {
    const ns = uniqueName('tacl-short');
    const { built, produce, cleanup } = await prepare(CASE, ns, 32);
    const short = new Redis({
      port: server.port,
      host: '127.0.0.1',
      username: 'rf-short',
      password: 'short-password',
      maxRetriesPerRequest: 1,
    });
    try {
      await produce(0, 40);
      const fatals: Error[] = [];
      const errors: string[] = [];
      const p = new TopologyProcessor({
        topology: built,
        redis: short,
        kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000 },
        onFatal: (err) => fatals.push(err),
        logger: { debug() {}, info() {}, warn() {}, error: (_o: object, m?: string) => errors.push(m ?? '') },
      });
      await p.start();
      try {
        await pollUntil('the processor closed on its own', () => fatals.length > 0, 60_000);
      } finally {
        await p.close();
      }
      assert.equal((fatals[0] as { code?: unknown }).code, 'RF_REDIS_AUTH');
      assert.match(String(fatals[0]?.message), /NOPERM.*zrangebyscore.*Least-privilege ACL/);
      assert.ok(errors.some((m) => m.startsWith('fatal Redis error: closing the topology processor')));
      assert.doesNotMatch(String(fatals[0]?.message), /short-password/);
    } finally {
      short.disconnect();
      await cleanup();
    }
  });
});
