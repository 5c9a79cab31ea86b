/** OpenTelemetry tracing (docs/operations.md, "Traces"): the option's types and the pinned names. */
export { type ResolvedTracing, type TracerLike, type TracingOption, tracingOption } from './options.js';
export { ATTR as TRACE_ATTRIBUTES, MAX_LINKS, SEMCONV_VERSION, TRACEPARENT, TRACESTATE } from './semconv.js';
export { NO_TRACING, Tracing } from './tracing.js';
export { extractContext, formatTraceparent, parseTraceparent, type RemoteContext } from './w3c.js';
