/**
 * Faults on the real broker and Redis, with exact results:
 * - a zombie owner: instance A is frozen (SIGSTOP) mid-batch past its session timeout, B takes its
 *   partitions (raising their epochs) and processes, then A wakes with stale work in hand -- the strict
 *   fence (the partition epoch is checked on every key) answers FENCE, A drops the batch, and nothing of
 *   A's stale work reaches the state, the outputs or the committed offsets; A then rejoins, and must
 *   consume the partitions it is given again (the ones it was FENCEd on included);
 * - Redis down ~10 s mid-run (a dedicated AOF redis-server, restarted on the same dir): consumption
 *   pauses, committed offsets stay put, then it resumes;
 * - graceful shutdown (SIGTERM with a batch in flight): exit 0 in time, the commit covers exactly what
 *   was processed, and a second instance finishes exactly.
 * Processors run as `redfence run examples/customer-totals.ts` children (test/helpers/child.ts), except
 * the Redis outage one, which runs in-process to watch its logs and counters.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, it } from 'node:test';
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { Redis } from 'ioredis';
import { RedisServer, TcpProxy } from '../../src/harness/index.js';
import { defineProcessor, Fence, Processor } from '../../src/index.js';
import { freePort, killLeftovers, LogBook, type LogLine, startProcessorChild } from '../helpers/child.js';
import { KAFKA_BROKERS, REDIS_URL, standalone, uniqueName } from '../helpers/env.js';
import {
  committedOffsets,
  createTopics,
  endOffsets,
  kafka,
  type Msg,
  pollUntil,
  readToEnd,
} from '../helpers/kafka.js';
import { assertPerKey, countOf, countsUpTo } from '../helpers/outputs.js';

const PARTITIONS = 4;
const CUSTOMERS = 40;
const quiet = { logLevel: KafkaJS.logLevel.NOTHING };
/** Progress notes (timings) in the test output. */
const log = (s: string) => console.log(s);
const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Totals {
  total: number;
  count: number;
}

/**
 * The input: orders numbered from 0, keyed by customer. Remembers every customer's amounts in order
 * (a customer's orders all land on one partition, so that is also their offset order).
 */
class Orders {
  readonly amounts = new Map<string, number[]>();
  n = 0;

  next(k: number): Msg[] {
    const out: Msg[] = [];
    for (let j = 0; j < k; j++, this.n++) {
      const customer = `c-${(this.n * 7) % CUSTOMERS}`;
      const amount = 1 + ((this.n * 131) % 997);
      const list = this.amounts.get(customer) ?? [];
      if (list.length === 0) this.amounts.set(customer, list);
      list.push(amount);
      out.push({ key: customer, value: JSON.stringify({ customer, amount }) });
    }
    return out;
  }

  /** A customer's totals after all its orders. */
  total(customer: string): Totals {
    return this.prefix(customer, this.amounts.get(customer)?.length ?? 0);
  }

  /** A customer's totals after its first `count` orders. */
  prefix(customer: string, count: number): Totals {
    const list = this.amounts.get(customer) ?? [];
    let total = 0;
    for (let i = 0; i < count; i++) total += list[i] ?? Number.NaN;
    return { total, count };
  }
}

/** One namespace: topics (orders, totals, orders.DLT), group and store. */
function names(prefix: string) {
  const ns = uniqueName(prefix);
  return {
    ns,
    orders: `${ns}-orders`,
    totals: `${ns}-totals`,
    store: ns.replace(/-/g, '_'),
    group: `${ns}-group`,
  };
}
type Names = ReturnType<typeof names>;

async function setup(n: Names): Promise<() => Promise<void>> {
  return createTopics([
    { topic: n.orders, partitions: PARTITIONS },
    { topic: n.totals, partitions: PARTITIONS },
    { topic: `${n.orders}.DLT`, partitions: 1 },
  ]);
}

