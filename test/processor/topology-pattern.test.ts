/**
 * A topology source reading a pattern, on the real broker and Redis (exactly-once): the pattern is
 * resolved at start to the topics it matches as a whole (`<ns>-orders-eu2`, with records, is not one of
 * them: the model's rule), their records go through a stateless part (their amounts) and a
 * `repartition()` into a count per customer. A topic made while the processor runs is read by it with
 * no restart (its pattern refresh: the group left and joined again with the new topic), the
 * repartition topic its start made left out (the pattern matches its name); the old topics get records
 * before, during and after the switch. Each key lives in one input topic (its records have one order
 * in the model and the runtime). What the output topics hold (read_committed) must equal the reference
 * model's outputs per topic and key, every input and repartition record committed once; the same under
 * KIP-848's protocol with static membership. Under the classic protocol a static member cannot switch
 * (the port has no resubscribe): the new topic is warned of. A new match the plan refuses while it runs
 * is fatal with the start's error, and nothing switched.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { RedfenceError } from '../../src/errors/index.js';
import { resolveTopologyOptions } from '../../src/processor/topology/options.js';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import { MemoryKafka } from '../../src/testing/index.js';
import { type BuiltTopology, serdes, topology } from '../../src/topology/index.js';
import { runModel } from '../../src/topology/model.js';
import { TopologyState } from '../../src/topology/state/state.js';
import { runCli } from '../helpers/cli.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, pollUntil, produce, waitCommitted } from '../helpers/kafka.js';

import { assertOutputsPerKey, overTopics, produceTopic, waitReadPast } from './topology-helpers.js';

const s = serdes.string();
const MIN = 60_000;
const PARTITIONS = 3;

/** `ns` as a pattern matching it literally. */
const literal = (ns: string) => ns.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Orders of every region topic: their amounts, and a count per customer across regions. */
function regions(ns: string): BuiltTopology {
  const escaped = literal(ns);
  const t = topology({ applicationId: ns });
  const orders = t.stream<string, { amount: number }>(new RegExp(`${escaped}-orders-[a-z-]+`), {
    key: s,
    name: 'orders',
  });
  orders.mapValues((o) => o?.amount ?? null).to(`${ns}-amounts`, { key: s });
  orders
    .repartition({ name: 'orders-all', key: s })
    .groupByKey()
    .count({ name: 'per-customer' })
    .toStream()
    .to(`${ns}-counts`, { key: s });
  return t.build();
}

/** Every input committed to its end, the repartition topic past its last records. */
async function allCommitted(groupId: string, inputs: readonly string[], repartition: string): Promise<void> {
  for (const topic of inputs) await waitCommitted(groupId, topic, 120_000);
  await waitReadPast(groupId, repartition);
}

describe('patternRefreshMs: checked before any connection', () => {
  it('refuses values out of bounds naming the option; redfence run --pattern-refresh too, and for a processor module', async () => {
    const redis = { config: () => undefined } as never;
    const base = { topology: regions('pr'), redis, kafka: { brokers: ['127.0.0.1:1'] } };
    assert.equal(resolveTopologyOptions(base).patternRefreshMs, 60_000);
    assert.equal(resolveTopologyOptions({ ...base, patternRefreshMs: 100 }).patternRefreshMs, 100);
    for (const bad of [0, 99, 1.5, '500', 86_400_001, -1])
      assert.throws(
        () => new TopologyProcessor({ ...base, patternRefreshMs: bad as never }),
        (e: unknown) =>
          RedfenceError.is(e, 'RF_INVALID_OPTIONS') &&
          /"patternRefreshMs" must be an integer/.test(String(e)),
      );
    const at = ['--brokers', '127.0.0.1:1', '--redis', 'redis://127.0.0.1:1'];
    const low = await runCli([
      'run',
      'test/processor/fixtures/idle-close.ts',
      '--pattern-refresh',
      '50',
      ...at,
    ]);
    assert.equal(low.code, 2, low.err);
    assert.match(low.err, /--pattern-refresh/);
    const processor = await runCli(['run', 'examples/customer-totals.ts', '--pattern-refresh', '500', ...at]);
    assert.equal(processor.code, 2, processor.err);
    assert.match(
      processor.err,
      /--pattern-refresh applies to topologies, and the module exports a processor/,
    );
  });
});

