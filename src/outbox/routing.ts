/**
 * From an outbox row to a Kafka record, as Debezium's Outbox Event Router does it: the topic from
 * `aggregatetype` through a template, the key from `aggregateid`, the value the payload's JSON text,
 * headers `id` and `type` plus the row's own. `preflight` refuses, before anything is produced, what
 * Kafka would refuse for this record alone (a bad topic name, a missing topic, a record over the size
 * limit): such a row counts an attempt and is parked after the last one.
 */
import { RedfenceError } from '../errors/index.js';
import type { OutRecord } from '../kafka/types.js';

// biome-ignore lint/suspicious/noTemplateCurlyInString: the placeholder is the template's, replaced per row
export const DEFAULT_TOPIC_TEMPLATE = 'outbox.event.${aggregatetype}';
const PLACEHOLDER = /\$\{(aggregatetype|type)\}/g;
const TOPIC = /^[a-zA-Z0-9._-]{1,249}$/;

/** A row as the relay reads it. */
export interface OutboxRow {
  readonly id: string;
  readonly pos: string;
  readonly aggregatetype: string;
  readonly aggregateid: string;
  readonly type: string;
  /** The payload's JSON text, or null. */
  readonly payload: string | null;
  readonly headers: unknown;
  readonly attempts: number;
}

/** Checks a template: only `${aggregatetype}` and `${type}` are replaced; what is left must be a topic name's characters. */
export function checkTopicTemplate(template: string): string {
  const rest = template.replace(PLACEHOLDER, 'x');
  if (!TOPIC.test(rest) || rest.includes('${'))
    throw new RedfenceError(
      'RF_INVALID_OPTIONS',
      `topicTemplate must be a topic name with \${aggregatetype} or \${type} placeholders, got ${JSON.stringify(template)}`,
    );
  return template;
}

export function topicOf(template: string, row: Pick<OutboxRow, 'aggregatetype' | 'type'>): string {
  return template.replace(PLACEHOLDER, (_, f: string) => (f === 'type' ? row.type : row.aggregatetype));
}

function rowHeaders(row: OutboxRow): Record<string, string> {
  const out: Record<string, string> = {};
  const h = row.headers;
  if (typeof h === 'object' && h !== null && !Array.isArray(h))
    for (const [k, v] of Object.entries(h as Record<string, unknown>))
      if (v !== null && v !== undefined) out[k] = typeof v === 'string' ? v : JSON.stringify(v);
  // The row's id and type win over headers of the same name: consumers deduplicate on `id`.
  out.id = row.id;
  out.type = row.type;
  return out;
}

export function recordOf(template: string, row: OutboxRow): OutRecord {
  return {
    topic: topicOf(template, row),
    key: row.aggregateid,
    value: row.payload,
    headers: rowHeaders(row),
  };
}

/** Bytes a record takes on the wire, near enough (key, value, headers, per-record overhead). */
export function recordBytes(r: OutRecord): number {
  let n = 64 + Buffer.byteLength(String(r.key ?? '')) + (r.value === null ? 0 : Buffer.byteLength(r.value));
  for (const [k, v] of Object.entries(r.headers ?? {}))
    n += 8 + Buffer.byteLength(k) + Buffer.byteLength(String(v));
  return n;
}

export interface PreflightContext {
  readonly maxMessageBytes: number;
  /** Whether the topic exists (cached by the caller). */
  exists(topic: string): boolean;
}

/** Why a record cannot be produced, or undefined if it can be tried. */
export function preflight(r: OutRecord, ctx: PreflightContext): string | undefined {
  if (!TOPIC.test(r.topic) || r.topic === '.' || r.topic === '..')
    return `topic ${JSON.stringify(r.topic)} is not a valid Kafka topic name`;
  const bytes = recordBytes(r);
  if (bytes > ctx.maxMessageBytes)
    return `record of ${bytes} bytes is over the limit of ${ctx.maxMessageBytes} bytes (maxMessageBytes)`;
  if (!ctx.exists(r.topic)) return `topic ${JSON.stringify(r.topic)} does not exist`;
  return undefined;
}

/** Why rows were parked, as a bounded metric label (never the free text of the reason). */
export type ParkReason = 'topic-missing' | 'topic-invalid' | 'too-large' | 'kafka-refused' | 'other';

/** The class of a parked row's reason (the texts of {@link preflight} and the relay's produce errors). */
export function parkReason(why: string): ParkReason {
  if (/^topic .* does not exist$/.test(why)) return 'topic-missing';
  if (/is not a valid Kafka topic name$/.test(why)) return 'topic-invalid';
  if (/is over the limit of \d+ bytes/.test(why)) return 'too-large';
  if (/^Kafka refused the record/.test(why)) return 'kafka-refused';
  return 'other';
}

/** What to do about each class, said in the log line. */
export const PARK_FIX: Readonly<Record<ParkReason, string>> = {
  'topic-missing': 'create the topic (or fix --topic-template)',
  'topic-invalid': 'fix the aggregate type or --topic-template so the topic name is valid',
  'too-large': "shrink the payload, or raise maxMessageBytes and the topic's max.message.bytes",
  'kafka-refused': 'see the reason: the broker refuses these records',
  other: 'see the reason (redfence outbox status)',
};
