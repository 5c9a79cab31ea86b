/**
 * A source reading a pattern on Redis (src/topology/patterns.ts, src/processor/topology/sources.ts):
 * resolved against the topics MemoryKafka's port lists, as the processor resolves it at start — whole
 * names only (the model's rule), the application's own topics left out, sorted — and then planned as
 * if the source had listed them; a pattern that matches nothing, and one whose topics feed an
 * aggregation, are refused naming the node and the pattern.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { RedfenceError } from '../../src/errors/index.js';
import {
  defaultDeadLetterTopic,
  ExecutorAtStart,
  resolveSources,
} from '../../src/processor/topology/sources.js';
import { MemoryKafka } from '../../src/testing/index.js';
import { type BuiltTopology, serdes, topology } from '../../src/topology/index.js';
import { runModel } from '../../src/topology/model.js';
import { hasPatterns, patternStandIns, readsTopic, resolvePatterns } from '../../src/topology/patterns.js';
import { planTopology } from '../../src/topology/run/plan.js';
import { TopologyState } from '../../src/topology/state/state.js';

const s = serdes.string();

/** Orders of every region: amounts out, and a count per customer after a repartition. */
function regions(): BuiltTopology {
  const t = topology({ applicationId: 'orders' });
  const orders = t.stream<string, { amount: number }>(/orders-\D+/, { key: s, name: 'orders' });
  orders.mapValues((o) => o?.amount ?? null).to('amounts', { key: s });
  orders
    .repartition({ name: 'orders-all', key: s })
    .groupByKey()
    .count({ name: 'per-customer' })
    .toStream()
    .to('counts', { key: s });
  return t.build();
}

/** The cluster's topics as MemoryKafka's port lists them. */
async function listed(topics: readonly string[]): Promise<string[]> {
  const kafka = new MemoryKafka();
  for (const t of topics) kafka.createTopic(t, 1);
  const port = kafka.port({ groupId: 'g' });
  try {
    return await (port.listTopics as () => Promise<string[]>)();
  } finally {
    await port.stop();
  }
}

const silent = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

