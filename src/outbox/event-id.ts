/**
 * The consumer side of the outbox: every record the relay publishes carries the row's `id` (a uuid) as
 * header `id`, and a relay that crashes between the acks and the mark (at-least-once) publishes it again.
 * `eventId` reads that header, so a handler deduplicates on it: `defineHandler({ id: eventId, ... })`
 * makes `ctx.id` the event id, and `ctx.transaction` (PostgreSQL) or `ctx.once` (Redis) skips a record
 * whose id is already processed (docs/outbox.md, "Consuming outbox events").
 */
import { RedfenceError } from '../errors/index.js';
import type { Headers } from '../kafka/types.js';

/**
 * An outbox row id (and event id): a UUID in its text form, either case.
 *
 * ```ts
 * UUID.test('6f1c2a9e-0d4b-4c1e-9a57-3b2f8e1d7c40'); // true
 * ```
 */
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The outbox event id of a record (its `id` header); RF_INVALID_ARGUMENT when it has none. */
export function eventId(record: {
  readonly headers?: Headers;
  readonly topic?: string;
  readonly offset?: number;
}): string {
  const raw = record.headers?.id;
  const value = Array.isArray(raw) ? raw[0] : raw;
  const text =
    value === undefined ? undefined : Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
  if (text === undefined || !UUID.test(text)) {
    const where = record.topic === undefined ? '' : ` (${record.topic} offset ${record.offset})`;
    throw new RedfenceError(
      'RF_INVALID_ARGUMENT',
      `record${where} has ${text === undefined ? 'no' : 'a malformed'} "id" header: not published by the outbox relay`,
    );
  }
  return text.toLowerCase();
}
