/**
 * Session reduce and aggregate on Redis: one record's fold. A key's sessions live in its session hash
 * (`<fence hash>:s:<store>`, field `<start>:<end>`, the serialized aggregate), as a session count's do,
 * read whole with the key (fold.ts). The record runs Kafka Streams' KStreamSessionWindowAggregate (the
 * model's SessionAggregate) on the sessions its effect's bounds find: the merger folds them from the
 * initializer, by (end, start), then the aggregator adds the record. The effect stays a `session` effect:
 * Redis merges the same sessions (the key's token is checked, so it sees what the read saw), removes the
 * merged-away ones and `set`s the merged session to the bytes computed here (`delete` when the aggregate
 * is null); a merged end below the close time is late there as here, nothing changes. Its result is the
 * session count's (bounds, sessions removed, value), so a REEMIT gives the same outputs.
 */
import type { Effect, SessionOp } from '../../store/index.js';
import { changelog } from '../model-io.js';
import { readStored } from '../threw.js';
import type { Arrival } from './arrive.js';
import type { KeyPart } from './note.js';

/** One session of a key: its bounds (inclusive) and serialized aggregate. */
export interface HeldSession {
  readonly start: number;
  readonly end: number;
  readonly value: Buffer;
}

/** A session aggregation's sessions of one key, as read and as folded so far: `<start>:<end>` -> session. */
export type SessionsHeld = Map<string, HeldSession>;

/** The held sessions of a store from a read's sessions (any order). */
export function sessionsHeld(
  sessions: readonly { readonly start: number; readonly end: number; readonly value: Buffer }[],
): SessionsHeld {
  return new Map(
    sessions.map((s) => [`${s.start}:${s.end}`, { start: s.start, end: s.end, value: s.value }]),
  );
}

/**
 * Folds one session arrival onto `held` (mutated) as Redis will apply its effect: sets the part's one
 * `session` effect's op (`set` the merged aggregate's bytes, or `delete`).
 *
 * @example
 * const held = sessionsHeld(answer.sessions.filter((s) => s.store === agg.valueStore));
 * foldSession(arrival, part, held); // { start, end }; part.effects[0].op: { op: 'set', value: <bytes> }
 */
export function foldSession(
  a: Arrival,
  part: KeyPart,
  held: SessionsHeld,
): { readonly start: number; readonly end: number } | null {
  const e = part.effects[0];
  if (e === undefined || e.kind !== 'session')
    throw new TypeError('a session arrival has one session effect');
  const p = a.agg.node;
  const ts = a.record.timestamp;
  const found: HeldSession[] = [];
  for (const [field, s] of [...held]) {
    if (s.end < e.dropBefore) held.delete(field);
    else if (s.end >= e.lowEnd && s.start <= e.highStart) found.push(s);
  }
  found.sort((x, y) => x.end - y.end || x.start - y.start);
  const merger = p.merger ?? ((_k: unknown, agg: unknown) => agg);
  let agg = p.initializer();
  let start = ts;
  let end = ts;
  for (const s of found) {
    agg = merger(
      a.record.key,
      agg,
      readStored(() => p.valueSerde.deserialize(s.value, changelog(p))),
    );
    start = Math.min(start, s.start);
    end = Math.max(end, s.end);
  }
  // late: Redis changes nothing but the sessions behind retention (dropped above too); the op is unused
  if (end < e.closeTime) return null;
  if (start !== ts || end !== ts) for (const s of found) held.delete(`${s.start}:${s.end}`);
  const next = p.aggregator(a.record.key, a.record.value, agg);
  const field = `${start}:${end}`;
  let op: SessionOp;
  if (next === null || next === undefined) {
    held.delete(field);
    op = { op: 'delete' };
  } else {
    const value = p.valueSerde.serialize(next, changelog(p));
    held.set(field, { start, end, value });
    op = { op: 'set', value };
  }
  part.effects[0] = { ...e, op } satisfies Effect;
  return op.op === 'set' ? { start, end } : null;
}