describe('topology runtime: a source reading a pattern', () => {
  it("resolves to the whole names it matches, sorted, the application's own left out; plans as a list", async () => {
    const built = regions();
    assert.ok(hasPatterns(built));
    const topics = await listed([
      'orders-us',
      'orders-eu',
      'orders-eu2', // a match of a part of the name only
      'old-orders-eu',
      'amounts',
      'orders-orders-all-repartition', // the application's own: its repartition topic,
      'orders-eu.DLT', // a dead-letter topic,
      'orders-dead', // the dead-letter topic it is given
    ]);
    const kafka = new MemoryKafka();
    for (const t of topics) kafka.createTopic(t, 2);
    const port = kafka.port({ groupId: 'g' });
    const logged: { fields: object; msg: string | undefined }[] = [];
    const log = { ...silent, info: (fields: object, msg?: string) => logged.push({ fields, msg }) };
    const { built: resolved, matches } = await resolveSources(port, built, 'orders-dead', log);
    await port.stop();
    assert.equal(port.calls.listTopics, 1, 'one listing');
    assert.deepEqual(matches, [
      { node: 'orders', pattern: '/orders-\\D+/', topics: ['orders-eu', 'orders-us'] },
    ]);
    assert.deepEqual(logged, [
      {
        fields: { node: 'orders', pattern: '/orders-\\D+/', topics: ['orders-eu', 'orders-us'] },
        msg: 'topology source pattern resolved',
      },
    ]);
    assert.ok(!hasPatterns(resolved) && Object.isFrozen(resolved));
    const source = resolved.nodes.find((n) => n.name === 'orders');
    assert.ok(source?.kind === 'source');
    assert.deepEqual(source.topics, ['orders-eu', 'orders-us']);
    assert.equal(
      source.pattern?.source,
      built.nodes[0]?.kind === 'source' ? built.nodes[0].pattern?.source : '',
    );
    assert.deepEqual(resolved.subTopologies[0]?.sourceTopics, ['orders-eu', 'orders-us']);

    const plan = planTopology(resolved);
    assert.deepEqual(plan.inputs, ['orders-eu', 'orders-us']);
    assert.deepEqual([...plan.subs.keys()], ['orders-eu', 'orders-us', 'orders-orders-all-repartition']);
    assert.equal(
      plan.aggregates.get(resolved.nodes.find((n) => n.kind === 'aggregate')?.name ?? '')?.space,
      null,
    );
    assert.equal(
      defaultDeadLetterTopic(planTopology(patternStandIns(built))),
      'orders.DLT',
      'not the first match',
    );

    // the model reads what the resolved plan reads: whole names only, one rule
    const original = built.nodes[0];
    assert.ok(original?.kind === 'source');
    const one = (topic: string) => ({
      topic,
      partition: 0,
      offset: 0,
      key: Buffer.from('c1'),
      value: Buffer.from('{"amount":5}'),
      timestamp: 1,
    });
    for (const t of ['orders-eu', 'orders-us', 'orders-eu2', 'old-orders-eu']) {
      const reads = plan.inputs.includes(t);
      assert.equal(readsTopic(original, t), reads, t);
      if (reads)
        assert.equal(runModel(built, [one(t)]).outputs.filter((o) => o.topic === 'amounts').length, 1);
      else assert.throws(() => runModel(built, [one(t)]), new RegExp(`no source of the topology reads ${t}`));
    }
  });

  it('a pattern matching no topic: RF_TOPIC_PATTERN_UNMATCHED naming the node, the pattern and the fix', async () => {
    const built = regions();
    // only the application's own topics match
    const topics = await listed(['orders-orders-all-repartition', 'orders-eu.DLT', 'orders.DLT', 'refunds']);
    assert.throws(
      () => resolvePatterns(built, topics),
      (err: unknown) =>
        RedfenceError.is(err, 'RF_TOPIC_PATTERN_UNMATCHED') &&
        (err.details as { node: string }).node === 'orders' &&
        (err.details as { pattern: string }).pattern === '/orders-\\D+/' &&
        err.message.startsWith('topology node orders: its pattern /orders-\\D+/ matches no topic') &&
        err.message.includes('create a topic it matches'),
    );
  });

  it('its topics into an aggregation: RF_TOPOLOGY_UNSUPPORTED naming the node, the count of topics and repartition()', () => {
    const t = topology({ applicationId: 'agg' });
    t.stream<string, number>(/sales-.*/, { key: s, name: 'sales' })
      .groupByKey()
      .count({ name: 'n' })
      .toStream()
      .to('out');
    const built = t.build();
    const agg = built.nodes.find((n) => n.kind === 'aggregate')?.name as string;
    // one topic matched: it runs (the count reads one offset order)
    assert.deepEqual(planTopology(resolvePatterns(built, ['sales-eu', 'out']).built).inputs, ['sales-eu']);
    const two = resolvePatterns(built, ['sales-us', 'sales-eu']).built;
    assert.throws(
      () => planTopology(two),
      (err: unknown) =>
        RedfenceError.is(err, 'RF_TOPOLOGY_UNSUPPORTED') &&
        (err.details as { node: string }).node === agg &&
        err.message.includes(
          'several topics (sales-eu, sales-us: the pattern /sales-.*/ of sales matched 2 topics)',
        ) &&
        err.message.includes('put repartition() between'),
    );
    // unresolved: refused when planned, naming the source and the way to resolve it
    assert.throws(
      () => planTopology(built),
      (err: unknown) =>
        RedfenceError.is(err, 'RF_TOPOLOGY_UNSUPPORTED') &&
        (err.details as { node: string }).node === 'sales' &&
        err.message.includes('its pattern /sales-.*/ is not resolved'),
    );
  });

  it('a matched topic read by another source too is RF_TOPOLOGY_INVALID, as Kafka Streams refuses it', () => {
    const t = topology({ applicationId: 'twice' });
    t.stream<string, number>('orders-eu', { key: s, name: 'eu' })
      .merge(t.stream<string, number>(/orders-.*/, { key: s, name: 'all' }))
      .to('out');
    assert.throws(
      () => resolvePatterns(t.build(), ['orders-eu', 'orders-us']),
      (err: unknown) =>
        RedfenceError.is(err, 'RF_TOPOLOGY_INVALID') &&
        err.message.includes('matches topic orders-eu, which source eu reads too'),
    );
  });

  it("queryable state: a pattern stands for its topics unless a store's fence space is its topic; `topics` resolves it", (ctx) => {
    const t = topology({ applicationId: 'st' });
    t.stream<string, number>('payments', { key: s })
      .groupByKey()
      .count({ name: 'paid' })
      .toStream()
      .to('paid');
    t.stream<string, number>(/sales-.*/, { key: s, name: 'sales' })
      .groupByKey()
      .count({ name: 'sold' })
      .toStream()
      .to('sold');
    const built = t.build();
    const redis = new Redis({ lazyConnect: true }); // never connected: nothing is read here
    ctx.after(() => redis.disconnect());
    assert.throws(
      () => new TopologyState(built, { redis }),
      (err: unknown) =>
        RedfenceError.is(err, 'RF_INVALID_OPTIONS') &&
        err.message.includes(
          'store sold keeps its keys in the fence space of the topic its pattern /sales-.*/ matched',
        ),
    );
    const state = new TopologyState(built, { redis, topics: ['payments', 'sales-eu', 'paid', 'sold'] });
    assert.deepEqual(
      state.stores.map((x) => [x.name, x.topic, x.space]),
      [
        ['paid', 'payments', null],
        ['sold', 'sales-eu', 'sales-eu'],
      ],
    );
    // after a repartition the store's space and topic do not depend on what the pattern matched
    assert.deepEqual(
      new TopologyState(regions(), { redis }).stores.map((x) => [x.name, x.topic, x.space]),
      [['per-customer', 'orders-orders-all-repartition', null]],
    );
  });

  it('a topic made after the start: lookAgain makes the new match its executor, swap() runs it and logs it', async (ctx) => {
    const kafka = new MemoryKafka({ topics: { 'orders-eu': 1, 'orders-us': 1 } });
    const port = kafka.port({ groupId: 'g' });
    ctx.after(() => port.stop());
    const resolved: object[] = [];
    const log = { ...silent, info: (fields: object) => resolved.push(fields) };
    const redis = new Redis({ lazyConnect: true }); // never connected: no batch runs here
    ctx.after(() => redis.disconnect());
    const run = new ExecutorAtStart(regions(), { redis });
    assert.throws(
      () => run.executor,
      (err: unknown) => RedfenceError.is(err, 'RF_INVALID_STATE'),
    );
    assert.equal(await run.lookAgain(port), undefined);
    assert.equal(port.calls.listTopics, 0, 'nothing to compare before the start');
    const first = await run.start(port, 'orders.DLT', log);
    assert.deepEqual(first.plan.inputs, ['orders-eu', 'orders-us']);
    assert.equal(await run.lookAgain(port), undefined, 'nothing new');
    kafka.createTopic('orders.DLT', 1); // the application's own: never a match
    assert.equal(await run.lookAgain(port), undefined, 'its own topics never a change');
    kafka.createTopic('orders-ca', 1);
    const next = await run.lookAgain(port);
    assert.ok(next !== undefined);
    assert.deepEqual(next.executor.plan.inputs, ['orders-ca', 'orders-eu', 'orders-us']);
    assert.equal(run.executor, first, 'the running executor stays until swap()');
    run.swap(next, log);
    assert.equal(run.executor, next.executor);
    assert.deepEqual(resolved, [
      { node: 'orders', pattern: '/orders-\\D+/', topics: ['orders-eu', 'orders-us'] },
      {
        node: 'orders',
        pattern: '/orders-\\D+/',
        topics: ['orders-ca', 'orders-eu', 'orders-us'],
        added: ['orders-ca'],
      },
    ]);
    assert.equal(await run.lookAgain(port), undefined, 'the new match is the running one');
  });
});
