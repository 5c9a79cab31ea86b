/**
 * One record reaching an aggregation on Redis: what the reference model's TableAggregate,
 * TimeWindowAggregate and SessionAggregate decide before they touch their store (drops, the stream time,
 * the windows the record falls in and the ones it is too late for, a session's lookup bounds), the key
 * call effects that make the change, and the table updates the effects' results give. A count and its
 * timestamp (the largest record timestamp of the key or window, as Kafka Streams keeps it) are two
 * effects of the key call, `add 1` and `max t`: unwindowed on two stores (fields `v:<s>` and `v:<s+1>`
 * of the fence hash), in a time window on the two fields of its one key (`v` and `t`); a session count
 * is one `session` effect (`add 1`, merged in Redis), a session reduce or aggregate the same effect with the merged value set from a read
 * (fold-session.ts); a reduce or aggregate is a `set` of the serialized aggregate and of its timestamp, computed in
 * JS from a read (fold.ts fills them in: here they are placeholders of the right shape). A sliding-window
 * arrival's windows follow from the key's stored windows: its effects are all computed from the read
 * (fold-sliding.ts), here one placeholder note.
 */
import { RedfenceError } from '../../errors/index.js';
import type { Effect, EffectResult, SessionOp, SessionResult, StoreOp } from '../../store/index.js';
import { decodeKey, type ModelRecord, segmentInterval, type WindowBounds } from '../model-io.js';
import { slidingLate } from '../sliding.js';
import { firstWindowStart } from '../windows.js';
import { newClock, type WindowClock } from './final.js';
import { decodeNote } from './note.js';
import type { AggregatePlan } from './plan.js';
import { fenceKeyOf, storedAggregate, storedNumber } from './stored.js';

/** A record an aggregation takes: its fence key and, windowed, the windows it counts in and misses. */
export interface Arrival {
  readonly agg: AggregatePlan;
  readonly record: ModelRecord;
  /** The grouped key's bytes (the store key serde's): the fence key. */
  readonly fenceKey: Buffer;
  /** The starts of the windows it counts in, ascending; null: an unwindowed table. */
  readonly starts: readonly number[] | null;
  /** The windows it is too late for (closed by the stream time). */
  readonly missed: readonly WindowBounds[];
  /** Windowed: the close time (stream time - grace) after it; unwindowed: -1. */
  readonly closeTime: number;
  /** Session windows: the session effect's bounds (Kafka Streams' from the clock); else null. */
  readonly session: SessionBounds | null;
  /** Sliding windows, not late as a whole: its windows and missed ones follow from a read (fold-sliding.ts). */
  readonly sliding: boolean;
}

/** What a `session` effect needs besides its time (see the store's Effect). */
export interface SessionBounds {
  readonly lowEnd: number;
  readonly highStart: number;
  readonly closeTime: number;
  readonly dropBefore: number;
}

/** An arrival late for no window (shared: an arrival's `missed` is never changed). */
const NONE_MISSED: readonly WindowBounds[] = Object.freeze([]);

/** The aggregation's clock in `clocks`, made (nothing seen yet) when it has none. */
export function clockOf(clocks: Map<string, WindowClock>, name: string): WindowClock {
  let clock = clocks.get(name);
  if (clock === undefined) {
    clock = newClock();
    clocks.set(name, clock);
  }
  return clock;
}

/**
 * Decides a record at a count (clocks: the partition's window clock per aggregation, moved here as the
 * model moves its stream time and store time): a drop reason, or the arrival.
 */
