/**
 * The spans, over `@opentelemetry/api`. This is the only module that reaches the API at run time, and
 * only through the dynamic import in {@link loadTracer}: its static imports of the API are types only,
 * erased from the compiled code, so the package runs where the API is not installed.
 *
 * Span shapes (names and attributes: semconv.ts; docs/operations.md, "Traces"):
 * - `process <topic>` (CONSUMER), one per processor batch, root of its own trace, linked to the
 *   creation context of each of its first 128 records; children `fence apply` (CLIENT), one per Redis
 *   step. Its context goes into every output and dead letter the batch produces.
 * - `send <topic>` (CLIENT), one per Kafka step (produce + commit, or the transaction), root of its own
 *   trace and linked to the `process` spans of the batches it carries: a step is group-committed over
 *   several batches, so it is no batch's child.
 * - `process <topic>` (CONSUMER), one per handler call (each attempt), the child of the record's
 *   creation context when it carries one; its context goes into the record's dead letter.
 * New spans never take the ambient context as parent: the consume loop runs in whatever context
 * start() was called in, which has nothing to do with the records.
 */
import type * as Api from '@opentelemetry/api';
import { RedfenceError } from '../errors/index.js';
import type { InRecord, OutRecord } from '../kafka/types.js';
import { VERSION } from '../version.js';
import type { ResolvedTracing } from './options.js';
import { ATTR, FENCE_SPAN, KAFKA, MAX_LINKS, OPERATION, REDIS, TRACEPARENT, TRACESTATE } from './semconv.js';
import type {
  BatchTrace,
  RecordTrace,
  StepBatch,
  StepTrace,
  TraceAttributes,
  Tracer,
  TracingScope,
} from './trace-types.js';
import { extractContext, formatTraceparent, type RemoteContext } from './w3c.js';

type ApiModule = typeof Api;

/** How the API module is reached; replaced in tests to see what happens when it is not installed. */
export type ApiImporter = () => Promise<unknown>;

const importApi: ApiImporter = () => import('@opentelemetry/api');

/** The API module, or RF_INVALID_OPTIONS saying how to install it. */
async function loadApi(importer: ApiImporter = importApi): Promise<ApiModule> {
  let m: unknown;
  try {
    m = await importer();
  } catch (err) {
    throw new RedfenceError(
      'RF_INVALID_OPTIONS',
      'option "tracing" needs the @opentelemetry/api package (an optional peer dependency): npm install @opentelemetry/api',
      { cause: err },
    );
  }
  // a CommonJS build imported from ESM may put everything under `default`
  const api = (m as { trace?: unknown }).trace === undefined ? (m as { default?: unknown }).default : m;
  if (typeof (api as ApiModule | undefined)?.trace?.getTracer !== 'function')
    throw new RedfenceError('RF_INVALID_OPTIONS', 'option "tracing": @opentelemetry/api has no trace API');
  return api as ApiModule;
}

export async function loadTracer(
  option: ResolvedTracing,
  scope: TracingScope,
  importer?: ApiImporter,
): Promise<Tracer> {
  const api = await loadApi(importer);
  const tracer = (option.tracer as Api.Tracer | undefined) ?? api.trace.getTracer('redfence', VERSION);
  return new OtelTracer(api, tracer, scope);
}

const SYSTEM: Api.Attributes = { [ATTR.messagingSystem]: KAFKA, [ATTR.messagingSystemName]: KAFKA };

function offsetAttributes(offset: string): Api.Attributes {
  const n = Number(offset);
  return { [ATTR.kafkaOffset]: n, [ATTR.messagingKafkaOffset]: n };
}

/** The error's class or code (low cardinality), never its message: it may quote a record's value. */
function errorType(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' || typeof code === 'number') return String(code);
  if (err instanceof Error) return err.name || 'Error';
  return err === null ? 'null' : typeof err;
}

/** The stack's frames only (`at ...` lines): the first lines of a stack repeat the message. */
function frames(err: unknown): string | undefined {
  const stack = err instanceof Error ? err.stack : undefined;
  if (typeof stack !== 'string') return undefined;
  const lines = stack.split('\n').filter((l) => /^\s+at /.test(l));
  return lines.length === 0 ? undefined : lines.join('\n').slice(0, 8192);
}