/** A pattern topology runs; a matching topic made while it runs is read with no restart (kafka: its settings). */
async function liveTopic(
  redis: Redis,
  kafka: { groupProtocol?: 'consumer'; groupInstanceId?: string },
): Promise<void> {
  const ns = uniqueName(kafka.groupProtocol === undefined ? 'tppat' : 'tppat848');
  const [eu, us, ca] = [`${ns}-orders-eu`, `${ns}-orders-us`, `${ns}-orders-ca`];
  const partial = `${ns}-orders-eu2`; // the pattern matches a part of its name only
  const outputs = [`${ns}-amounts`, `${ns}-counts`];
  const repartition = `${ns}-orders-all-repartition`;
  const keep = { 'retention.ms': '-1' };
  const cleanup = await createTopics([
    ...[eu, us, partial, ...outputs].map((topic) => ({ topic, partitions: PARTITIONS, config: keep })),
    { topic: `${ns}.DLT`, partitions: 1, config: keep },
  ]);
  let dropCa: () => Promise<void> = async () => undefined;
  try {
    const built = regions(ns);
    // key k<i> lives in topic i % 3 (eu, us, ca), in the partition the generator gave it
    const topics = [eu, us, ca];
    const records = overTopics(77, 360, topics);
    for (const topic of topics)
      assert.ok(records.filter((r) => r.topic === topic).length > 50, `${topic} gets records`);
    // each key is in one topic: the model's order across topics does not change any key's outputs
    const model = runModel(built, records, {
      partitions: Object.fromEntries(topics.map((t) => [t, PARTITIONS])),
    });
    assert.ok(model.outputs.filter((o) => o.topic === `${ns}-counts`).length > 100, 'counts are emitted');
    const half = records.length / 2;
    const [before, during] = [records.slice(0, half), records.slice(half)];
    await produceTopic(eu, before);
    await produceTopic(us, before);
    await produce(partial, [{ key: 'k0', value: '{"amount":1}', partition: 0 }]);

    const resolved: unknown[] = [];
    let [found, switchMs, assignedMs] = [0, 0, 0];
    const p = new TopologyProcessor({
      topology: built,
      redis,
      mode: 'exactly-once',
      createTopics: true,
      repartitionPurgeIntervalMs: 60 * MIN,
      patternRefreshMs: 500,
      kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 40, ...kafka },
      logger: {
        debug: () => undefined,
        info: (fields, msg) => {
          if (msg === 'topology source pattern resolved') {
            resolved.push(fields);
            if (found > 0) switchMs = Date.now() - found;
          }
          if (msg?.startsWith('a pattern matches new topics')) found = Date.now();
          if (msg === 'partitions assigned' && found > 0 && assignedMs === 0) assignedMs = Date.now() - found;
        },
        warn: () => undefined,
        error: () => undefined,
      },
    });
    await p.start();
    try {
      assert.equal(p.deadLetterTopic, `${ns}.DLT`, "a pattern's dead letters: <applicationId>.DLT");
      await waitCommitted(p.groupId, eu, 120_000);
      // made while it runs; the old topics get records in small steps while it switches
      dropCa = await createTopics([{ topic: ca, partitions: PARTITIONS, config: keep }]);
      await produceTopic(ca, records);
      const step = async (i: number) => {
        await produceTopic(eu, during.slice(i, i + 20));
        await produceTopic(us, during.slice(i, i + 20));
      };
      // the old topics' records keep coming while it switches (up to two thirds of them), the rest after
      let i = 0;
      for (; resolved.length < 2 && i < (2 * during.length) / 3; i += 20) await step(i);
      await pollUntil('the pattern resolved with ca', () => resolved.length === 2, 60_000);
      const atSwitch = Math.min(i, during.length);
      for (; i < during.length; i += 20) await step(i);
      assert.equal(p.state, 'running', 'never restarted');
      console.log(
        `switch: ${switchMs} ms from the look that found ca to its resolution (revoked, left), ${assignedMs} ms to the next assignment; ${atSwitch} of ${during.length} later records of eu and us produced by then`,
      );
      await allCommitted(p.groupId, topics, repartition);
    } finally {
      await p.close();
    }
    assert.deepEqual(resolved, [
      { node: 'orders', pattern: `/${ns}-orders-[a-z-]+/`, topics: [eu, us] },
      // the repartition topic (made at start) matches too, and is left out
      { node: 'orders', pattern: `/${ns}-orders-[a-z-]+/`, topics: [ca, eu, us], added: [ca] },
    ]);
    assert.equal((await committedOffsets(p.groupId, partial)).size, 0, 'never the partial match');
    assert.equal(p.counts().patternSwitches, 1, 'one switch');
    assert.equal(
      p.counts().records,
      2 * records.length,
      'every input and repartition record committed once, across the switch',
    );
    await assertOutputsPerKey(outputs, model);
    // queryable state over a pattern's topology: each key's count is its last output
    const state = new TopologyState(built, { redis });
    assert.deepEqual(
      state.stores.map((x) => [x.name, x.topic, x.space]),
      [['per-customer', repartition, null]],
    );
    const last = new Map(
      model.outputs
        .filter((o) => o.topic === `${ns}-counts`)
        .map((o) => [o.key?.toString() ?? null, Number(o.value?.toString())]),
    );
    assert.equal(last.size, 9, 'every key counted');
    for (const [key, n] of last)
      assert.equal(
        (await state.keyValueStore<string, number>('per-customer').get(key as string)).value,
        n,
        key ?? '',
      );
  } finally {
    await dropCa();
    await cleanup();
  }
}