export function arrive(
  agg: AggregatePlan,
  r: ModelRecord,
  clocks: Map<string, WindowClock>,
): { readonly drop: 'null-key' | 'null-value' } | Arrival {
  const p = agg.node;
  if (r.key === null) return { drop: 'null-key' };
  const fenceKey = fenceKeyOf(p, r.key);
  const w = p.window;
  if (w === null) {
    // KStreamAggregate drops null values; time windows count them.
    if (r.value === null) return { drop: 'null-value' };
    return {
      agg,
      record: r,
      fenceKey,
      starts: null,
      missed: NONE_MISSED,
      closeTime: -1,
      session: null,
      sliding: false,
    };
  }
  const clock = clockOf(clocks, p.name);
  if (w.kind === 'sliding') {
    // SlidingAggregate: null values dropped; the store time moves in the fold (it follows the windows written)
    if (r.value === null) return { drop: 'null-value' };
    clock.stream = Math.max(clock.stream, r.timestamp);
    const closeTime = clock.stream - w.graceMs;
    const late = slidingLate(w, r.timestamp, closeTime);
    const missed = late === null ? NONE_MISSED : [late];
    return { agg, record: r, fenceKey, starts: [], missed, closeTime, session: null, sliding: late === null };
  }
  if (w.kind === 'session') {
    // SessionAggregate: sessions ending at or after ts - gap (none behind the store's retention, gap +
    // grace behind its newest session end, `clock.store`) and starting at or before ts + gap merge.
    const ts = r.timestamp;
    clock.stream = Math.max(clock.stream, ts);
    const closeTime = clock.stream - w.graceMs - w.inactivityGapMs;
    const retention = w.inactivityGapMs + w.graceMs;
    const floor = clock.store - retention + 1;
    // emit final keeps what the lookup hides until it is final: only the dropped segments go (the model's prune)
    const interval = segmentInterval(retention);
    const dropBefore =
      p.emit === 'final' ? Math.trunc((clock.store - retention) / interval) * interval + 0 : floor;
    const session = {
      lowEnd: Math.max(ts - w.inactivityGapMs, floor),
      highStart: ts + w.inactivityGapMs,
      closeTime,
      dropBefore,
    };
    // the merged session ends at ts or at a stored end (<= clock.store); a late one changes nothing. With
    // ts at or past the close time it is not late; below it and above clock.store it is late for sure
    // (every stored end is below the close time too): the store time stays, as the model's (a tick moves
    // the stream time past the store time, src/topology/tick.ts)
    if (ts >= closeTime) clock.store = Math.max(clock.store, ts);
    return {
      agg,
      record: r,
      fenceKey,
      starts: null,
      missed: NONE_MISSED,
      closeTime,
      session,
      sliding: false,
    };
  }
  if (w.kind !== 'tumbling' && w.kind !== 'hopping')
    throw new TypeError('planTopology admits time and session windows only');
  const ts = r.timestamp;
  clock.stream = Math.max(clock.stream, ts);
  const closeTime = clock.stream - w.graceMs;
  // the windows it falls in (timeWindowsFor's, walked without its array); most records miss none, and
  // a tumbling window's record falls in one (a list of one made as such: grown by push, it reserves 16 more)
  let starts: number[] | null = null;
  let missed: WindowBounds[] | null = null;
  for (let start = firstWindowStart(w, ts); start <= ts; start += w.advanceMs) {
    const end = start + w.sizeMs;
    if (end <= closeTime) {
      missed ??= [];
      missed.push({ start, end });
    } else {
      if (starts === null) starts = [start];
      else starts.push(start);
      clock.store = Math.max(clock.store, start);
    }
  }
  starts ??= [];
  return {
    agg,
    record: r,
    fenceKey,
    starts,
    missed: missed ?? NONE_MISSED,
    closeTime,
    session: null,
    sliding: false,
  };
}

/**
 * A reduce or aggregate, or any sliding-window aggregation, or any session aggregation with
 * emit('final') (its sessions must be known before the calls, final-session.ts): its effects are
 * computed in JS from a read (fold.ts).
 */
export function folds(agg: AggregatePlan): boolean {
  const w = agg.node.window;
  return (
    agg.node.op !== 'count' || w?.kind === 'sliding' || (w?.kind === 'session' && agg.node.emit === 'final')
  );
}

/** A count's op (shared: an effect's op is never changed, a fold replaces the effect). */
const ADD_ONE: StoreOp = Object.freeze({ op: 'add', by: 1 });

/** Placeholder op of a folded effect, replaced before the call (a replayed record keeps it: never applied). */
const UNFOLDED: StoreOp = { op: 'delete' };

/**
 * The arrival's effects: per window (or once, unwindowed) `add 1` on the count and `max` on the
 * timestamp (a window's: its key's `time` field); a session count's `session` effect; a reduce or
 * aggregate's value and timestamp effects with placeholder ops (fold.ts sets them).
 */
export function effectsOf(a: Arrival, expireAt: (windowEnd: number, graceMs: number) => number): Effect[] {
  const { valueStore, timeStore, node } = a.agg;
  const ts = a.record.timestamp;
  const js = folds(a.agg);
  if (a.sliding) return [{ store: valueStore, kind: 'note', value: '' }];
  if (a.session !== null) {
    const w = node.window as { inactivityGapMs: number; graceMs: number };
    const at = expireAt(ts + w.inactivityGapMs, w.graceMs);
    // a reduce or aggregate: the merged value is computed from a read (fold-session.ts)
    const op: SessionOp = js ? { op: 'delete' } : { op: 'add', by: 1 };
    return [{ store: valueStore, kind: 'session', time: ts, ...a.session, expireAt: at, op }];
  }
  const valueOp: StoreOp = js ? UNFOLDED : ADD_ONE;
  const timeOp: StoreOp = js ? UNFOLDED : { op: 'max', value: ts };
  if (a.starts === null)
    return [
      { store: valueStore, kind: 'kv', op: valueOp },
      { store: timeStore, kind: 'kv', op: timeOp },
    ];
  const w = node.window as { sizeMs: number; graceMs: number };
  const starts = a.starts;
  // sized up front (a list grown by push reserves room for 16 more); none for a sliding record late as a whole
  const out: Effect[] = new Array(2 * starts.length);
  for (let i = 0; i < starts.length; i++) {
    const start = starts[i] as number;
    const at = expireAt(start + w.sizeMs, w.graceMs);
    out[2 * i] = { store: valueStore, kind: 'window', start, expireAt: at, op: valueOp };
    out[2 * i + 1] = { store: valueStore, kind: 'window', field: 'time', start, expireAt: at, op: timeOp };
  }
  return out;
}