function recordError(api: ApiModule, span: Api.Span, err: unknown): void {
  const type = errorType(err);
  const name = err instanceof Error ? err.name || 'Error' : type;
  const event: Api.Attributes = { [ATTR.exceptionType]: name };
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' || typeof code === 'number') event[ATTR.errorCode] = String(code);
  const f = frames(err);
  if (f !== undefined) event[ATTR.exceptionStacktrace] = `${name}\n${f}`;
  span.addEvent('exception', event);
  span.setAttribute(ATTR.errorType, type);
  span.setStatus({ code: api.SpanStatusCode.ERROR, message: type });
}

/**
 * The headers carrying a span's context, or undefined when it has none (a no-op tracer's span). Bytes,
 * made once per span and shared by all its records: nothing to convert per record.
 */
function contextHeaders(api: ApiModule, span: Api.Span): Record<string, Buffer> | undefined {
  const sc = span.spanContext();
  if (!api.isSpanContextValid(sc)) return undefined;
  const h: Record<string, Buffer> = {
    [TRACEPARENT]: Buffer.from(formatTraceparent(sc.traceId, sc.spanId, sc.traceFlags), 'latin1'),
  };
  const state = sc.traceState?.serialize();
  if (state) h[TRACESTATE] = Buffer.from(state, 'latin1');
  return h;
}

/** A record with `h` as its trace headers: a dead letter's copies of the input's are replaced. */
function stamped(o: OutRecord, h: Record<string, Buffer>): OutRecord {
  const headers: Record<string, Buffer | Buffer[] | string> = { ...o.headers, ...h };
  if (h[TRACESTATE] === undefined) delete headers[TRACESTATE];
  return { ...o, headers };
}

class OtelTracer implements Tracer {
  readonly api: ApiModule;
  readonly tracer: Api.Tracer;
  readonly scope: TracingScope;

  constructor(api: ApiModule, tracer: Api.Tracer, scope: TracingScope) {
    this.api = api;
    this.tracer = tracer;
    this.scope = scope;
  }

  remote(rc: RemoteContext): Api.SpanContext {
    const sc: Api.SpanContext = {
      traceId: rc.traceId,
      spanId: rc.spanId,
      traceFlags: rc.traceFlags,
      isRemote: true,
    };
    if (rc.traceState !== undefined) sc.traceState = this.api.createTraceState(rc.traceState);
    return sc;
  }

  batch(): BatchTrace {
    return new OtelBatch(this);
  }

  step(batches: readonly StepBatch[], out: readonly OutRecord[], mode: string): StepTrace {
    const api = this.api;
    const links: Api.Link[] = [];
    let inputs = 0;
    for (const b of batches) {
      inputs += b.count;
      const sc = b.trace instanceof OtelBatch ? b.trace.context() : undefined;
      if (sc !== undefined && links.length < MAX_LINKS) links.push({ context: sc });
    }
    const topics = new Set(out.map((o) => o.topic));
    const topic = topics.size === 1 ? [...topics][0] : undefined;
    const attributes: Api.Attributes = {
      ...SYSTEM,
      [ATTR.operationType]: OPERATION.send,
      [ATTR.operationName]: OPERATION.send,
      [ATTR.batchCount]: out.length,
      [ATTR.mode]: mode,
      [ATTR.batches]: batches.length,
      [ATTR.inputRecords]: inputs,
    };
    if (topic !== undefined) attributes[ATTR.destinationName] = topic;
    const name = topic === undefined ? OPERATION.send : `${OPERATION.send} ${topic}`;
    const span = this.tracer.startSpan(
      name,
      { kind: api.SpanKind.CLIENT, links, attributes },
      api.ROOT_CONTEXT,
    );
    return new OtelEnd(api, span);
  }

  record(record: InRecord, attempt: number | undefined): RecordTrace {
    const api = this.api;
    const rc = extractContext(record.headers);
    const parent =
      rc === undefined ? api.ROOT_CONTEXT : api.trace.setSpanContext(api.ROOT_CONTEXT, this.remote(rc));
    const attributes: Api.Attributes = {
      ...SYSTEM,
      [ATTR.operationType]: OPERATION.process,
      [ATTR.operationName]: OPERATION.process,
      [ATTR.destinationName]: record.topic,
      [ATTR.partitionId]: String(record.partition),
      [ATTR.consumerGroup]: this.scope.groupId,
      ...offsetAttributes(record.offset),
    };
    if (attempt !== undefined) attributes[ATTR.attempt] = attempt;
    const span = this.tracer.startSpan(
      `${OPERATION.process} ${record.topic}`,
      { kind: api.SpanKind.CONSUMER, attributes },
      parent,
    );
    return new OtelRecord(api, span, api.trace.setSpan(parent, span));
  }
}

