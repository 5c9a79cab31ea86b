/**
 * Tracing without services: the W3C header codec, the option's validation, and the lazy loading of
 * `@opentelemetry/api` (never with the option off; RF_INVALID_OPTIONS naming the package when it
 * cannot be imported; no other source file reaches it at run time), and a failed Kafka step's span.
 */
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { SpanStatusCode } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { Redis } from 'ioredis';
import { createHandler, defineHandler, defineProcessor, Processor, RedfenceError } from '../../src/index.js';
import type { OutRecord } from '../../src/kafka/types.js';
import { CommitPipeline } from '../../src/processor/commit-pipeline.js';
import type { OwnedPartition } from '../../src/processor/partition-table.js';
import { silentLogger } from '../../src/runtime/logger.js';
import { TRACE_ATTRIBUTES as A, Tracing, tracingOption } from '../../src/telemetry/index.js';
import { extractContext, formatTraceparent, parseTraceparent } from '../../src/telemetry/w3c.js';

const TRACE = '0af7651916cd43dd8448eb211c80319c';
const SPAN = 'b7ad6b7169203331';

describe('W3C traceparent', () => {
  it('reads a valid header and writes it back the same', () => {
    const v = `00-${TRACE}-${SPAN}-01`;
    assert.deepEqual(parseTraceparent(v), { traceId: TRACE, spanId: SPAN, traceFlags: 1 });
    assert.equal(formatTraceparent(TRACE, SPAN, 1), v);
    assert.equal(formatTraceparent(TRACE, SPAN, 0), `00-${TRACE}-${SPAN}-00`);
  });

  it('refuses all-zero ids, version ff, upper case, extra fields on version 00, bad lengths', () => {
    for (const bad of [
      `00-${'0'.repeat(32)}-${SPAN}-01`,
      `00-${TRACE}-${'0'.repeat(16)}-01`,
      `ff-${TRACE}-${SPAN}-01`,
      `00-${TRACE.toUpperCase()}-${SPAN}-01`,
      `00-${TRACE}-${SPAN}-01-extra`,
      `00-${TRACE}-${SPAN}-1`,
      `00-${TRACE.slice(1)}-${SPAN}-01`,
      '',
      'garbage',
    ])
      assert.equal(parseTraceparent(bad), undefined, bad);
  });

  it('reads a later version by its first four fields', () => {
    assert.deepEqual(parseTraceparent(`01-${TRACE}-${SPAN}-03-what-comes-next`), {
      traceId: TRACE,
      spanId: SPAN,
      traceFlags: 3,
    });
  });

  it('takes the last of repeated headers, bytes or text, and joins tracestate headers', () => {
    const other = 'a'.repeat(32);
    const rc = extractContext({
      traceparent: [Buffer.from(`00-${other}-${SPAN}-01`), `00-${TRACE}-${SPAN}-00`],
      tracestate: [Buffer.from('a=1'), 'b=2'],
    });
    assert.deepEqual(rc, { traceId: TRACE, spanId: SPAN, traceFlags: 0, traceState: 'a=1,b=2' });
    assert.equal(extractContext({}), undefined);
    assert.equal(extractContext({ traceparent: Buffer.from('nope') }), undefined);
  });
});

describe('the tracing option', () => {
  it('is off unless true or an object, and refuses anything else before any connection', () => {
    assert.equal(tracingOption(undefined), undefined);
    assert.equal(tracingOption(false), undefined);
    assert.deepEqual(tracingOption(true), { tracer: undefined });
    const tracer = { startSpan: () => ({}) };
    assert.deepEqual(tracingOption({ tracer }), { tracer });
    for (const bad of ['yes', 1, [], { tracer: {} }, { tracer: null }, { sampler: 1 }])
      assert.throws(
        () => tracingOption(bad),
        (e: unknown) => RedfenceError.is(e, 'RF_INVALID_OPTIONS') && /tracing/.test((e as Error).message),
        JSON.stringify(bad),
      );
  });

  it('is checked by the processor and the handler constructors', () => {
    const redis = new Redis({ lazyConnect: true });
    const definition = defineProcessor<{ n: number }>({
      input: 'in',
      output: 'out',
      store: 's',
      operation: (r) => ({ op: 'add', by: r.n }),
    });
    assert.throws(
      () => new Processor({ definition, redis, kafka: { brokers: ['127.0.0.1:1'] }, tracing: 'on' as never }),
      (e: unknown) => RedfenceError.is(e, 'RF_INVALID_OPTIONS'),
    );
    const handler = defineHandler({ input: 'in', name: 'h', handle: async () => undefined });
    assert.throws(
      () => createHandler(handler, { kafka: { brokers: ['127.0.0.1:1'] }, tracing: { tracer: 5 } as never }),
      (e: unknown) => RedfenceError.is(e, 'RF_INVALID_OPTIONS'),
    );
    redis.disconnect();
  });
});

