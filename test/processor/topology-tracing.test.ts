/**
 * The topology processor's spans on the real broker and Redis, exported to the SDK's in-memory exporter.
 * A fraud topology (big orders re-keyed by customer through a repartition topic, counted per 5-minute
 * window, an alert past 2) runs 10 orders, each with its own `traceparent`, one of them late: each batch
 * of each sub-topology is a `process <topic>` span with the application id, its sub-topology, its dead
 * letters and drops and the records in and out of each node it reached (summed over the batches: what
 * the input itself gives); the input batches link to the orders' contexts, the repartition batches to
 * the input batches (the repartition records carry their context), the alerts and the dead letter carry
 * a repartition batch's; each batch has its Redis step as a child span and the Kafka steps' `send` spans
 * link to the batches. No key or value is in any span. Without the option (the global provider
 * registered all the same) no span is made and no output carries a `traceparent`. The `tracing` option
 * is checked at construction.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import type { Redis } from 'ioredis';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import type { TracingOption } from '../../src/telemetry/options.js';
import { ATTR as A } from '../../src/telemetry/semconv.js';
import { parseTraceparent } from '../../src/telemetry/w3c.js';
import { type BuiltTopology, serdes, TimeWindows, topology } from '../../src/topology/index.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { createTopics, kafka, pollUntil, type ReadRecord, readToEnd } from '../helpers/kafka.js';
import { START_MS } from '../topology/scenarios.js';

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const s = serdes.string();
const SEC = 1000;
const MIN = 60 * SEC;
const hex = (bytes: number) => randomBytes(bytes).toString('hex');

/** Orders over 100 by customer (a repartition), counted per 5 minutes, an alert past 2 per window. */
function fraud(ns: string): BuiltTopology {
  const t = topology({ applicationId: ns });
  t.stream<string, { customer: string; amount: number }>(`${ns}-orders`, { key: s, name: 'orders' })
    .filter((_id, o) => o.amount > 100, { name: 'big' })
    .groupBy((_id, o) => o.customer, { name: 'by-customer', key: s })
    .windowedBy(TimeWindows.ofSizeWithNoGrace(5 * MIN))
    .count({ name: 'big-orders' })
    .toStream({ name: 'updates' })
    .filter((_w, n) => n > 2, { name: 'many' })
    .map((w, n) => [w.key, { start: w.start, count: n }] as const, { name: 'alert' })
    .to(`${ns}-alerts`, { key: s, name: 'alerts' });
  return t.build();
}

interface Order {
  key: string;
  customer: string;
  amount: number;
  ts: number;
  traceId: string;
  spanId: string;
}

/**
 * 6 big orders of customer A in one window (alerts at counts 3..6), 2 small ones of B (filtered), a big
 * one of B 10 minutes on (closes A's window: no grace), then a big one of A in the closed window (late:
 * a dead letter of the count).
 */
function orders(): Order[] {
  const traceId = hex(16);
  const o = (i: number, customer: string, amount: number, ts: number): Order => ({
    key: `order-secret-${i}`,
    customer,
    amount,
    ts,
    traceId,
    spanId: hex(8),
  });
  return [
    ...[0, 1, 2, 3, 4, 5].map((i) => o(i, 'cust-secret-a', 150, START_MS + i * SEC)),
    o(6, 'cust-secret-b', 50, START_MS + 10 * SEC),
    o(7, 'cust-secret-b', 60, START_MS + 11 * SEC),
    o(8, 'cust-secret-b', 200, START_MS + 10 * MIN),
    o(9, 'cust-secret-a', 150, START_MS + 20 * SEC),
  ];
}

async function produceTraced(topic: string, list: Order[]): Promise<void> {
  const producer = kafka.producer({ 'linger.ms': 5, kafkaJS: { logLevel: KafkaJS.logLevel.NOTHING } });
  await producer.connect();
  try {
    await producer.send({
      topic,
      messages: list.map((r) => ({
        key: r.key,
        value: JSON.stringify({ customer: r.customer, amount: r.amount }),
        partition: 0,
        timestamp: String(r.ts),
        headers: { traceparent: `00-${r.traceId}-${r.spanId}-01` },
      })),
    });
  } finally {
    await producer.disconnect();
  }
}

/** The span id of the record's `traceparent`. */
function parentOf(r: ReadRecord): string {
  const v = r.headers.traceparent;
  assert.ok(v !== undefined && !Array.isArray(v), 'one traceparent header');
  const tp = parseTraceparent(v.toString());
  assert.ok(tp, 'a valid traceparent');
  return tp.spanId;
}

/** A node's records in or out, summed over the batch spans. */
function nodeSum(list: ReadableSpan[], node: string, which: 'in' | 'out'): number {
  let n = 0;
  for (const sp of list) {
    const names = sp.attributes[A.nodeNames] as string[];
    const counts = sp.attributes[which === 'in' ? A.nodeIn : A.nodeOut] as number[];
    assert.equal(names.length, counts.length, 'one count per node');
    const i = names.indexOf(node);
    if (i >= 0) n += counts[i] as number;
  }
  return n;
}