/** A span that is failed and ended, once. */
class OtelEnd implements StepTrace {
  readonly #api: ApiModule;
  readonly #span: Api.Span;
  #ended = false;

  constructor(api: ApiModule, span: Api.Span) {
    this.#api = api;
    this.#span = span;
  }

  failed(error: unknown): void {
    if (!this.#ended) recordError(this.#api, this.#span, error);
  }

  end(): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#span.end();
  }
}

class OtelRecord extends OtelEnd implements RecordTrace {
  readonly #api: ApiModule;
  readonly #span: Api.Span;
  readonly #active: Api.Context;

  constructor(api: ApiModule, span: Api.Span, active: Api.Context) {
    super(api, span);
    this.#api = api;
    this.#span = span;
    this.#active = active;
  }

  run<R>(fn: () => Promise<R>): Promise<R> {
    return this.#api.context.with(this.#active, fn);
  }

  stamp(out: OutRecord): OutRecord {
    const h = contextHeaders(this.#api, this.#span);
    return h === undefined ? out : stamped(out, h);
  }
}

class OtelBatch implements BatchTrace {
  readonly #t: OtelTracer;
  #span: Api.Span | undefined;
  #end: OtelEnd | undefined;
  #headers: Record<string, Buffer> | undefined | null = null;

  constructor(t: OtelTracer) {
    this.#t = t;
  }

  /** The started span's context, for the Kafka step's links. */
  context(): Api.SpanContext | undefined {
    return this.#span?.spanContext();
  }

  begin(topic: string, partition: number, epoch: number, records: readonly InRecord[]): void {
    const { api, tracer, scope } = this.#t;
    const links: Api.Link[] = [];
    const n = Math.min(records.length, MAX_LINKS);
    for (let i = 0; i < n; i++) {
      const r = records[i] as InRecord;
      const rc = extractContext(r.headers);
      if (rc !== undefined)
        links.push({ context: this.#t.remote(rc), attributes: offsetAttributes(r.offset) });
    }
    this.#span = tracer.startSpan(
      `${OPERATION.process} ${topic}`,
      {
        kind: api.SpanKind.CONSUMER,
        links,
        attributes: {
          ...SYSTEM,
          [ATTR.operationType]: OPERATION.process,
          [ATTR.operationName]: OPERATION.process,
          [ATTR.destinationName]: topic,
          [ATTR.partitionId]: String(partition),
          [ATTR.consumerGroup]: scope.groupId,
          [ATTR.batchCount]: records.length,
          [ATTR.epoch]: epoch,
        },
      },
      api.ROOT_CONTEXT,
    );
    this.#end = new OtelEnd(api, this.#span);
  }

  async redis<R>(fn: () => Promise<R>): Promise<R> {
    const span = this.#span;
    if (span === undefined) return fn();
    const { api, tracer } = this.#t;
    const parent = api.trace.setSpan(api.ROOT_CONTEXT, span);
    const child = tracer.startSpan(
      FENCE_SPAN,
      { kind: api.SpanKind.CLIENT, attributes: { [ATTR.dbSystemName]: REDIS } },
      parent,
    );
    const end = new OtelEnd(api, child);
    try {
      return await api.context.with(api.trace.setSpan(parent, child), fn);
    } catch (err) {
      end.failed(err);
      throw err;
    } finally {
      end.end();
    }
  }

  stamp(out: OutRecord[]): OutRecord[] {
    if (this.#span === undefined) return out;
    if (this.#headers === null) this.#headers = contextHeaders(this.#t.api, this.#span);
    const h = this.#headers;
    if (h === undefined) return out;
    this.#span.setAttribute(ATTR.outputs, out.length);
    return out.map((o) => stamped(o, h));
  }

  annotate(attributes: () => TraceAttributes): void {
    this.#span?.setAttributes(attributes() as Api.Attributes);
  }

  fenced(): void {
    this.#span?.setAttribute(ATTR.fenced, true);
  }

  failed(error: unknown): void {
    this.#end?.failed(error);
  }

  end(): void {
    this.#end?.end();
  }
}
