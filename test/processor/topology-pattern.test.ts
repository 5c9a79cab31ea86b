/**
 * A topology source reading a pattern, on the real broker and Redis (exactly-once): the pattern is
 * resolved at start to the topics it matches as a whole (`<ns>-orders-eu2`, with records, is not one of
 * them: the model's rule), their records go through a stateless part (their amounts) and a
 * `repartition()` into a count per customer. A topic made while the processor runs is not read (its
 * group never commits it) until the next start, which also leaves out the repartition topic the first
 * start made (the pattern matches its name). Each key lives in one input topic (its records have one
 * order in the model and the runtime). What the output topics hold (read_committed) must equal the
 * reference model's outputs per topic and key, every input and repartition record committed once.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { RedfenceError } from '../../src/errors/index.js';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import { MemoryKafka } from '../../src/testing/index.js';
import { type BuiltTopology, serdes, topology } from '../../src/topology/index.js';
import { runModel } from '../../src/topology/model.js';
import { TopologyState } from '../../src/topology/state/state.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, produce, waitCommitted } from '../helpers/kafka.js';

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

describe('topology processor: a source reading a pattern', { timeout: 300_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  it('reads the topics it matched at start, a newer one after a restart; outputs equal the model per key', async () => {
    const ns = uniqueName('tppat');
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
      // the model reads all three (ca's records after the others': each key is in one topic)
      const ordered = [...records.filter((r) => r.topic !== ca), ...records.filter((r) => r.topic === ca)];
      const model = runModel(built, ordered, {
        partitions: Object.fromEntries(topics.map((t) => [t, PARTITIONS])),
      });
      assert.ok(model.outputs.filter((o) => o.topic === `${ns}-counts`).length > 100, 'counts are emitted');
      await produceTopic(eu, records);
      await produceTopic(us, records);
      await produce(partial, [{ key: 'k0', value: '{"amount":1}', partition: 0 }]);

      const resolved: unknown[] = [];
      const start = () =>
        new TopologyProcessor({
          topology: built,
          redis,
          mode: 'exactly-once',
          createTopics: true,
          repartitionPurgeIntervalMs: 60 * MIN,
          kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 40 },
          logger: {
            debug: () => undefined,
            info: (fields, msg) => {
              if (msg?.startsWith('topology source pattern resolved')) resolved.push(fields);
            },
            warn: () => undefined,
            error: () => undefined,
          },
        });
      const first = start();
      await first.start();
      try {
        assert.equal(first.deadLetterTopic, `${ns}.DLT`, "a pattern's dead letters: <applicationId>.DLT");
        await allCommitted(first.groupId, [eu, us], repartition);
        // made while it runs: not read by it (its group never commits it), as the first start resolved
        dropCa = await createTopics([{ topic: ca, partitions: PARTITIONS, config: keep }]);
        await produceTopic(ca, records);
      } finally {
        await first.close();
      }
      assert.equal(
        (await committedOffsets(first.groupId, ca)).size,
        0,
        'the running processor never read ca',
      );
      assert.equal((await committedOffsets(first.groupId, partial)).size, 0, 'nor the partial match');

      const second = start();
      await second.start();
      try {
        await allCommitted(second.groupId, topics, repartition);
      } finally {
        await second.close();
      }
      assert.deepEqual(resolved, [
        { node: 'orders', pattern: `/${ns}-orders-[a-z-]+/`, topics: [eu, us] },
        // the repartition topic (made by the first start) matches too, and is left out
        { node: 'orders', pattern: `/${ns}-orders-[a-z-]+/`, topics: [ca, eu, us] },
      ]);
      assert.equal(
        first.counts().records + second.counts().records,
        2 * records.length,
        'every input and repartition record committed once',
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