const sum = (list: ReadableSpan[], attr: string) =>
  list.reduce((n, sp) => n + (sp.attributes[attr] as number), 0);

describe('topology processor: spans (real broker, Redis)', { timeout: 180_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    trace.setGlobalTracerProvider(provider);
  });
  after(async () => {
    redis.disconnect();
    trace.disable();
    context.disable();
    await provider.shutdown();
  });

  it('the tracing option is checked at construction, before any connection', () => {
    const built = fraud(uniqueName('otel-t-opt'));
    const kafkaOpt = { brokers: ['127.0.0.1:1'] };
    for (const tracing of ['yes', { tracer: {} }, { tracer: undefined, other: 1 }])
      assert.throws(
        () => new TopologyProcessor({ topology: built, redis, kafka: kafkaOpt, tracing } as never),
        (e: { code?: string; message?: string }) =>
          e.code === 'RF_INVALID_OPTIONS' && /tracing/.test(e.message ?? ''),
        JSON.stringify(tracing),
      );
    for (const tracing of [true, false, { tracer: provider.getTracer('t') }])
      new TopologyProcessor({ topology: built, redis, kafka: kafkaOpt, tracing });
  });

  /** The fraud topology over the orders (10 input records, 8 repartition records), to its commits. */
  async function runFraud(tracing: TracingOption | undefined) {
    const ns = uniqueName('otel-t');
    const built = fraud(ns);
    const input = `${ns}-orders`;
    const [repartition] = built.repartitionTopics;
    assert.ok(repartition !== undefined, 'a repartition topic');
    const keep = { 'retention.ms': '-1' };
    const cleanup = await createTopics([
      { topic: input, partitions: 1, config: keep },
      { topic: `${ns}-alerts`, partitions: 1, config: keep },
      { topic: `${input}.DLT`, partitions: 1, config: keep },
      { topic: repartition, partitions: 1, config: keep },
    ]);
    try {
      const list = orders();
      await produceTraced(input, list);
      const p = new TopologyProcessor({
        topology: built,
        redis,
        kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 4 },
        ...(tracing === undefined ? {} : { tracing }),
      });
      const big = list.filter((o) => o.amount > 100).length;
      try {
        await p.start();
        // the input's 10 records and the repartition topic's 8 big orders, committed
        await pollUntil('every record committed', () => p.counts().records === list.length + big, 60_000, 20);
      } finally {
        await p.close();
      }
      const alertRows = await readToEnd(`${ns}-alerts`);
      const deadLetters = await readToEnd(`${input}.DLT`);
      assert.equal(alertRows.length, 4, 'alerts at counts 3, 4, 5, 6');
      assert.equal(deadLetters.length, 1, 'the late order');
      return { ns, built, input, repartition, list, big, alertRows, deadLetters };
    } finally {
      await cleanup();
    }
  }

  it("without the option: no span; the outputs carry their input's traceparent untouched", async () => {
    exporter.reset();
    const { list, alertRows, deadLetters } = await runFraud(undefined);
    assert.deepEqual(exporter.getFinishedSpans(), [], 'the global provider is registered, and still no span');
    // headers go with what a record causes, as Kafka Streams carries them (docs/streams.md): an alert
    // carries the traceparent of the order that caused it, through the repartition topic
    const sent = (i: number) => `00-${list[i]?.traceId}-${list[i]?.spanId}-01`;
    const text = (v: unknown) => (v === undefined ? undefined : String(v));
    assert.deepEqual(
      alertRows.map((r) => text(r.headers.traceparent)),
      [2, 3, 4, 5].map(sent),
      'alerts at counts 3 to 6: orders 2 to 5',
    );
    // the dead letter keeps the headers of its repartition record: the late order's
    assert.deepEqual(
      deadLetters.map((r) => text(r.headers.traceparent)),
      [sent(9)],
    );
  });

  it('a batch span per sub-topology batch with the topology attributes, linked through the repartition topic', async () => {
    exporter.reset();
    const { ns, built, input, repartition, list, big, alertRows, deadLetters } = await runFraud({
      tracer: provider.getTracer('redfence-test'),
    });
    await pollUntil(
      'the Kafka step spans',
      () => exporter.getFinishedSpans().some((x) => x.name.startsWith('send')),
      10_000,
      20,
    );
    const spans = exporter.getFinishedSpans();

    const inBatches = spans.filter((x) => x.name === `process ${input}`);
    const reBatches = spans.filter((x) => x.name === `process ${repartition}`);
    assert.ok(inBatches.length >= 3 && reBatches.length >= 2, 'batches of 4 at most in both sub-topologies');
    const subs = [...built.subTopologies].map((x) => x.id);
    for (const [batches, topic] of [
      [inBatches, input],
      [reBatches, repartition],
    ] as const)
      for (const b of batches) {
        assert.equal(b.kind, SpanKind.CONSUMER);
        assert.equal(b.parentSpanContext, undefined, 'a batch span is the root of its trace');
        assert.equal(b.status.code, SpanStatusCode.UNSET);
        assert.equal(b.attributes[A.destinationName], topic);
        assert.equal(b.attributes[A.partitionId], '0');
        assert.equal(b.attributes[A.consumerGroup], ns);
        assert.equal(b.attributes[A.applicationId], ns);
        assert.ok(subs.includes(b.attributes[A.subTopology] as number), 'a sub-topology of the topology');
        assert.equal(typeof b.attributes[A.epoch], 'number');
        const names = b.attributes[A.nodeNames] as string[];
        for (const n of names)
          assert.ok(
            built.nodes.some((x) => x.name === n),
            `${n}: a node`,
          );
      }
    const subOf = (b: ReadableSpan) => b.attributes[A.subTopology];
    assert.equal(new Set(inBatches.map(subOf)).size, 1, 'one sub-topology reads the input');
    assert.equal(new Set(reBatches.map(subOf)).size, 1, 'one reads the repartition topic');
    assert.notEqual(subOf(inBatches[0] as ReadableSpan), subOf(reBatches[0] as ReadableSpan));

    // what each batch ran, summed: what the input gives (a clean run: each batch once)
    assert.equal(sum(inBatches, A.batchCount), list.length);
    assert.equal(sum(reBatches, A.batchCount), big);
    assert.equal(nodeSum(inBatches, 'big', 'in'), list.length);
    assert.equal(nodeSum(inBatches, 'big', 'out'), big);
    // the count's node (its name is the store's: a generated node name, as in Kafka Streams)
    const count = built.nodes.find((n) => n.kind === 'aggregate')?.name ?? '';
    assert.equal(nodeSum(reBatches, count, 'in'), big);
    assert.equal(nodeSum(reBatches, count, 'out'), big - deadLetters.length, 'an update per counted order');
    assert.equal(nodeSum(reBatches, 'many', 'out'), alertRows.length);
    assert.equal(nodeSum(reBatches, 'alerts', 'out'), alertRows.length);
    assert.equal(nodeSum(inBatches, 'alerts', 'in'), 0, 'the sink is in the other sub-topology');
    assert.equal(sum(inBatches, A.deadLetters), 0);
    assert.equal(sum(reBatches, A.deadLetters), deadLetters.length);
    assert.equal(sum([...inBatches, ...reBatches], A.dropped), 0);
    // outputs = repartition records + alerts + the dead letter
    assert.equal(sum(inBatches, A.outputs), big);
    assert.equal(sum(reBatches, A.outputs), alertRows.length + deadLetters.length);

    // links: the orders' contexts, then the input batches (the repartition records carry theirs)
    const inIds = new Set(inBatches.map((b) => b.spanContext().spanId));
    const reIds = new Set(reBatches.map((b) => b.spanContext().spanId));
    assert.deepEqual(
      inBatches
        .flatMap((b) => b.links)
        .map((l) => `${l.context.traceId}-${l.context.spanId}`)
        .sort(),
      list.map((o) => `${o.traceId}-${o.spanId}`).sort(),
    );
    const reLinks = reBatches.flatMap((b) => b.links);
    assert.equal(reLinks.length, big, 'each repartition record links its input batch');
    assert.ok(reLinks.every((l) => inIds.has(l.context.spanId)));
    for (const r of [...alertRows, ...deadLetters]) assert.ok(reIds.has(parentOf(r)), 'a repartition batch');

    // each batch's Redis step is its child; the Kafka steps link the batches
    for (const b of [...inBatches, ...reBatches]) {
      const id = b.spanContext().spanId;
      const steps = spans.filter((x) => x.name === 'fence apply' && x.parentSpanContext?.spanId === id);
      assert.ok(steps.length >= 1, 'a Redis step span under each batch');
      assert.ok(steps.every((x) => x.kind === SpanKind.CLIENT && x.attributes[A.dbSystemName] === 'redis'));
    }
    const sends = spans.filter((x) => x.name.startsWith('send'));
    const linked = new Set(sends.flatMap((x) => x.links.map((l) => l.context.spanId)));
    for (const id of [...inIds, ...reIds]) assert.ok(linked.has(id), 'every batch in a Kafka step');
    for (const x of sends) {
      assert.equal(x.kind, SpanKind.CLIENT);
      assert.equal(x.attributes[A.mode], 'exactly-once');
      assert.equal(x.status.code, SpanStatusCode.UNSET);
    }

    // never a key or a value
    const text = JSON.stringify(
      spans.map((x) => ({
        a: x.attributes,
        e: x.events,
        st: x.status,
        l: x.links.map((l) => l.attributes),
      })),
    );
    for (const secret of ['order-secret', 'cust-secret', '"amount"'])
      assert.ok(!text.includes(secret), `"${secret}" in a span`);
  });
});
