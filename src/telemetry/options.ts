/**
 * The `tracing` option of processors and handlers. Its types are redfence's own, shaped so an
 * OpenTelemetry `Tracer` fits, so the package's type declarations never name `@opentelemetry/api`
 * (an optional peer dependency).
 */
import { checkKeys, invalid, isObject, shown } from '../options/checks.js';

/** What redfence calls on a tracer: an `@opentelemetry/api` `Tracer` fits. */
export interface TracerLike {
  startSpan(name: string, options?: object, context?: unknown): unknown;
}

/**
 * Tracing with OpenTelemetry (docs/operations.md, "Traces"). `true`: spans from the global tracer
 * provider's `redfence` tracer; `{ tracer }`: from that tracer. Off by default (nothing is loaded).
 */
export type TracingOption = true | false | { tracer?: TracerLike };

/** The option after validation: undefined when tracing is off. */
export interface ResolvedTracing {
  readonly tracer: TracerLike | undefined;
}

const TRACING_NAMES: Record<'tracer', true> = { tracer: true };

export function tracingOption(v: unknown, what = 'processor'): ResolvedTracing | undefined {
  if (v === undefined || v === false) return undefined;
  if (v === true) return { tracer: undefined };
  if (!isObject(v)) throw invalid(`option "tracing" must be true, false or { tracer? }, got ${shown(v)}`);
  checkKeys('tracing', v, TRACING_NAMES, what);
  const tracer = v.tracer;
  if (tracer !== undefined && typeof (tracer as { startSpan?: unknown } | null)?.startSpan !== 'function')
    throw invalid('option "tracing.tracer" must be an OpenTelemetry Tracer (method startSpan missing)');
  return { tracer: tracer as TracerLike | undefined };
}
