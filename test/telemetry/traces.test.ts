/**
 * Traces on the real broker and Redis, exported to the SDK's in-memory exporter: a processor's batch
 * span linked to its inputs' creation contexts, with its Redis and Kafka step spans and its context in
 * every output and dead letter; a handler call's span as the child of its record's context, one per
 * attempt, errors recorded without the error's message, the dead letter carrying the last attempt's
 * context; and nothing at all without the option.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { context, type SpanContext, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import type { Redis } from 'ioredis';
import {
  TRACE_ATTRIBUTES as A,
  createHandler,
  defineHandler,
  defineProcessor,
  type ProcessingMode,
  Processor,
  type TracingOption,
} from '../../src/index.js';
import { parseTraceparent } from '../../src/telemetry/w3c.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { createTopics, kafka, pollUntil, type ReadRecord, readToEnd } from '../helpers/kafka.js';

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const brokers = KAFKA_BROKERS.split(',');

const hex = (bytes: number) => randomBytes(bytes).toString('hex');

interface Input {
  key: string;
  value: string;
  traceId: string;
  spanId: string;
}

/** Records with a traceparent each (one trace, a span per record, as a batch producer makes them). */
function inputs(values: string[]): Input[] {
  const traceId = hex(16);
  return values.map((value, i) => ({ key: `customer-secret-${i}`, value, traceId, spanId: hex(8) }));
}

async function produceTraced(topic: string, records: Input[]): Promise<void> {
  const producer = kafka.producer({ 'linger.ms': 5, kafkaJS: { logLevel: KafkaJS.logLevel.NOTHING } });
  await producer.connect();
  try {
    await producer.send({
      topic,
      messages: records.map((r) => ({
        key: r.key,
        value: r.value,
        partition: 0,
        headers: { traceparent: `00-${r.traceId}-${r.spanId}-01`, tracestate: 'vendor=abc' },
      })),
    });
  } finally {
    await producer.disconnect();
  }
}

function header(r: ReadRecord, name: string): string | undefined {
  const v = r.headers[name];
  assert.ok(!Array.isArray(v), `one ${name} header`);
  return v?.toString();
}

function contextIn(r: ReadRecord): SpanContext {
  const tp = parseTraceparent(header(r, 'traceparent') ?? '');
  assert.ok(tp, `a valid traceparent on ${r.key}`);
  return { traceId: tp.traceId, spanId: tp.spanId, traceFlags: tp.traceFlags };
}

const spans = (): ReadableSpan[] => exporter.getFinishedSpans();

/** No key or value of a record in any attribute, event or status of these spans. */
function assertNothingPersonal(list: ReadableSpan[], secrets: string[]): void {
  const text = JSON.stringify(
    list.map((s) => ({ a: s.attributes, e: s.events, st: s.status, l: s.links.map((l) => l.attributes) })),
  );
  for (const secret of secrets) assert.ok(!text.includes(secret), `"${secret}" in a span`);
}

