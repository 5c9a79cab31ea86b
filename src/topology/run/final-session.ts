/**
 * Emit-final of session windows on Redis. The model (Kafka Streams' KStreamSessionWindowAggregate with
 * emitStrategy onWindowClose) emits, whenever the close time (stream - grace - gap) moves, every session
 * ending before it, once, by (end, start, key bytes), skipping those in the store's dropped segments.
 * A session's bounds follow from the key's stored sessions, so such an aggregation is always folded in
 * JS (fold-session.ts, a count too), and the batch's sessions are known before any key call: they go
 * into the partition's close index (src/store's CloseIndex, ZADD NX, score the session end, member
 * `<end>:<start, 16 digits>:<key bytes>`), the closing ranges are read after, and each closing session
 * is a `final` effect `{ start, end }` (its value in the key's session hash, or null when it was merged
 * away since) in the record that closed it: pending and re-emitted like any result.
 */
import type { IndexedWindow } from '../../store/index.js';
import { NO_TIMESTAMP, segmentInterval } from '../model-io.js';
import type { FinalRange, WindowClock } from './final.js';

/** A session the index names: its key's bytes and bounds. */
export interface IndexedSession {
  readonly key: Buffer;
  readonly start: number;
  readonly end: number;
}

interface SessionSpec {
  readonly inactivityGapMs: number;
  readonly graceMs: number;
}

/**
 * The session ends that close when the close time reaches `closeTime` (the model's emitFinal, after the
 * record's put: `clock.store` is its store time): the range of ends, or null. Moves `clock.emitted`.
 *
 * @example
 * const range = sessionFinalRange({ inactivityGapMs: 6, graceMs: 4 }, clock, 30); // ends in [from, 29]
 */
export function sessionFinalRange(
  spec: SessionSpec,
  clock: WindowClock,
  closeTime: number,
): FinalRange | null {
  const last = clock.emitted;
  if (last !== NO_TIMESTAMP && last >= closeTime) return null;
  const upper = closeTime - 1;
  if (upper < 0) return null;
  const lower = Math.max(0, last);
  if (upper < lower) return null;
  clock.emitted = closeTime;
  // the time-ordered store drops whole segments behind its retention (at a put): none of theirs is emitted
  const retention = spec.inactivityGapMs + spec.graceMs;
  const interval = segmentInterval(retention);
  const minLiveSegment = Math.trunc((clock.store - retention) / interval);
  return { from: Math.max(lower, minLiveSegment * interval), upper };
}

/** The session ends no record after a commit can close again, given the clock at that commit (-1: none). */
export function sessionsSettledUpTo(clock: WindowClock | undefined): number {
  return clock === undefined || clock.emitted === NO_TIMESTAMP ? -1 : clock.emitted - 1;
}

/** A session as the close index holds it: score (`start` of IndexedWindow) its end. */
export function sessionEntry(s: IndexedSession): IndexedWindow {
  return { start: s.end, key: Buffer.concat([Buffer.from(`${String(s.start).padStart(16, '0')}:`), s.key]) };
}

/** The session an index entry names. */
export function sessionOfEntry(w: IndexedWindow): IndexedSession {
  return { key: w.key.subarray(17), start: Number(w.key.subarray(0, 16).toString('latin1')), end: w.start };
}