/** How many table updates a time window or unwindowed arrival gives ({@link updateOf}): one per window, or one. */
export function updateCount(a: Arrival): number {
  return a.starts === null ? 1 : a.starts.length;
}

/**
 * The arrival's `i`th table update from its effect results (key: the record's key, windowed:
 * `{ key, start, end }`), one at a time: walked on as it is made, without a list of them.
 */
export function updateOf(a: Arrival, results: readonly EffectResult[], i: number): ModelRecord {
  const name = a.agg.node.name;
  const value = storedAggregate(a.agg, results[2 * i]);
  const timestamp = storedNumber(results[2 * i + 1], name);
  if (a.starts === null) return { key: a.record.key, value, timestamp };
  const start = a.starts[i] as number;
  const size = (a.agg.node.window as { sizeMs: number }).sizeMs;
  return { key: { key: a.record.key, start, end: start + size }, value, timestamp };
}

/**
 * A sliding arrival's outcome from its part's results (`[note, value, timestamp, ...]`, fold-sliding.ts):
 * an update per window written, in order (value null: the window was deleted), and the windows missed.
 */
export function slidingOutcome(
  a: Arrival,
  results: readonly EffectResult[],
): { readonly updates: ModelRecord[]; readonly missed: WindowBounds[] } {
  const p = a.agg.node;
  const d = (p.window as { timeDifferenceMs: number }).timeDifferenceMs;
  const note = decodeNote(results[0], p.name);
  const updates = note.puts.map((start, i) => {
    const v = results[1 + 2 * i];
    return {
      key: { key: a.record.key, start, end: start + d },
      value: v === null || v === undefined ? null : storedAggregate(a.agg, v),
      timestamp: storedNumber(results[2 + 2 * i], p.name),
    };
  });
  return { updates, missed: note.missed.map((start) => ({ start, end: start + d })) };
}

/**
 * A session effect's outcome: late (the merged bounds, as the model reports them), or the updates
 * (a tombstone per merged-away session, then the merged session, null when a reduce or aggregate gave
 * none; each timestamped with its end).
 */
export function sessionOutcome(
  a: Arrival,
  result: EffectResult | undefined,
): { readonly late: WindowBounds } | { readonly updates: ModelRecord[] } {
  const s = result as SessionResult | null | undefined;
  if (s === null || s === undefined || Buffer.isBuffer(s))
    throw new RedfenceError(
      'RF_BAD_REPLY',
      `topology node ${a.agg.node.name}: a session effect without a session result`,
    );
  if (s.late) return { late: { start: s.start, end: s.end } };
  const key = a.record.key;
  const updates: ModelRecord[] = s.removed.map((x) => ({
    key: { key, start: x.start, end: x.end },
    value: null,
    timestamp: x.end,
  }));
  updates.push({
    key: { key, start: s.start, end: s.end },
    value: storedAggregate(a.agg, s.value ?? undefined),
    timestamp: s.end,
  });
  return { updates };
}

/**
 * The effects that take a closing window's final result: its value and its timestamp (the two fields of
 * its key, taken by one record: once; a sliding window's: its fields of the key's two window hashes); a
 * session's (`end` given): its value (its timestamp is its end).
 */
export function finalEffects(agg: AggregatePlan, w: { start: number; end?: number }): Effect[] {
  if (w.end !== undefined) return [{ store: agg.valueStore, kind: 'final', start: w.start, end: w.end }];
  if (agg.node.window?.kind === 'sliding')
    // a sliding window's two fields, in the key's two window hashes (final-sliding.ts)
    return [
      { store: agg.valueStore, kind: 'final', start: w.start, hash: true },
      { store: agg.timeStore, kind: 'final', start: w.start, hash: true, field: 'time' },
    ];
  return [
    { store: agg.valueStore, kind: 'final', start: w.start },
    { store: agg.valueStore, kind: 'final', start: w.start, field: 'time' },
  ];
}

/**
 * A closing window's final update, or null when it holds nothing (never written, deleted, or already
 * final; a session: merged away or deleted).
 */
export function finalUpdate(
  agg: AggregatePlan,
  window: { key: Buffer; start: number; end?: number },
  results: readonly EffectResult[],
): ModelRecord | null {
  if (results[0] === null || results[0] === undefined) return null;
  const p = agg.node;
  const key = decodeKey(p, window.key);
  if (window.end !== undefined)
    return {
      key: { key, start: window.start, end: window.end },
      value: storedAggregate(agg, results[0]),
      timestamp: window.end,
    };
  const size =
    p.window?.kind === 'sliding' ? p.window.timeDifferenceMs : (p.window as { sizeMs: number }).sizeMs;
  return {
    key: { key, start: window.start, end: window.start + size },
    value: storedAggregate(agg, results[0]),
    timestamp: storedNumber(results[1], p.name),
  };
}