/** A producer that sends the next orders in chunks, one chunk at a time, until stopped. */
class Feeder {
  readonly #producer = kafka.producer({
    partitioner: 'murmur2_random',
    'enable.idempotence': true,
    'linger.ms': 5,
    kafkaJS: quiet,
  } as KafkaJS.ProducerConstructorConfig);
  readonly #topic: string;
  readonly #orders: Orders;
  #loop: Promise<void> | undefined;
  #running = false;
  #connected = false;

  constructor(topic: string, orders: Orders) {
    this.#topic = topic;
    this.#orders = orders;
  }

  async send(k: number): Promise<void> {
    if (!this.#connected) {
      await this.#producer.connect();
      this.#connected = true;
    }
    await this.#producer.send({ topic: this.#topic, messages: this.#orders.next(k) });
  }

  /** Sends `chunk` orders every `everyMs` (pacing only: nothing waits on it) until stop(). */
  start(chunk: number, everyMs: number): void {
    this.#running = true;
    this.#loop = (async () => {
      while (this.#running) {
        await this.send(chunk);
        await wait(everyMs);
      }
    })();
    this.#loop.catch(() => undefined); // stop() rethrows a failed send
  }

  /** Stops the loop after the chunk in flight; every order counted in `Orders` has been acknowledged. */
  async stop(): Promise<void> {
    this.#running = false;
    await this.#loop;
    this.#loop = undefined;
  }

  async close(): Promise<void> {
    await this.stop().catch(() => undefined);
    if (this.#connected) await this.#producer.disconnect();
  }
}

/**
 * Polls a group's committed offsets (one admin connection) in the background and records every
 * partition whose committed offset ever went backwards.
 */
class OffsetWatch {
  readonly #admin = kafka.admin({ kafkaJS: quiet } as KafkaJS.AdminConstructorConfig);
  readonly #group: string;
  readonly #topic: string;
  readonly last = new Map<number, number>();
  readonly backwards: string[] = [];
  #timer: NodeJS.Timeout | undefined;
  #busy: Promise<void> | undefined;
  #stopped = false;

  constructor(group: string, topic: string) {
    this.#group = group;
    this.#topic = topic;
  }

