/**
 * A batch that keeps failing backs off its partition (src/processor/batch-backoff.ts), real broker and
 * Redis: one customer's fence hash is replaced by a string while an exactly-once processor runs, so
 * every batch holding that customer fails in the fence script (WRONGTYPE: a script error, not an outage,
 * so nothing retries it inside the batch). Each failure pauses that partition for a delay that grows
 * with its failures in a row, instead of delivering the batch again at once, as often as the loop can
 * turn; the other partition goes on to its end meanwhile. Once the hash is restored the partition
 * resumes and the run ends exact: every customer's totals once each, in order, and its state. The
 * same for a topology processor (an unwindowed count whose key's fence hash is replaced): its failures
 * back off, and its counts end exact.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { kafkaPartition } from '../../src/chaos/murmur2.js';
import { RedisServer } from '../../src/harness/index.js';
import {
  defineProcessor,
  Fence,
  Processor,
  RedfenceError,
  serdes,
  TopologyProcessor,
  topology,
} from '../../src/index.js';
import { BACKOFF_BASE_MS } from '../../src/processor/batch-backoff.js';
import { LogBook } from '../helpers/child.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import {
  committedOffsets,
  createTopics,
  endOffsets,
  pollUntil,
  produce,
  readToEnd,
  waitCommitted,
} from '../helpers/kafka.js';
import { assertPerKey, customerOrders } from '../helpers/outputs.js';

const PARTITIONS = 2;
const CUSTOMERS = 20;

interface Totals {
  total: number;
  count: number;
}

describe('a batch that keeps failing', { timeout: 180_000 }, () => {
  const server = new RedisServer();
  before(() => server.start());
  after(() => server.stop());

  it('a key of another Redis type is RF_REDIS_KEY_TYPE (final), from a command and from a script, not an outage', async () => {
    const redis = new Redis(server.url);
    try {
      const fence = new Fence({ redis, store: uniqueName('keytype').replace(/-/g, '_'), mode: 'strict' });
      const epoch = await fence.acquireEpoch('orders', 0);
      await fence.apply({
        topic: 'orders',
        partition: 0,
        epoch,
        committedOffset: -1,
        key: 'k',
        records: [{ offset: 0, operation: { op: 'add', by: 1 }, output: 'state' }],
      });
      const key = (await redis.keys('rf:{*:k}'))[0] as string;
      await redis.set(key, 'not a hash');
      const read = await fence.read('k').then(
        () => assert.fail('read a string as a fence hash'),
        (e: unknown) => e,
      );
      const applied = await fence
        .apply({
          topic: 'orders',
          partition: 0,
          epoch,
          committedOffset: -1,
          key: 'k',
          records: [{ offset: 1, operation: { op: 'add', by: 1 }, output: 'state' }],
        })
        .then(
          () => assert.fail('applied onto a string'),
          (e: unknown) => e,
        );
      for (const e of [read, applied]) {
        assert.ok(RedfenceError.is(e, 'RF_REDIS_KEY_TYPE'), String(e));
        assert.equal(RedfenceError.isRetriable(e), false);
        assert.doesNotMatch(String((e as Error).message), /\bk\b.*\}/, 'the key is not named');
      }
    } finally {
      redis.disconnect();
    }
  });

  it('backs off its partition, failure after failure, and the run ends exact once the cause is gone', async () => {
    const ns = uniqueName('backoff');
    const n = { orders: `${ns}-orders`, totals: `${ns}-totals`, store: ns.replace(/-/g, '_') };
    const drop = await createTopics([
      { topic: n.orders, partitions: PARTITIONS },
      { topic: n.totals, partitions: PARTITIONS },
      { topic: `${n.orders}.DLT`, partitions: 1 },
    ]);
    const redis = new Redis(server.url);
    const admin = new Redis(server.url);
    const book = new LogBook('P');
    const first = customerOrders(200, CUSTOMERS);
    const p = new Processor({
      definition: defineProcessor<{ customer: string; amount: number }, Totals>({
        input: n.orders,
        output: n.totals,
        store: n.store,
        reduce: (state, order) => ({
          state: { total: (state?.total ?? 0) + order.amount, count: (state?.count ?? 0) + 1 },
        }),
      }) as never,
      redis,
      mode: 'exactly-once',
      groupId: `${ns}-group`,
      logger: book.logger(),
      kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 20 },
    });
    try {
      await produce(n.orders, first.messages);
      await p.start();
      await waitCommitted(`${ns}-group`, n.orders);

      // the bad key: customer c-3's fence hash becomes a string (kept aside to be put back)
      const bad = 'c-3';
      const badPartition = kafkaPartition(bad, PARTITIONS);
      const key = `rf:{${n.store}:${bad}}`;
      assert.equal(await admin.type(key), 'hash', `${key} is the customer's fence hash`);
      const saved = await admin.dumpBuffer(key);
      await admin.set(key, 'not a hash');
      const mark = book.count;
      const all = customerOrders(400, CUSTOMERS);
      await produce(n.orders, all.messages.slice(200));
      const failed = (f: number) =>
        book.find((l) => l.msg?.startsWith('batch failed') === true && l.failures === f, mark);
      await pollUntil('a partition failing 4 times in a row', () => failed(4).length > 0, 60_000);
      // the fault: the bad customer's partition failed, on the wrong type
      assert.equal(failed(1)[0]?.partition, badPartition);
      assert.equal(failed(1)[0]?.code, 'RF_REDIS_KEY_TYPE');
      // each failure waits longer (full jitter: the 1st waits 50-100 ms, the 4th 400-800 ms)
      const delays = [1, 2, 3, 4].map((f) => Number(failed(f)[0]?.retryInMs));
      assert.ok(delays[0] !== undefined && delays[0] <= BACKOFF_BASE_MS, `first delay ${delays[0]}`);
      assert.ok((delays[3] ?? 0) >= 4 * BACKOFF_BASE_MS, `4th delay ${delays[3]} (${delays.join(', ')})`);
      assert.equal(p.state, 'running');
      // the other partition went on to its end meanwhile
      const ends = await endOffsets(n.orders);
      await pollUntil(
        'the other partition committed to its end',
        async () => {
          const at = await committedOffsets(`${ns}-group`, n.orders);
          return at.get(1 - badPartition) === ends.get(1 - badPartition);
        },
        60_000,
      );
      assert.ok(
        book
          .find((l) => l.msg?.startsWith('batch failed') === true, mark)
          .every((l) => l.partition === badPartition),
        'only the bad partition failed',
      );

      await admin.restore(key, 0, saved, 'REPLACE');
      await waitCommitted(`${ns}-group`, n.orders, 90_000);
      const outputs = await readToEnd(n.totals);
      // every customer's running totals once each, in order
      const expected = new Map(
        [...all.amounts].map(([c, amounts]) => {
          let total = 0;
          return [c, amounts.map((a) => (total += a))] as const;
        }),
      );
      assertPerKey('totals', outputs, (r) => (JSON.parse(r.value ?? '{}') as Totals).total, expected, {
        ordered: true,
      });
      const fence = new Fence({ redis, store: n.store, mode: 'strict' });
      for (const [c, amounts] of all.amounts) {
        const s = await fence.read(c);
        const got = s?.value == null ? null : (JSON.parse(s.value.toString('utf8')) as Totals);
        assert.deepEqual(got, { total: amounts.reduce((a, b) => a + b, 0), count: amounts.length }, c);
      }
    } finally {
      await p.close().catch(() => undefined);
      redis.disconnect();
      admin.disconnect();
      await drop();
    }
  });

  it('a topology batch that keeps failing backs off its partition too, and its counts end exact', async () => {
    const ns = uniqueName('backoff-topo');
    const input = `${ns}-in`;
    const output = `${ns}-out`;
    const drop = await createTopics([
      { topic: input, partitions: PARTITIONS },
      { topic: output, partitions: PARTITIONS },
      { topic: `${input}.DLT`, partitions: 1 },
    ]);
    const t = topology({ applicationId: ns });
    t.stream<string, string>(input, { key: serdes.string(), value: serdes.string() })
      .groupByKey()
      .count()
      .toStream()
      .to(output, { key: serdes.string() });
    const redis = new Redis(server.url);
    const admin = new Redis(server.url);
    const book = new LogBook('T');
    const keys = Array.from({ length: CUSTOMERS }, (_, i) => `k${i}`);
    const batchOf = (n: number) =>
      Array.from({ length: n }, (_, i) => ({ key: keys[i % keys.length] as string, value: 'x' }));
    const p = new TopologyProcessor({
      topology: t.build(),
      redis,
      mode: 'exactly-once',
      logger: book.logger(),
      kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 20 },
    });
    try {
      await produce(input, batchOf(100));
      await p.start();
      await waitCommitted(p.groupId, input);
      const bad = 'k3';
      const badPartition = kafkaPartition(bad, PARTITIONS);
      const [key] = (await admin.keys(`rf:{${ns}*`)).filter(
        (k) => k.endsWith(`:${bad}}`) && !k.includes('}:'),
      );
      assert.ok(key !== undefined && (await admin.type(key)) === 'hash', `the fence hash of ${bad}`);
      const saved = await admin.dumpBuffer(key);
      await admin.set(key, 'not a hash');
      const mark = book.count;
      await produce(input, batchOf(100));
      const failed = (f: number) =>
        book.find((l) => l.msg?.startsWith('topology batch failed') === true && l.failures === f, mark);
      await pollUntil('a partition failing 3 times in a row', () => failed(3).length > 0, 60_000);
      assert.equal(failed(1)[0]?.partition, badPartition);
      assert.equal(failed(1)[0]?.code, 'RF_REDIS_KEY_TYPE');
      assert.ok(Number(failed(3)[0]?.retryInMs) >= 2 * BACKOFF_BASE_MS, 'the third delay is longer');
      await admin.restore(key, 0, saved, 'REPLACE');
      await waitCommitted(p.groupId, input, 90_000);
      // 200 records over 20 keys: each key counted 1..10, once each, in order
      const counts = new Map(keys.map((k) => [k, Array.from({ length: 10 }, (_, i) => i + 1)]));
      assertPerKey('counts', await readToEnd(output), (r) => Number(r.value), counts, { ordered: true });
    } finally {
      await p.close().catch(() => undefined);
      redis.disconnect();
      admin.disconnect();
      await drop();
    }
  });
});
