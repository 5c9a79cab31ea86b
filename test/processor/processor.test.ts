/**
 * The processor end to end on the real broker and Redis: both modes' happy paths with exact results,
 * every dead-letter case, scale-out and scale-in with exact results, and graceful shutdown committing
 * what it processed.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { readDeadLetterHeaders } from '../../src/dead-letter/read-headers.js';
import {
  defineProcessor,
  type ProcessingMode,
  Processor,
  type ProcessorDefinition,
  partitionFor,
  RedfenceMetrics,
} from '../../src/index.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import {
  committedOffsets,
  createTopics,
  endOffsets,
  type Msg,
  pollUntil,
  produce,
  readToEnd,
} from '../helpers/kafka.js';
import { assertPerKey, countOf, countsUpTo } from '../helpers/outputs.js';

const PARTITIONS = 4;

interface Order {
  customer: string;
  amount: number;
}

function orders(
  n: number,
  customers: number,
): { messages: Msg[]; perCustomer: Map<string, { total: number; count: number }> } {
  const perCustomer = new Map<string, { total: number; count: number }>();
  const messages: Msg[] = [];
  for (let i = 0; i < n; i++) {
    const customer = `c-${(i * 7) % customers}`;
    const amount = 1 + ((i * 131) % 997);
    const t = perCustomer.get(customer) ?? { total: 0, count: 0 };
    perCustomer.set(customer, { total: t.total + amount, count: t.count + 1 });
    messages.push({ key: customer, value: JSON.stringify({ customer, amount }) });
  }
  return { messages, perCustomer };
}

/** A key that hashes to another partition than `partition`. */
function keyNotOn(partition: number): string {
  for (let i = 0; ; i++) if (partitionFor(`poison-${i}`, PARTITIONS) !== partition) return `poison-${i}`;
}

function totalsDefinition(ns: string) {
  return defineProcessor<Order, { total: number; count: number }>({
    input: `${ns}-orders`,
    output: `${ns}-totals`,
    store: ns.replace(/-/g, '_'),
    reduce: (s, o) => ({ state: { total: (s?.total ?? 0) + o.amount, count: (s?.count ?? 0) + 1 } }),
  });
}

async function setup(ns: string) {
  return createTopics([
    { topic: `${ns}-orders`, partitions: PARTITIONS },
    { topic: `${ns}-totals`, partitions: PARTITIONS },
    { topic: `${ns}-orders.DLT`, partitions: 1 },
  ]);
}

function start<S>(
  ns: string,
  redis: Redis,
  mode: ProcessingMode,
  definition?: ProcessorDefinition<Order, S>,
  metrics?: RedfenceMetrics,
): Processor<Order> {
  return new Processor<Order>({
    definition: (definition ?? totalsDefinition(ns)) as unknown as ProcessorDefinition<Order>,
    redis,
    mode,
    ...(metrics === undefined ? {} : { metrics }),
    groupId: `${ns}-group`,
    kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 100 },
  });
}

async function verifyTotals(
  ns: string,
  redis: Redis,
  expected: Map<string, { total: number; count: number }>,
) {
  const probe = start(ns, redis, 'at-least-once');
  for (const [customer, want] of expected) {
    const s = await probe.fence.read(customer);
    assert.deepEqual(JSON.parse(s?.value?.toString() ?? 'null'), want, `state of ${customer}`);
  }
}

/** customer -> 1..n, the counts its running totals go through. */
function countsOf(perCustomer: Map<string, { count: number }>): Map<string, number[]> {
  return countsUpTo(new Map([...perCustomer].map(([c, t]) => [c, t.count])));
}

