/**
 * The tracing hooks' types: what the processor's and the handler's stages call (src/telemetry/tracing.ts
 * gives the no-op ones and loads the OpenTelemetry ones, src/telemetry/otel.ts, only when tracing is on).
 */
import type { InRecord, OutRecord } from '../kafka/types.js';

/** One batch's `process <topic>` span. Created unstarted, so a batch dropped at intake has none. */
export interface BatchTrace {
  /** Starts the span, linked to the creation contexts the first records carry. */
  begin(topic: string, partition: number, epoch: number, records: readonly InRecord[]): void;
  /** Runs one Redis step (the fence calls) in a child span. */
  redis<R>(fn: () => Promise<R>): Promise<R>;
  /** The records with this batch's context in their `traceparent`/`tracestate` headers. */
  stamp(out: OutRecord[]): OutRecord[];
  /**
   * Adds attributes to the started span (the topology processor's: src/processor/topology/batch.ts).
   * Called only when tracing is on, so building them costs nothing otherwise.
   */
  annotate(attributes: () => TraceAttributes): void;
  /** A newer owner holds the partition: the batch is dropped. */
  fenced(): void;
  failed(error: unknown): void;
  /** Ends the span; later calls do nothing. */
  end(): void;
}

/** Span attributes (an OpenTelemetry `Attributes` fits): never a record's key or value. */
export type TraceAttributes = Readonly<
  Record<string, string | number | boolean | readonly string[] | readonly number[]>
>;

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

/** Who is tracing: written on every span. */
export interface TracingScope {
  readonly groupId: string;
}
