/**
 * The narrow tracing hooks the processor's and the handler's stages call. With tracing off every
 * call returns a shared no-op object and nothing of OpenTelemetry is ever loaded; with it on,
 * `load()` (awaited first thing in start(), before any connection) imports `@opentelemetry/api`
 * and the hooks make spans (otel.ts).
 */
import type { InRecord, OutRecord } from '../kafka/types.js';
import type { ResolvedTracing } from './options.js';
import { type ApiImporter, loadTracer } from './otel.js';

/** One batch's `process <topic>` span. Created unstarted, so a batch dropped at intake has none. */
export interface BatchTrace {
  /** Starts the span, linked to the creation contexts the first records carry. */
  begin(topic: string, partition: number, epoch: number, records: readonly InRecord[]): void;
  /** Runs one Redis step (the fence calls) in a child span. */
  redis<R>(fn: () => Promise<R>): Promise<R>;
  /** The records with this batch's context in their `traceparent`/`tracestate` headers. */
  stamp(out: OutRecord[]): OutRecord[];
  /** A newer owner holds the partition: the batch is dropped. */
  fenced(): void;
  failed(error: unknown): void;
  /** Ends the span; later calls do nothing. */
  end(): void;
}

/** One Kafka step's `send` span, linked to the spans of the batches it carries. */
export interface StepTrace {
  failed(error: unknown): void;
  end(): void;
}

/** One handler call's `process <topic>` span, parented to the record's creation context. */
export interface RecordTrace {
  /** Runs fn with the span as the active context (the user's own spans become its children). */
  run<R>(fn: () => Promise<R>): Promise<R>;
  stamp(out: OutRecord): OutRecord;
  failed(error: unknown): void;
  end(): void;
}

export interface StepBatch {
  readonly trace?: BatchTrace;
  /** Input records in the batch. */
  readonly count: number;
}

/** What a loaded tracer makes; the no-op one below when tracing is off. */
export interface Tracer {
  batch(): BatchTrace;
  step(batches: readonly StepBatch[], out: readonly OutRecord[], mode: string): StepTrace;
  record(record: InRecord, attempt: number | undefined): RecordTrace;
}

const NOOP_BATCH: BatchTrace = {
  begin: () => undefined,
  redis: (fn) => fn(),
  stamp: (out) => out,
  fenced: () => undefined,
  failed: () => undefined,
  end: () => undefined,
};
const NOOP_STEP: StepTrace = { failed: () => undefined, end: () => undefined };
const NOOP_RECORD: RecordTrace = {
  run: (fn) => fn(),
  stamp: (out) => out,
  failed: () => undefined,
  end: () => undefined,
};
const NOOP: Tracer = { batch: () => NOOP_BATCH, step: () => NOOP_STEP, record: () => NOOP_RECORD };

/** Who is tracing: written on every span. */
export interface TracingScope {
  readonly groupId: string;
}

export class Tracing implements Tracer {
  readonly #option: ResolvedTracing | undefined;
  readonly #scope: TracingScope;
  readonly #importer: ApiImporter | undefined;
  #tracer: Tracer = NOOP;

  constructor(option: ResolvedTracing | undefined, scope: TracingScope, importer?: ApiImporter) {
    this.#option = option;
    this.#scope = scope;
    this.#importer = importer;
  }

  get enabled(): boolean {
    return this.#option !== undefined;
  }

  /** Imports the API when tracing is on (RF_INVALID_OPTIONS when it is not installed); else nothing. */
  async load(): Promise<void> {
    if (this.#option === undefined || this.#tracer !== NOOP) return;
    this.#tracer = await loadTracer(this.#option, this.#scope, this.#importer);
  }

  batch(): BatchTrace {
    return this.#tracer.batch();
  }

  step(batches: readonly StepBatch[], out: readonly OutRecord[], mode: string): StepTrace {
    return this.#tracer.step(batches, out, mode);
  }

  record(record: InRecord, attempt: number | undefined): RecordTrace {
    return this.#tracer.record(record, attempt);
  }
}

/** Tracing off: what stages use when their context has no tracer. */
export const NO_TRACING: Tracer = NOOP;