describe('processor', { timeout: 300_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  for (const mode of ['exactly-once', 'at-least-once'] as const) {
    it(`${mode}: exact totals, one output per order, every poison record dead-lettered with its reason`, async () => {
      const ns = uniqueName(mode === 'exactly-once' ? 'eos' : 'alo');
      const cleanup = await setup(ns);
      try {
        const { messages: plain, perCustomer } = orders(400, 15);
        // event times from the past: outputs must carry their input's timestamp, not the produce time
        const T0 = 1_600_000_000_000;
        const messages = plain.map((m, i) => ({ ...m, timestamp: String(T0 + i) }));
        const timesOf = new Map<string, string[]>();
        for (const m of messages)
          timesOf.set(m.key ?? '', [...(timesOf.get(m.key ?? '') ?? []), m.timestamp]);
        const wrong = keyNotOn(0);
        const poison: Msg[] = [
          { key: 'c-1', value: 'not json{' }, // undecodable
          { key: wrong, value: JSON.stringify({ customer: wrong, amount: 5 }), partition: 0 }, // wrong partition
          { key: null, value: JSON.stringify({ customer: 'x', amount: 5 }) }, // null key
        ];
        await produce(`${ns}-orders`, [...messages.slice(0, 200), ...poison, ...messages.slice(200)]);
        const metrics = new RedfenceMetrics();
        const p = start(ns, redis, mode, undefined, metrics);
        await p.start();
        try {
          await pollUntil(
            'all records processed',
            () => p.counts().records >= messages.length + poison.length,
          );
        } finally {
          await p.close();
        }
        // owner-local state (the default): customers seen in an earlier batch were not read again
        const cache = await metrics.metricsText();
        const reads = (result: string) =>
          Number(
            new RegExp(`redfence_owner_cache_reads_total\\{[^}]*result="${result}"[^}]*\\} (\\d+)`).exec(
              cache,
            )?.[1] ?? 0,
          );
        assert.ok(reads('hit') > 0 && reads('miss') >= 15, `hits ${reads('hit')}, misses ${reads('miss')}`);
        const outputs = await readToEnd(`${ns}-totals`);
        // each customer's outputs count 1..n exactly once (read_committed), no other key
        assertPerKey('one output per valid order', outputs, countOf, countsOf(perCustomer));
        for (const o of outputs) {
          const count = countOf(o);
          assert.equal(o.timestamp, timesOf.get(o.key ?? '')?.[count - 1], `timestamp of ${o.key} #${count}`);
        }
        await verifyTotals(ns, redis, perCustomer);
        const dlq = await readToEnd(`${ns}-orders.DLT`);
        const reasons = dlq.map((d) => readDeadLetterHeaders(d.headers).reason).sort();
        assert.deepEqual(reasons, ['null-key', 'undecodable', 'wrong-partition']);
        const h = readDeadLetterHeaders(
          dlq.find((d) => readDeadLetterHeaders(d.headers).reason === 'wrong-partition')?.headers ?? {},
        );
        assert.equal(h.originalTopic, `${ns}-orders`);
        assert.equal(h.originalPartition, 0);
        assert.equal(h.consumerGroup, `${ns}-group`);
        assert.equal(p.counts().deadLetters, 3);
        // graceful close committed everything it processed
        const committed = await committedOffsets(`${ns}-group`, `${ns}-orders`);
        const ends = await endOffsets(`${ns}-orders`);
        for (const [partition, end] of ends)
          assert.equal(committed.get(partition), end, `partition ${partition} committed to its end`);
      } finally {
        await cleanup();
      }
    });
  }

  it('a record whose function throws a non-retryable error is dead-lettered; the partition goes on', async () => {
    const ns = uniqueName('throw');
    const cleanup = await setup(ns);
    try {
      const definition = defineProcessor<Order, number>({
        input: `${ns}-orders`,
        output: `${ns}-totals`,
        store: ns.replace(/-/g, '_'),
        operation: (o) => {
          if (o.amount === 13) throw new RangeError('unlucky amount');
          return { op: 'add', by: o.amount };
        },
      });
      await produce(`${ns}-orders`, [
        { key: 'k', value: JSON.stringify({ customer: 'k', amount: 1 }) },
        { key: 'k', value: JSON.stringify({ customer: 'k', amount: 13 }) },
        { key: 'k', value: JSON.stringify({ customer: 'k', amount: 2 }) },
      ]);
      const p = start(ns, redis, 'at-least-once', definition);
      await p.start();
      try {
        await pollUntil('3 records', () => p.counts().records >= 3);
      } finally {
        await p.close();
      }
      assert.equal((await p.fence.read('k'))?.value?.toString(), '3');
      const dlq = await readToEnd(`${ns}-orders.DLT`);
      assert.equal(dlq.length, 1, 'one dead letter');
      const h = readDeadLetterHeaders(dlq[0]?.headers ?? {});
      assert.equal(h.reason, 'processing-error');
      assert.equal(h.exceptionMessage, 'unlucky amount');
      assert.equal(h.exceptionFqcn, 'redfence.RangeError');
    } finally {
      await cleanup();
    }
  });

  it('scales 1 -> 3 -> 1 instances mid-stream with exact results (exactly-once)', async () => {
    const ns = uniqueName('scale');
    const cleanup = await setup(ns);
    try {
      const { messages, perCustomer } = orders(3000, 40);
      await produce(`${ns}-orders`, messages.slice(0, 1000));
      const a = start(ns, redis, 'exactly-once');
      await a.start();
      await pollUntil('first instance made progress', () => a.counts().records > 0);
      const b = start(ns, redis, 'exactly-once');
      const c = start(ns, redis, 'exactly-once');
      await Promise.all([b.start(), c.start()]);
      await pollUntil(
        'the new instances own partitions',
        () => b.assignment.length > 0 && c.assignment.length > 0,
      );
      await produce(`${ns}-orders`, messages.slice(1000, 2000));
      await pollUntil(
        'the new instances take partitions and process',
        () => b.counts().records > 0 && c.counts().records > 0,
      );
      await Promise.all([b.close(), c.close()]);
      await produce(`${ns}-orders`, messages.slice(2000));
      const ends = await endOffsets(`${ns}-orders`);
      await pollUntil(
        'the first instance committed the rest',
        async () => {
          const now = await committedOffsets(`${ns}-group`, `${ns}-orders`);
          return [...ends].every(([partition, end]) => now.get(partition) === end);
        },
        120_000,
      );
      await a.close();
      const outputs = await readToEnd(`${ns}-totals`);
      assertPerKey('exactly one committed output per order', outputs, countOf, countsOf(perCustomer));
      await verifyTotals(ns, redis, perCustomer);
    } finally {
      await cleanup();
    }
  });
});