  async start(everyMs = 250): Promise<void> {
    await this.#admin.connect();
    const tick = () => {
      if (this.#stopped) return;
      this.#busy = this.sample()
        .then(
          () => undefined,
          () => undefined,
        )
        .finally(() => {
          if (!this.#stopped) this.#timer = setTimeout(tick, everyMs);
        });
    };
    tick();
  }

  async sample(): Promise<Map<number, number>> {
    const rows = await this.#admin.fetchOffsets({ groupId: this.#group, topics: [this.#topic] });
    const now = new Map((rows[0]?.partitions ?? []).map((p) => [p.partition, Number(p.offset)]));
    for (const [p, o] of now) {
      const before = this.last.get(p) ?? -1;
      if (o < before) this.backwards.push(`partition ${p}: ${before} -> ${o}`);
      if (o >= 0) this.last.set(p, Math.max(before, o));
    }
    return now;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#busy;
    await this.#admin.disconnect().catch(() => undefined);
  }
}

function sum(m: Map<number, number>): number {
  let s = 0;
  for (const v of m.values()) s += Math.max(0, v);
  return s;
}

/** True when every partition's committed offset equals its end offset. */
async function caughtUp(n: Names): Promise<boolean> {
  const [committed, ends] = await Promise.all([committedOffsets(n.group, n.orders), endOffsets(n.orders)]);
  for (const [p, end] of ends) if ((committed.get(p) ?? -1) !== end) return false;
  return true;
}

/** Every customer's stored totals equal `want(customer)` (null: nothing stored). */
async function assertState(
  redis: Redis,
  n: Names,
  orders: Orders,
  want: (customer: string) => Totals | null,
): Promise<void> {
  const fence = new Fence({ redis, store: n.store, mode: 'strict' });
  for (const customer of orders.amounts.keys()) {
    const s = await fence.read(customer);
    const got = s?.value == null ? null : (JSON.parse(s.value.toString('utf8')) as Totals);
    assert.deepEqual(got, want(customer), `stored totals of ${customer}`);
  }
}

/**
 * Outputs (read_committed, to the end offsets) against the input: every output is the customer's exact
 * totals after some prefix of its orders; per customer, `exact`: counts 1..n once each (n: all its
 * orders, or `upTo`), else each at least once; no other key. Returns how many outputs there are.
 */
async function assertOutputs(n: Names, orders: Orders, exact: boolean, upTo?: Map<string, number>) {
  const want = new Map(
    [...orders.amounts.keys()].map((c) => [c, upTo?.get(c) ?? orders.amounts.get(c)?.length ?? 0]),
  );
  const outputs = await readToEnd(n.totals);
  for (const o of outputs) {
    const v = JSON.parse(o.value ?? 'null') as Totals;
    const c = o.key ?? '';
    assert.deepEqual(v, orders.prefix(c, v.count), `output of ${c} at ${o.partition}/${o.offset}`);
  }
  assertPerKey(
    exact ? 'exactly one committed output per order' : 'at least one output per order',
    outputs,
    countOf,
    // a customer with nothing committed yet has no outputs
    countsUpTo(new Map([...want].filter(([, k]) => k > 0))),
    exact ? {} : { duplicates: 'allowed' },
  );
  return outputs.length;
}

/** Deletes a store's keys (state, epochs, pending indexes) from a Redis. */
async function dropStore(redis: Redis, store: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `rf:{${store}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
}

/** The definition examples/customer-totals.ts exports, on this test's topics and store (in-process). */
function totalsDefinition(n: Names) {
  return defineProcessor<{ customer: string; amount: number }, Totals>({
    input: n.orders,
    output: n.totals,
    store: n.store,
    reduce: (state, order) => ({
      state: { total: (state?.total ?? 0) + order.amount, count: (state?.count ?? 0) + 1 },
    }),
  });
}

/** How many of each customer's orders lie below the committed offset of their partition. */
async function committedPerCustomer(n: Names, total: number, committed: Map<number, number>) {
  const input = await readToEnd(n.orders);
  assert.equal(input.length, total, 'every order read back from the input topic');
  const below = new Map<string, number>();
  for (const r of input) {
    const c = r.key ?? '';
    if (!below.has(c)) below.set(c, 0);
    if (Number(r.offset) < (committed.get(r.partition) ?? 0)) below.set(c, (below.get(c) ?? 0) + 1);
  }
  return below;
}

/** Where the shared standalone Redis listens. */
function redisTarget(): { host: string; port: number } {
  const url = new URL(REDIS_URL);
  return { host: url.hostname || '127.0.0.1', port: Number(url.port || 6379) };
}

/** Polls until the group has no members left (a frozen member's session expired). */
async function waitGroupEmpty(group: string, timeoutMs: number): Promise<void> {
  const admin = kafka.admin({ kafkaJS: quiet } as KafkaJS.AdminConstructorConfig);
  await admin.connect();
  try {
    await pollUntil(
      `group ${group} has no members`,
      async () => {
        const d = await admin.describeGroups([group]);
        return (d.groups[0]?.members.length ?? 0) === 0;
      },
      timeoutMs,
    );
  } finally {
    await admin.disconnect();
  }
}

describe('faults', { timeout: 240_000 }, () => {
  afterEach(() => killLeftovers());

  for (const mode of ['exactly-once', 'at-least-once'] as const) {
    it(`${mode}: an owner frozen mid-batch past its session wakes up FENCEd; state, outputs and offsets stay exact`, async () => {
      const n = names(mode === 'exactly-once' ? 'zombie-eos' : 'zombie-alo');
      const cleanup = await setup(n);
      const redis = standalone();
      const orders = new Orders();
      const feeder = new Feeder(n.orders, orders);
      const watch = new OffsetWatch(n.group, n.orders);
      const gate = new TcpProxy(redisTarget());
      const t0 = Date.now();
      const at = () => `${((Date.now() - t0) / 1000).toFixed(1)}s`;
      const isFence = (l: LogLine) => /^FENCE: a newer owner holds this partition/.test(l.msg ?? '');
      try {
        await feeder.send(2000);
        await watch.start();
        // A reaches Redis through the gate; B directly
        const a = await startProcessorChild({
          ...n,
          mode,
          instance: 'A',
          redisUrl: `redis://127.0.0.1:${await gate.listen()}`,
          // every batch reads its keys (owner-local state would skip the read the gate holds)
          ownerCacheBytes: 0,
        });
        assert.deepEqual((await a.log.waitAssigned()).sort(), [0, 1, 2, 3], 'A owns every partition');
        feeder.start(100, 20); // keeps A busy
        await pollUntil('A committed some input', async () => sum(await watch.sample()) >= 1500, 60_000);

        // Freeze A in the middle of a batch: its state read (HGETALL) is sent, the answer not yet back.
        gate.holdFrom(/hgetall/i);
        await pollUntil('A is mid-batch, waiting on Redis', () => gate.heldBytes > 0, 10_000);
        // The previous batch's produce + commit may still be in flight (it overlaps this batch's Redis
        // step); the next one cannot start while Redis is held. Freeze once it has landed: committed
        // offsets unchanged over three samples.
        let still = 0;
        let seen = '';
        await pollUntil(
          "A's last commit landed",
          async () => {
            const now = JSON.stringify([...(await watch.sample())].sort());
            still = now === seen ? still + 1 : 0;
            seen = now;
            return still >= 2;
          },
          20_000,
        );
        a.stop();
        await feeder.stop();
        const frozen = sum(await watch.sample());
        log(`[${at()}] A frozen mid-batch; committed ${frozen} of ${orders.n}`);

