/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/) in Kafka record headers, pure: no
 * OpenTelemetry import. `traceparent` is `<version>-<trace-id>-<parent-id>-<flags>` in lowercase hex;
 * an all-zero id, version `ff`, a version-00 header of another length or anything malformed is no
 * context at all (the record is then processed as if it carried none). A later version is read by its
 * first four fields, as the specification asks. `tracestate` is passed through as text (the API
 * checks its members).
 */
import type { Headers } from '../kafka/types.js';
import { TRACEPARENT, TRACESTATE } from './semconv.js';

export interface RemoteContext {
  readonly traceId: string;
  readonly spanId: string;
  readonly traceFlags: number;
  /** The `tracestate` header as received (several headers joined by commas), if any. */
  readonly traceState?: string;
}

const TRACEPARENT_RE = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

function text(v: Buffer | string): string {
  return typeof v === 'string' ? v : v.toString('latin1');
}

/** The context a record's headers carry, or undefined. */
export function extractContext(headers: Headers | undefined): RemoteContext | undefined {
  const raw = headers?.[TRACEPARENT];
  if (raw === undefined) return undefined;
  // repeated: the last one wins, as Kafka clients' lastHeader()
  const last = Array.isArray(raw) ? raw.at(-1) : raw;
  if (last === undefined) return undefined;
  const tp = parseTraceparent(text(last).trim());
  if (tp === undefined) return undefined;
  const ts = headers?.[TRACESTATE];
  const state = ts === undefined ? '' : (Array.isArray(ts) ? ts : [ts]).map(text).join(',').trim();
  return state === '' ? tp : { ...tp, traceState: state };
}

export function parseTraceparent(value: string): RemoteContext | undefined {
  const m = TRACEPARENT_RE.exec(value);
  if (m === null) return undefined;
  const [, version, traceId, spanId, flags, rest] = m;
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined;
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return undefined;
  return {
    traceId: traceId as string,
    spanId: spanId as string,
    traceFlags: Number.parseInt(flags as string, 16),
  };
}

/** The `traceparent` value for a span context (always version 00). */
export function formatTraceparent(traceId: string, spanId: string, traceFlags: number): string {
  return `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}
