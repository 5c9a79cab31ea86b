/**
 * A reducer's throw across a crash, exactly-once, on the real broker and Redis (fixtures/reducer-throws.ts:
 * totals whose reducer refuses a negative amount). A refused order is a dead letter; the fence keeps it
 * (docs/guarantees.md, "A reducer that throws"), so a replay of its batch re-emits it even when a later
 * order of the same customer moved the customer's fence past it in that batch. Instance A
 * (REDFENCE_CRASH_AT=after-redis-write, REDFENCE_CRASH_AFTER=3, one Kafka step per batch of at most 20
 * records) SIGKILLs itself with its 3rd batch applied in Redis and not produced; every 20 offsets of each
 * partition hold a refused order followed by a later order of its customer (asserted on the input), so
 * the crashed batch holds one. Instance B finishes. Then: B re-emitted (REEMIT > 0); the dead-letter topic
 * (read_committed) holds each refused order once, reason processing-error, class RangeError; each
 * customer's total in Redis is the sum of its accepted orders and the totals topic has one output per
 * accepted order, in order.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { readDeadLetterHeaders } from '../../src/dead-letter/read-headers.js';
import { Fence } from '../../src/index.js';
import { partitionFor } from '../../src/partitioner/index.js';
import { freePort, ProcessorChild, takesOverToTheEnd } from '../helpers/child.js';
import { KAFKA_BROKERS, REDIS_URL, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, endOffsets, produce, readToEnd } from '../helpers/kafka.js';

const PARTITIONS = 2;
const BATCH = 20;
const FIXTURE = 'test/processor/fixtures/reducer-throws.ts';
const CUSTOMERS = ['c1', 'c2', 'c3', 'c4'];

interface Order {
  key: string;
  partition: number;
  offset: number;
  amount: number;
}

/** Per partition, its customers in turn: every 5th order of a customer refused (negative). */
function orders(): Order[] {
  const out: Order[] = [];
  const next = new Map<number, number>();
  const seen = new Map<string, number>();
  for (let i = 0; i < 240; i++) {
    const key = CUSTOMERS[i % CUSTOMERS.length] as string;
    const n = (seen.get(key) ?? 0) + 1;
    seen.set(key, n);
    const partition = partitionFor(key, PARTITIONS);
    const offset = next.get(partition) ?? 0;
    next.set(partition, offset + 1);
    out.push({ key, partition, offset, amount: n % 5 === 2 ? -n : n });
  }
  return out;
}

async function start(ns: string, instance: string, crash: Record<string, string>): Promise<ProcessorChild> {
  const port = await freePort();
  const args = [
    ...['--import', 'tsx', 'src/cli/bin.ts', 'run', FIXTURE],
    ...['--brokers', KAFKA_BROKERS, '--redis', REDIS_URL, '--mode', 'exactly-once', '--group', ns],
    ...['--instance', instance, '--metrics-port', String(port), '--session-timeout', '6000'],
    ...['--log', 'info'],
  ];
  return new ProcessorChild(instance, port, args, {
    ...process.env,
    ORDERS_TOPIC: `${ns}-orders`,
    TOTALS_TOPIC: `${ns}-totals`,
    TOTALS_STORE: ns,
    REDFENCE_CRASH_AT: '',
    REDFENCE_CRASH_AFTER: '',
    REDFENCE_GROUP_COMMIT_RECORDS: '0',
    REDFENCE_MAX_BATCH_SIZE: String(BATCH),
    ...crash,
  });
}

describe('a reducer that throws, across a crash (exactly-once)', { timeout: 180_000 }, () => {
  const redis = new Redis(REDIS_URL);
  after(() => redis.disconnect());

  it('SIGKILL after-redis-write: each refused order is one dead letter; the totals are the accepted orders once', async (t) => {
    const ns = uniqueName('rthrow');
    const topic = `${ns}-orders`;
    const dlt = `${topic}.DLT`;
    t.after(
      await createTopics([
        { topic, partitions: PARTITIONS },
        { topic: `${ns}-totals`, partitions: PARTITIONS },
        { topic: dlt, partitions: 1 },
      ]),
    );
    const children: ProcessorChild[] = [];
    t.after(async () => {
      await Promise.all(children.map((c) => c.kill()));
      const keys = await redis.keys(`rf:{${ns}:*`);
      if (keys.length > 0) await redis.del(...keys);
    });
    const input = orders();
    const refused = input.filter((o) => o.amount < 0);
    // every BATCH offsets of each partition: a refused order with a later order of its customer after it
    for (let p = 0; p < PARTITIONS; p++) {
      const own = input.filter((o) => o.partition === p);
      for (let from = 0; from + BATCH <= own.length; from += BATCH) {
        const window = own.slice(from, from + BATCH);
        assert.ok(
          window.some((o, j) => o.amount < 0 && window.slice(j + 1).some((l) => l.key === o.key)),
          `partition ${p}, offsets ${from}..: a refused order before a later one of its customer`,
        );
      }
    }
    await produce(
      topic,
      input.map((o) => ({ key: o.key, value: JSON.stringify({ amount: o.amount }), partition: o.partition })),
    );
    const ends = await endOffsets(topic);

    const a = await start(ns, 'A', { REDFENCE_CRASH_AT: 'after-redis-write', REDFENCE_CRASH_AFTER: '3' });
    children.push(a);
    assert.deepEqual(
      await a.waitExit(60_000),
      { code: null, signal: 'SIGKILL' },
      `A died by SIGKILL ${a.tail()}`,
    );
    const byA = await committedOffsets(ns, topic).catch(() => new Map<number, number>());
    assert.ok(
      [...ends].some(([p, end]) => (byA.get(p) ?? 0) < end),
      'A died with records left to process',
    );

    const b = await start(ns, 'B', {});
    children.push(b);
    const v = await takesOverToTheEnd(b, ns, topic, ends);
    assert.ok((v.get('REEMIT') ?? 0) > 0, `B re-emitted A's applied, uncommitted batch (${v.get('REEMIT')})`);

    const dead = await readToEnd(dlt);
    const got = dead.map((d) => {
      const h = readDeadLetterHeaders(d.headers);
      assert.equal(h.reason, 'processing-error');
      assert.equal(h.exceptionMessage, 'a negative amount is refused');
      return `${h.originalPartition}/${h.originalOffset}`;
    });
    assert.deepEqual(
      [...got].sort(),
      refused.map((o) => `${o.partition}/${o.offset}`).sort(),
      'each refused order once',
    );
    const fence = new Fence({ redis, store: ns, mode: 'strict' });
    const totals = await readToEnd(`${ns}-totals`);
    for (const key of CUSTOMERS) {
      const accepted = input.filter((o) => o.key === key && o.amount >= 0);
      const want = { total: accepted.reduce((s, o) => s + o.amount, 0), count: accepted.length };
      const stored = await fence.read(key);
      assert.deepEqual(JSON.parse(stored?.value?.toString() ?? 'null'), want, `the total of ${key}`);
      assert.deepEqual(
        totals
          .filter((r) => r.key === key)
          .map((r) => (JSON.parse(r.value ?? 'null') as { count: number }).count),
        accepted.map((_, i) => i + 1),
        `one output per accepted order of ${key}, in order`,
      );
    }
    const past = refused.filter((o) => o.offset >= (byA.get(o.partition) ?? 0)).length;
    console.log(
      `A committed ${JSON.stringify([...byA])}; B REEMIT ${v.get('REEMIT')}; ${dead.length} dead letters, ${past} past A's commits`,
    );
  });
});