        // A's session (6 s) expires; B joins, takes every partition (raising their epochs) and processes
        await waitGroupEmpty(n.group, 30_000);
        const b = await startProcessorChild({ ...n, mode, instance: 'B' });
        assert.deepEqual((await b.log.waitAssigned()).sort(), [0, 1, 2, 3], 'B owns every partition');
        await feeder.send(1000);
        await pollUntil('B processed all input', () => caughtUp(n), 60_000);
        log(`[${at()}] B caught up at ${orders.n}`);

        // A wakes with its batch in flight (and more fetched): it gets its read back, then applies with its
        // old epoch -- the strict fence answers FENCE on every key, and A drops the batch (no output, no
        // commit). Without the gate, A usually learns it lost its partitions before touching Redis again
        // (no FENCE, which is fine too); the gate pins the freeze point so the FENCE path is what is tested.
        const aFrom = a.log.lines.length;
        gate.release();
        a.cont();
        const fence = await a.log.waitFor('the FENCE warning', isFence, 30_000, aFrom);
        assert.equal(typeof fence.partition, 'number');
        log(`[${at()}] A: ${fence.msg} (partition ${fence.partition}, epoch ${fence.epoch})`);
        await a.log.waitFor(
          'A losing its partitions',
          (l) => l.msg === 'partitions revoked' && l.lost === true,
          30_000,
          aFrom,
        );
        // A's stale work changed nothing: the state is still the fold of every order, offsets still at the end
        await assertState(redis, n, orders, (c) => orders.total(c));
        assert.ok(await caughtUp(n), "committed offsets still at the end after A's stale batches");

        // A learns it lost its partitions, rejoins and shares them with B; both process what comes next.
        // Then B leaves and A owns every partition, the ones it was FENCEd on included. A partition A was
        // FENCEd on must be consumed again once A is given it anew: a pause left over from the FENCE
        // would stall it (caughtUp fails, naming the stuck partitions).
        const stalled = (what: string) => async (err: Error) => {
          const committed = await committedOffsets(n.group, n.orders);
          const stuck = [...(await endOffsets(n.orders))]
            .filter(([q, end]) => (committed.get(q) ?? -1) !== end)
            .map(([q, end]) => `${q} (committed ${committed.get(q)}, end ${end})`);
          const fencedOn = a.log.find(isFence, aFrom).map((l) => l.partition);
          const given = a.log.find((l) => l.msg === 'partitions assigned', aFrom).map((l) => l.partitions);
          throw new Error(
            `${what}: ${err.message}; stuck partitions: ${stuck.join(', ')}; A was FENCEd on ` +
              `${JSON.stringify(fencedOn)}, then assigned ${JSON.stringify(given)} ${a.tail(12)} ${b.tail(8)}`,
          );
        };
        await a.log.waitAssigned(60_000, aFrom);
        await feeder.send(1000);
        await pollUntil('all input processed', () => caughtUp(n), 30_000).catch(stalled('A and B'));
        log(`[${at()}] A and B caught up at ${orders.n}`);
        const bGone = a.log.lines.length;
        b.term();
        assert.equal((await b.waitExit(20_000)).code, 0, `B's exit ${b.tail()}`);
        await a.log.waitFor(
          'A owning every partition',
          (l) => l.msg === 'partitions assigned' && (l.partitions as number[]).length > 0,
          30_000,
          bGone,
        );
        await feeder.send(1000);
        await pollUntil('all input processed', () => caughtUp(n), 30_000).catch(stalled('A alone'));
        log(`[${at()}] A alone caught up at ${orders.n}`);
        a.term();
        assert.equal((await a.waitExit(20_000)).code, 0, `A's exit ${a.tail()}`);
        assert.ok(await caughtUp(n), 'committed offsets equal the end offsets after both exit');
        await watch.stop();
        assert.deepEqual(watch.backwards, [], 'committed offsets never moved backwards');