describe('traces (real broker, Redis)', { timeout: 180_000 }, () => {
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

  async function processorRun(
    ns: string,
    mode: ProcessingMode,
    tracing: TracingOption | undefined,
    records: Input[],
  ) {
    const input = `${ns}-in`;
    const output = `${ns}-out`;
    const cleanup = await createTopics([
      { topic: input, partitions: 1 },
      { topic: output, partitions: 1 },
      { topic: `${input}.DLT`, partitions: 1 },
    ]);
    await produceTraced(input, records);
    const p = new Processor<{ n: number }>({
      definition: defineProcessor<{ n: number }>({
        input,
        output,
        store: ns.replace(/-/g, '_'),
        operation: (r) => ({ op: 'add', by: r.n }),
      }),
      redis,
      mode,
      groupId: `${ns}-g`,
      kafka: { brokers, sessionTimeoutMs: 6000 },
      ...(tracing === undefined ? {} : { tracing }),
    });
    try {
      await p.start();
      await pollUntil('every input committed', () => p.counts().records === records.length, 60_000, 20);
    } finally {
      await p.close();
    }
    const outputs = await readToEnd(output);
    const deadLetters = await readToEnd(`${input}.DLT`);
    await cleanup();
    return { input, output, outputs, deadLetters };
  }

  for (const mode of ['at-least-once', 'exactly-once'] as const)
    it(`${mode}: the batch span links to its inputs; Redis and Kafka steps; outputs and dead letters carry it`, async () => {
      const ns = uniqueName('otel-p');
      const records = inputs(['{"n":1}', '{"n":2}', '{"n":3}', '{"n":4}', 'not json at all: secret-value']);
      const tracer = provider.getTracer('redfence-test');
      const { input, outputs, deadLetters } = await processorRun(ns, mode, { tracer }, records);
      // the Kafka step's span ends right after the commit that counted the records
      await pollUntil(
        'the Kafka step spans',
        () => spans().some((s) => s.name.startsWith('send') && s.attributes[A.mode] === mode),
        10_000,
        20,
      );

      const batches = spans().filter((s) => s.name === `process ${input}`);
      assert.ok(batches.length >= 1, 'a batch span');
      const batchIds = new Set(batches.map((s) => s.spanContext().spanId));
      for (const b of batches) {
        assert.equal(b.kind, SpanKind.CONSUMER);
        assert.equal(b.parentSpanContext, undefined, 'a batch span is the root of its trace');
        assert.equal(b.attributes[A.messagingSystem], 'kafka');
        assert.equal(b.attributes[A.messagingSystemName], 'kafka');
        assert.equal(b.attributes[A.operationType], 'process');
        assert.equal(b.attributes[A.destinationName], input);
        assert.equal(b.attributes[A.partitionId], '0');
        assert.equal(b.attributes[A.consumerGroup], `${ns}-g`);
        assert.equal(typeof b.attributes[A.batchCount], 'number');
        assert.equal(b.status.code, SpanStatusCode.UNSET);
      }
      // every input's creation context is linked from the batch that processed it, with its offset
      const links = batches.flatMap((b) => b.links);
      assert.deepEqual(
        links.map((l) => [l.context.traceId, l.context.spanId, l.attributes?.[A.kafkaOffset]]).sort(),
        records.map((r, i) => [r.traceId, r.spanId, i]).sort(),
      );
      assert.ok(links.every((l) => l.context.isRemote && l.context.traceState?.get('vendor') === 'abc'));

      const fence = spans().filter(
        (s) => s.name === 'fence apply' && batchIds.has(s.parentSpanContext?.spanId ?? ''),
      );
      assert.ok(fence.length >= batches.length, 'a Redis step span under each batch');
      for (const f of fence) {
        assert.equal(f.kind, SpanKind.CLIENT);
        assert.equal(f.attributes[A.dbSystemName], 'redis');
      }

      const steps = spans().filter((s) => s.links.some((l) => batchIds.has(l.context.spanId)));
      assert.ok(steps.length >= 1, 'a Kafka step span linked to the batches');
      for (const s of steps) {
        assert.equal(s.kind, SpanKind.CLIENT);
        assert.equal(s.parentSpanContext, undefined, 'no batch is the parent of a group commit');
        assert.equal(s.attributes[A.operationType], 'send');
        assert.equal(s.attributes[A.mode], mode);
        assert.equal(s.status.code, SpanStatusCode.UNSET);
      }
      const linked = new Set(steps.flatMap((s) => s.links.map((l) => l.context.spanId)));
      assert.deepEqual([...linked].sort(), [...batchIds].sort(), 'every batch linked from a Kafka step');
      assert.equal(
        steps.reduce((n, s) => n + Number(s.attributes[A.batchCount]), 0),
        5,
        'four outputs and one dead letter sent',
      );

      // outputs and the dead letter carry the batch span's context, not the input's
      assert.equal(outputs.length, 4);
      assert.equal(deadLetters.length, 1);
      for (const r of [...outputs, ...deadLetters]) {
        const c = contextIn(r);
        const batch = batches.find((b) => b.spanContext().spanId === c.spanId);
        assert.ok(batch, `${r.key}'s traceparent names a batch span`);
        assert.equal(c.traceId, batch.spanContext().traceId);
        assert.equal(header(r, 'tracestate'), undefined, "the input's tracestate is not carried over");
      }
      assert.notEqual(contextIn(deadLetters[0] as ReadRecord).traceId, records[0]?.traceId);
      assertNothingPersonal(spans(), [...records.map((r) => r.key), 'secret-value']);
    });

  it('a handler call: one span per attempt, the child of its record; errors recorded; the dead letter carries it', async () => {
    const topic = uniqueName('otel-h');
    const cleanup = await createTopics([
      { topic, partitions: 1 },
      { topic: `${topic}.DLT`, partitions: 1 },
    ]);
    const records = inputs(['{"i":0}', '{"i":1}', '{"i":2}']);
    await produceTraced(topic, records);
    const active: Array<{ offset: number; attempt: number; spanId: string | undefined }> = [];
    const h = createHandler(
      defineHandler<{ i: number }>({
        input: topic,
        name: 'otel',
        handle: async (r, ctx) => {
          active.push({
            offset: r.offset,
            attempt: ctx.attempt,
            spanId: trace.getActiveSpan()?.spanContext().spanId,
          });
          if (r.value.i === 2 || (r.value.i === 1 && ctx.attempt === 1))
            throw new Error('secret-value in a message');
        },
      }),
      {
        kafka: { brokers, sessionTimeoutMs: 6000 },
        groupId: `${topic}-g`,
        retry: { attempts: 2, baseMs: 1, maxMs: 5 },
        commitIntervalMs: 100,
        tracing: true, // the global provider's tracer
      },
    );
    try {
      await h.start();
      await pollUntil('handled', () => h.counts().done === 2 && h.counts().deadLettered === 1, 60_000, 20);
    } finally {
      await h.close();
    }
    const deadLetters = await readToEnd(`${topic}.DLT`);
    await cleanup();

    const calls = spans().filter((s) => s.name === `process ${topic}`);
    assert.equal(calls.length, 5, 'one span per attempt: 1 + 2 + 2');
    for (const s of calls) {
      const offset = Number(s.attributes[A.kafkaOffset]);
      const r = records[offset] as Input;
      assert.equal(s.kind, SpanKind.CONSUMER);
      assert.equal(s.parentSpanContext?.spanId, r.spanId, 'the child of the record creation context');
      assert.equal(s.spanContext().traceId, r.traceId);
      assert.equal(s.attributes[A.messagingKafkaOffset], offset);
      assert.equal(s.attributes[A.consumerGroup], `${topic}-g`);
      const attempt = s.attributes[A.attempt];
      const seen = active.find((a) => a.offset === offset && a.attempt === attempt);
      assert.equal(seen?.spanId, s.spanContext().spanId, 'the span is active inside handle()');
      const failed = offset === 2 || (offset === 1 && attempt === 1);
      assert.equal(
        s.status.code,
        failed ? SpanStatusCode.ERROR : SpanStatusCode.UNSET,
        `${offset}#${attempt}`,
      );
      if (failed) {
        const ev = s.events.find((e) => e.name === 'exception');
        assert.equal(ev?.attributes?.[A.exceptionType], 'Error');
        assert.equal(s.attributes[A.errorType], 'Error');
      }
    }
    assertNothingPersonal(calls, [...records.map((r) => r.key), 'secret-value']);

    assert.equal(deadLetters.length, 1);
    const last = calls.find((s) => s.attributes[A.kafkaOffset] === 2 && s.attributes[A.attempt] === 2);
    assert.deepEqual(
      { ...contextIn(deadLetters[0] as ReadRecord) },
      { traceId: last?.spanContext().traceId, spanId: last?.spanContext().spanId, traceFlags: 1 },
      "the dead letter carries the last attempt's context",
    );
  });

  it('without the option: no span at all, outputs without a traceparent', async () => {
    exporter.reset();
    const ns = uniqueName('otel-off');
    const records = inputs(['{"n":1}', '{"n":2}']);
    const { outputs } = await processorRun(ns, 'at-least-once', undefined, records);
    const topic = `${ns}-h`;
    const cleanup = await createTopics([
      { topic, partitions: 1 },
      { topic: `${topic}.DLT`, partitions: 1 },
    ]);
    await produceTraced(topic, records);
    const h = createHandler(defineHandler({ input: topic, name: 'off', handle: async () => undefined }), {
      kafka: { brokers, sessionTimeoutMs: 6000 },
      groupId: `${topic}-g`,
      commitIntervalMs: 100,
    });
    try {
      await h.start();
      await pollUntil('handled', () => h.counts().done === 2, 60_000, 20);
    } finally {
      await h.close();
    }
    await cleanup();
    assert.equal(outputs.length, 2);
    for (const r of outputs) assert.equal(r.headers.traceparent, undefined);
    assert.deepEqual(
      spans().map((s) => s.name),
      [],
      'the global provider is registered, and still no span is made',
    );
  });
});