describe('topology processor: a source reading a pattern', { timeout: 300_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  it('reads the topics it matched at start and a newer one made while it runs, with no restart; outputs equal the model per key', () =>
    liveTopic(redis, {}));

  it("the same with KIP-848's protocol and static membership: the member joining again is assigned the new topic", () =>
    liveTopic(redis, { groupProtocol: 'consumer', groupInstanceId: uniqueName('tppat-static') }));

  it('static membership under the classic protocol: the new topic warned of, nothing switched (the port cannot resubscribe)', async () => {
    const ns = uniqueName('tppatst');
    const [eu, ca] = [`${ns}-orders-eu`, `${ns}-orders-ca`];
    const cleanup = await createTopics(
      [eu, `${ns}-amounts`, `${ns}-counts`, `${ns}.DLT`].map((topic) => ({ topic, partitions: 1 })),
    );
    let dropCa: () => Promise<void> = async () => undefined;
    const warned: unknown[] = [];
    const p = new TopologyProcessor({
      topology: regions(ns),
      redis,
      createTopics: true,
      patternRefreshMs: 200,
      kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, groupInstanceId: `${ns}-static` },
      logger: {
        debug: () => undefined,
        info: () => undefined,
        warn: (fields, msg) => {
          if (msg?.startsWith('topics made since the start match a pattern source')) warned.push(fields);
        },
        error: () => undefined,
      },
    });
    try {
      await p.start();
      dropCa = await createTopics([{ topic: ca, partitions: 1 }]);
      await pollUntil('the new topic warned of', () => warned.length > 0, 30_000);
      assert.deepEqual(warned, [{ node: 'orders', pattern: `/${ns}-orders-[a-z-]+/`, topics: [ca] }]);
      assert.equal(p.counts().patternSwitches, 0);
      assert.equal(p.state, 'running');
    } finally {
      await p.close();
      await dropCa();
      await cleanup();
    }
  });

  it('a new match the plan refuses while it runs: fatal with the start refusal, the old plan never switched', async () => {
    const ns = uniqueName('tppatrun');
    const t = topology({ applicationId: ns });
    t.stream<string, number>(new RegExp(`${literal(ns)}-sales-.*`), { key: s, name: 'sales' })
      .groupByKey()
      .count({ name: 'n' })
      .toStream()
      .to(`${ns}-sold`);
    const built = t.build();
    const agg = built.nodes.find((n) => n.kind === 'aggregate')?.name as string;
    const kafka = new MemoryKafka({ topics: { [`${ns}-sales-us`]: 1, [`${ns}-sold`]: 1, [`${ns}.DLT`]: 1 } });
    const port = kafka.port({ groupId: ns });
    let fatal: Error | undefined;
    const p = new TopologyProcessor({
      topology: built,
      redis,
      kafka: port,
      patternRefreshMs: 100,
      onFatal: (err) => {
        fatal = err;
      },
    });
    await p.start(); // one topic into the count: it plans
    kafka.produce([{ topic: `${ns}-sales-us`, key: 'a', value: '1' }]);
    await pollUntil('the record counted', () => p.counts().records === 1, 30_000);
    kafka.createTopic(`${ns}-sales-eu`, 1);
    await pollUntil('the processor failed', () => fatal !== undefined, 30_000);
    assert.ok(
      RedfenceError.is(fatal, 'RF_TOPOLOGY_UNSUPPORTED') &&
        (fatal.details as { node: string }).node === agg &&
        fatal.message.includes(`the pattern /${ns}-sales-.*/ of sales matched 2 topics`),
      String(fatal),
    );
    await p.close();
    assert.equal(port.calls.resubscribe, 0, 'never left the group to switch');
    assert.equal(p.counts().patternSwitches, 0);
    assert.equal(p.state, 'closed');
  });

  it('no topic matched, or several into a count: start() refuses naming the node, before anything is consumed', async () => {
    const ns = uniqueName('tppatno');
    // only the application's own topics match the pattern
    const kafka = new MemoryKafka({
      topics: {
        [`${ns}-amounts`]: 1,
        [`${ns}-counts`]: 1,
        [`${ns}-orders-all-repartition`]: 1,
        [`${ns}-orders-x.DLT`]: 1,
      },
    });
    const port = kafka.port({ groupId: ns });
    const p = new TopologyProcessor({ topology: regions(ns), redis, kafka: port });
    await assert.rejects(
      p.start(),
      (err: unknown) =>
        RedfenceError.is(err, 'RF_TOPIC_PATTERN_UNMATCHED') &&
        (err.details as { node: string }).node === 'orders' &&
        err.message.includes(`its pattern /${ns}-orders-[a-z-]+/ matches no topic`) &&
        err.message.includes('create a topic it matches'),
    );
    await p.close();
    assert.deepEqual([port.calls.listTopics, port.calls.start], [1, 0], 'listed, never joined the group');

    const app = `${ns}-agg`;
    const t = topology({ applicationId: app });
    t.stream<string, number>(new RegExp(`${literal(ns)}-sales-.*`), { key: s, name: 'sales' })
      .groupByKey()
      .count({ name: 'n' })
      .toStream()
      .to(`${ns}-sold`);
    const built = t.build();
    const agg = built.nodes.find((n) => n.kind === 'aggregate')?.name as string;
    kafka.createTopic(`${ns}-sales-us`, 1);
    kafka.createTopic(`${ns}-sales-eu`, 1);
    const port2 = kafka.port({ groupId: app });
    const q = new TopologyProcessor({ topology: built, redis, kafka: port2 }); // one stand-in topic: it plans
    await assert.rejects(
      q.start(),
      (err: unknown) =>
        RedfenceError.is(err, 'RF_TOPOLOGY_UNSUPPORTED') &&
        (err.details as { node: string }).node === agg &&
        err.message.includes(`the pattern /${ns}-sales-.*/ of sales matched 2 topics`) &&
        err.message.includes('put repartition() between'),
    );
    await q.close();
    assert.equal(port2.calls.start, 0, 'never joined the group');
  });
});