        await assertState(redis, n, orders, (c) => orders.total(c));
        const outputs = await assertOutputs(n, orders, mode === 'exactly-once');
        log(
          `[${at()}] ${orders.n} orders, ${outputs} outputs; A logged ${a.log.find(isFence).length} FENCE warnings`,
        );
      } finally {
        await watch.stop().catch(() => undefined);
        await feeder.close().catch(() => undefined);
        await killLeftovers();
        await gate.close();
        await dropStore(redis, n.store).catch(() => undefined);
        redis.disconnect();
        await cleanup();
      }
    });
  }

  it('exactly-once: Redis down ~10 s mid-run: consumption pauses, offsets stay put, then it resumes and finishes exactly', async () => {
    const n = names('outage');
    const cleanup = await setup(n);
    const dir = await mkdtemp(join(tmpdir(), 'redfence-outage-'));
    const server = new RedisServer({ port: await freePort(), dir, persistent: true });
    const orders = new Orders();
    const feeder = new Feeder(n.orders, orders);
    const watch = new OffsetWatch(n.group, n.orders);
    const book = new LogBook('P');
    const t0 = Date.now();
    const at = () => `${((Date.now() - t0) / 1000).toFixed(1)}s`;
    let redis: Redis | undefined;
    let p: Processor | undefined;
    try {
      await server.start();
      redis = new Redis(server.url, { maxRetriesPerRequest: 1, enableAutoPipelining: true });
      let redisErrors = 0;
      redis.on('error', () => redisErrors++); // reconnect attempts while it is down
      p = new Processor({
        definition: totalsDefinition(n) as never,
        redis,
        mode: 'exactly-once',
        groupId: n.group,
        instanceId: 'P',
        logger: book.logger(),
        kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 100 },
      });
      const proc = p;
      await feeder.send(500);
      await watch.start();
      await proc.start();
      assert.deepEqual((await book.waitAssigned()).sort(), [0, 1, 2, 3]);
      feeder.start(50, 50); // input keeps coming through the outage
      await pollUntil('some input processed', () => proc.counts().records >= 1000, 60_000);

      await server.shutdown();
      const downAt = Date.now();
      log(`[${at()}] Redis shut down after ${proc.counts().records} records`);
      await book.waitFor('the outage warning', (l) => /^Redis unavailable: paused/.test(l.msg ?? ''), 15_000);
      // The Kafka steps of batches applied before the outage still finish (their Redis writes are
      // done); from then on nothing commits: the batch that found Redis down is stuck before its commit.
      const applied = () => Object.values(proc.counts().verdicts).reduce((a, b) => a + (b ?? 0), 0);
      await pollUntil(
        'the Kafka steps of the batches applied before the outage',
        () => proc.counts().records === applied(),
        15_000,
      );
      const before = await committedOffsets(n.group, n.orders);
      const recordsBefore = proc.counts().records;
      await wait(4000); // part of the outage itself
      const after = await committedOffsets(n.group, n.orders);
      assert.deepEqual(
        [...after].sort(),
        [...before].sort(),
        'committed offsets do not move while Redis is down',
      );
      assert.equal(proc.counts().records, recordsBefore, 'no batch completes while Redis is down');
      assert.ok((await endOffsets(n.orders)).size === PARTITIONS);
      await wait(Math.max(0, 10_000 - (Date.now() - downAt))); // the rest of the ~10 s outage

      const from = book.lines.length;
      await server.start(); // same dir: the AOF brings back state, fences and epochs
      log(`[${at()}] Redis restarted after ${((Date.now() - downAt) / 1000).toFixed(1)} s`);
      await book.waitFor('the resume', (l) => l.msg === 'Redis is back: resumed', 30_000, from);
      log(`[${at()}] resumed`);
      assert.equal(proc.assignment.length, PARTITIONS, 'it kept its partitions through the outage');
      await pollUntil('processing goes on', () => proc.counts().records > recordsBefore, 30_000);
      await feeder.stop();
      await feeder.send(500);
      await pollUntil('all input processed', () => caughtUp(n), 60_000);
      log(`[${at()}] caught up at ${orders.n}`);
      await proc.close();
      await watch.stop();
      assert.deepEqual(watch.backwards, [], 'committed offsets never moved backwards');
      assert.ok(await caughtUp(n), 'committed offsets equal the end offsets');
      assert.equal(
        book.find((l) => /^Redis unavailable/.test(l.msg ?? '')).length,
        1,
        'one outage, reported once',
      );
      await assertState(redis, n, orders, (c) => orders.total(c));
      const outputs = await assertOutputs(n, orders, true);
      log(
        `[${at()}] ${orders.n} orders, ${outputs} outputs, verdicts ${JSON.stringify(proc.counts().verdicts)}`,
      );
    } finally {
      await p?.close().catch(() => undefined);
      await watch.stop().catch(() => undefined);
      await feeder.close().catch(() => undefined);
      redis?.disconnect();
      await server.stop();
      await rm(dir, { recursive: true, force: true });
      await cleanup();
    }
  });

  it('exactly-once: SIGTERM mid-stream exits 0 in time having committed exactly what it processed; a second instance finishes exactly', async () => {
    const n = names('sigterm');
    const cleanup = await setup(n);
    const redis = standalone();
    const orders = new Orders();
    const feeder = new Feeder(n.orders, orders);
    const t0 = Date.now();
    const at = () => `${((Date.now() - t0) / 1000).toFixed(1)}s`;
    const deadline = 10_000;
    const gate = new TcpProxy(redisTarget());
    try {
      await feeder.send(5000);
      const a = await startProcessorChild({
        ...n,
        mode: 'exactly-once',
        instance: 'A',
        shutdownTimeoutMs: deadline,
        redisUrl: `redis://127.0.0.1:${await gate.listen()}`,
        // every batch reads its keys (owner-local state would skip the read the gate holds)
        ownerCacheBytes: 0,
      });
      assert.deepEqual((await a.log.waitAssigned()).sort(), [0, 1, 2, 3]);
      feeder.start(100, 20);
      await pollUntil(
        'A is mid-stream',
        async () => sum(await committedOffsets(n.group, n.orders)) >= 2000,
        60_000,
      );
      // the signal comes with a batch in flight: its state read sent, the answer held back until A has
      // begun shutting down -- A must finish that batch (apply, produce, commit) before it exits
      gate.holdFrom(/hgetall/i);
      await pollUntil('A is mid-batch, waiting on Redis', () => gate.heldBytes > 0, 10_000);
      const inFlight = await committedOffsets(n.group, n.orders);
      const termAt = Date.now();
      a.term();
      await a.log.waitFor('shutting down', (l) => l.msg === 'shutting down', 10_000);
      gate.release();
      const exit = await a.waitExit(deadline + 5000);
      const took = Date.now() - termAt;
      await feeder.stop();
      log(`[${at()}] A exited ${JSON.stringify(exit)} ${took} ms after SIGTERM`);
      assert.deepEqual(exit, { code: 0, signal: null }, `A exits 0 ${a.tail()}`);
      assert.ok(took < deadline, `A exits within the ${deadline} ms deadline (took ${took} ms)`);
      assert.equal(a.log.find((l) => l.msg === 'processor closed').length, 1, 'A closed the processor');

      // what A committed is exactly what it processed: state and outputs are the fold of the orders
      // below the committed offsets, nothing more, nothing less
      const committed = await committedOffsets(n.group, n.orders);
      const ends = await endOffsets(n.orders);
      assert.ok(sum(committed) < sum(ends), 'stopped mid-stream');
      assert.ok(sum(committed) > sum(inFlight), 'the batch in flight at the signal was committed');
      const below = await committedPerCustomer(n, orders.n, committed);
      await assertState(redis, n, orders, (c) => {
        const k = below.get(c) ?? 0;
        return k === 0 ? null : orders.prefix(c, k);
      });
      await assertOutputs(n, orders, true, below);
      log(`[${at()}] A committed ${sum(committed)} of ${orders.n}: state and outputs match exactly`);

      const b = await startProcessorChild({ ...n, mode: 'exactly-once', instance: 'B' });
      assert.deepEqual((await b.log.waitAssigned()).sort(), [0, 1, 2, 3]);
      await pollUntil('B processed the rest', () => caughtUp(n), 60_000);
      b.term();
      assert.deepEqual(await b.waitExit(deadline + 5000), { code: 0, signal: null }, `B exits 0 ${b.tail()}`);
      await assertState(redis, n, orders, (c) => orders.total(c));
      const outputs = await assertOutputs(n, orders, true);
      log(`[${at()}] ${orders.n} orders, ${outputs} outputs`);
    } finally {
      await feeder.close().catch(() => undefined);
      await killLeftovers();
      await gate.close();
      await dropStore(redis, n.store).catch(() => undefined);
      redis.disconnect();
      await cleanup();
    }
  });
});