describe('loading @opentelemetry/api', () => {
  it('never imports it with tracing off; imports it once with tracing on', async () => {
    let imports = 0;
    const importer = async () => {
      imports++;
      return import('@opentelemetry/api');
    };
    const off = new Tracing(undefined, { groupId: 'g' }, importer);
    await off.load();
    assert.equal(imports, 0);
    assert.equal(off.enabled, false);
    // the no-op hooks hand records through untouched
    const out = [{ topic: 't', key: 'k', value: 'v' }];
    const b = off.batch();
    b.begin('t', 0, 1, []);
    assert.equal(b.stamp(out), out);
    assert.equal(await b.redis(async () => 7), 7);
    const on = new Tracing({ tracer: undefined }, { groupId: 'g' }, importer);
    await on.load();
    await on.load();
    assert.equal(imports, 1);
  });

  it('fails with RF_INVALID_OPTIONS naming the package when it is not installed', async () => {
    const missing = () => import('@opentelemetry/this-package-does-not-exist' as string);
    await assert.rejects(
      new Tracing({ tracer: undefined }, { groupId: 'g' }, missing).load(),
      (e: unknown) =>
        RedfenceError.is(e, 'RF_INVALID_OPTIONS') &&
        /npm install @opentelemetry\/api/.test((e as Error).message),
    );
  });

  it('is reached at run time only from src/telemetry/otel.ts, by a dynamic import', async () => {
    const root = join(import.meta.dirname, '../../src');
    const files = (await readdir(root, { recursive: true })).filter((f) => f.endsWith('.ts'));
    const runtime: string[] = [];
    for (const f of files) {
      const text = await readFile(join(root, f), 'utf8');
      for (const line of text.split('\n')) {
        if (!line.includes("'@opentelemetry/api'")) continue;
        if (/^\s*import type /.test(line)) continue;
        runtime.push(`${f}: ${line.trim()}`);
      }
    }
    assert.deepEqual(runtime, [
      "telemetry/otel.ts: const importApi: ApiImporter = () => import('@opentelemetry/api');",
    ]);
  });
});

describe('a failed Kafka step', () => {
  it('ends its span with status ERROR and an exception event, without the error message', async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const tracing = new Tracing({ tracer: provider.getTracer('t') }, { groupId: 'g' });
    await tracing.load();
    const refused = Object.assign(new Error('the broker refused value secret-value'), {
      code: 'ERR_MSG_SIZE_TOO_LARGE',
    });
    const sought: number[] = [];
    const pipeline = new CommitPipeline({
      mode: 'at-least-once',
      kafka: {
        produce: async () => {
          throw refused;
        },
        commit: async () => undefined,
        produceTransactionally: async () => undefined,
        seek: (_tp, offset) => {
          sought.push(offset);
        },
      },
      log: silentLogger,
      metrics: undefined,
      groupCommitRecords: 2000,
      fatal: () => undefined,
      committed: async () => undefined,
      tracing,
    });
    const entry: OwnedPartition = {
      topic: 'in',
      partition: 0,
      epoch: 1,
      committed: 0,
      delivered: 2,
      fenced: false,
      rewound: undefined,
    };
    const trace = tracing.batch();
    trace.begin('in', 0, 1, []);
    const out: OutRecord[] = trace.stamp([{ topic: 'out', key: 'k', value: 'secret-value' }]);
    trace.end();
    await pipeline.enqueue({ entry, out, count: 2, first: 0, next: 2, highWatermark: '2', trace });
    await pipeline.drain();
    assert.deepEqual(sought, [0], 'the step failed and sought the partition back');
    const step = exporter.getFinishedSpans().find((s) => s.name === 'send out');
    assert.ok(step, 'the step span');
    assert.equal(step.status.code, SpanStatusCode.ERROR);
    assert.equal(step.attributes[A.errorType], 'ERR_MSG_SIZE_TOO_LARGE');
    const ev = step.events.find((e) => e.name === 'exception');
    assert.equal(ev?.attributes?.[A.exceptionType], 'Error');
    assert.equal(ev?.attributes?.[A.errorCode], 'ERR_MSG_SIZE_TOO_LARGE');
    assert.match(String(ev?.attributes?.[A.exceptionStacktrace]), /^Error\n\s+at /);
    assert.ok(!JSON.stringify([step.attributes, step.events, step.status]).includes('secret-value'));
    const batch = exporter.getFinishedSpans().find((s) => s.name === 'process in');
    assert.equal(step.links[0]?.context.spanId, batch?.spanContext().spanId, 'linked to the batch');
    await provider.shutdown();
  });
});
