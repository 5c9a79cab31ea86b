/**
 * Writing events into the outbox inside the caller's own transaction: the event is committed (or rolled
 * back) with the caller's other writes. The outbox's trigger gives each row its publication order; the
 * writer only inserts the Debezium columns (the raw SQL in docs/outbox.md does the same).
 */
import { randomUUID } from 'node:crypto';
import { RedfenceError } from '../errors/index.js';
import { UUID } from './event-id.js';
import type { Queryable } from './pg.js';
import { type OutboxLocation, outboxNames } from './schema.js';

export interface OutboxEvent {
  /** Routes the event: the topic comes from it (`outbox.event.${aggregatetype}` by default). */
  readonly aggregateType: string;
  /** The Kafka key; the unit of order (events of one aggregate are published in commit order). */
  readonly aggregateId: string;
  /** The event type: the `type` header. */
  readonly type: string;
  /** Any JSON value (stored as jsonb, published as its JSON text); null or undefined: a null value. */
  readonly payload?: unknown;
  /** Extra Kafka headers (string values). */
  readonly headers?: Readonly<Record<string, string>>;
  /** The event id (the `id` header consumers deduplicate on); default a random UUID. */
  readonly id?: string;
}

function bad(message: string): RedfenceError {
  return new RedfenceError('RF_INVALID_ARGUMENT', message);
}

function row(e: OutboxEvent, i: number): unknown[] {
  const at = `events[${i}]`;
  if (typeof e !== 'object' || e === null) throw bad(`${at} must be an object`);
  for (const f of ['aggregateType', 'aggregateId', 'type'] as const)
    if (typeof e[f] !== 'string' || e[f] === '') throw bad(`${at}.${f} must be a non-empty string`);
  if (e.id !== undefined && (typeof e.id !== 'string' || !UUID.test(e.id)))
    throw bad(`${at}.id must be a UUID`);
  if (e.headers !== undefined) {
    if (typeof e.headers !== 'object' || e.headers === null || Array.isArray(e.headers))
      throw bad(`${at}.headers must be an object of strings`);
    for (const [k, v] of Object.entries(e.headers))
      if (typeof v !== 'string') throw bad(`${at}.headers.${k} must be a string`);
  }
  let payload: string | null = null;
  if (e.payload !== undefined && e.payload !== null) {
    try {
      payload = JSON.stringify(e.payload);
    } catch (err) {
      throw bad(`${at}.payload cannot be turned into JSON: ${(err as Error).message}`);
    }
    if (payload === undefined) throw bad(`${at}.payload cannot be turned into JSON`);
  }
  return [
    e.id ?? randomUUID(),
    e.aggregateType,
    e.aggregateId,
    e.type,
    payload,
    e.headers === undefined ? null : JSON.stringify(e.headers),
  ];
}

/**
 * Inserts events into the outbox with `client`, which must be inside the caller's transaction (BEGIN
 * ... COMMIT): the events become visible to the relay when, and only if, that transaction commits.
 * Returns the events' ids in order. Writers of one aggregate wait for each other's commit from here on
 * (the trigger's per-aggregate lock), which is what keeps that aggregate's events in commit order.
 */
export async function enqueue(
  client: Queryable,
  events: OutboxEvent | readonly OutboxEvent[],
  location: OutboxLocation = {},
): Promise<string[]> {
  const list = Array.isArray(events) ? (events as readonly OutboxEvent[]) : [events as OutboxEvent];
  if (list.length === 0) return [];
  const n = outboxNames(location);
  const rows = list.map(row);
  const cols = [0, 1, 2, 3, 4, 5].map((c) => rows.map((r) => r[c]));
  // One statement for any number of events: unnest keeps their order (ordinality), so pos follows it.
  await client.query(
    `INSERT INTO ${n.table} (id, aggregatetype, aggregateid, type, payload, headers)
     SELECT e.id, e.aggregatetype, e.aggregateid, e.type, e.payload, e.headers
     FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::jsonb[], $6::jsonb[])
     WITH ORDINALITY AS e(id, aggregatetype, aggregateid, type, payload, headers, n) ORDER BY e.n`,
    cols,
  );
  return rows.map((r) => r[0] as string);
}
