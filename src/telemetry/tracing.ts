/**
 * The narrow tracing hooks the processor's and the handler's stages call. With tracing off every
 * call returns a shared no-op object and nothing of OpenTelemetry is ever loaded; with it on,
 * `load()` (awaited first thing in start(), before any connection) imports `@opentelemetry/api`
 * and the hooks make spans (otel.ts).
 */
import type { InRecord, OutRecord } from '../kafka/types.js';
import type { ResolvedTracing } from './options.js';
import { type ApiImporter, loadTracer } from './otel.js';
import type { BatchTrace, RecordTrace, StepBatch, StepTrace, Tracer, TracingScope } from './trace-types.js';

export type {
  BatchTrace,
  RecordTrace,
  StepBatch,
  StepTrace,
  TraceAttributes,
  Tracer,
  TracingScope,
} from './trace-types.js';

const NOOP_BATCH: BatchTrace = {
  begin: () => undefined,
  redis: (fn) => fn(),
  stamp: (out) => out,
  annotate: () => undefined,
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
