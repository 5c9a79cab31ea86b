/**
 * Sliding windows' arithmetic, one home for the reference model (model-sliding.ts) and the Redis executor
 * (run/fold-sliding.ts): Kafka Streams' KStreamSlidingWindowAggregate (the reverse-fetch path its RocksDB
 * stores take) for one record of one key, given that key's windows as the store shows them; the range a
 * record's fetch covers, lateness and the store's retention. Windows are `[start, end]`, end = start +
 * time difference (d); a record makes its left window `[t - d, t]` and the right window `[t + 1, t + 1 +
 * d]` of itself and of the record before it when they hold records. Records earlier than d share the
 * window `[0, d]` (Kafka Streams' processEarly).
 */
import type { WindowBounds } from './model-io.js';

/** A window's aggregate as the processor handles it (Kafka Streams' ValueAndTimestamp). */
export interface SlideAgg {
  readonly value: unknown;
  readonly timestamp: number;
}

export interface SlideWindow {
  readonly start: number;
  readonly agg: SlideAgg;
}

export interface SlideSpec {
  readonly timeDifferenceMs: number;
  readonly graceMs: number;
}

/** What a record does to its key's windows. */
export interface SlideOps {
  /** The record's aggregator on an aggregate (null: none). */
  aggregate(old: unknown): unknown;
  /** The initializer's aggregate. */
  initial(): unknown;
  /** Writes a window's aggregate and timestamp (value null or undefined: the window is deleted). */
  put(start: number, value: unknown, timestamp: number): void;
}

/** The store's retention: 2 × difference + grace (Kafka Streams' sliding window store). */
export function slidingRetention(w: SlideSpec): number {
  return 2 * w.timeDifferenceMs + w.graceMs;
}

/** A record whose latest window `[t, t + d]` closed is late as a whole: that window (Kafka Streams names it), or null. */
export function slidingLate(w: SlideSpec, ts: number, closeTime: number): WindowBounds | null {
  return ts + w.timeDifferenceMs < closeTime ? { start: ts, end: ts + w.timeDifferenceMs } : null;
}

/** The window starts a record's fetch covers, `[from, to]`, before the store's retention hides any. */
export function slideRange(w: SlideSpec, ts: number): readonly [number, number] {
  const d = w.timeDifferenceMs;
  return ts < d ? [0, ts + 1] : [Math.max(0, ts - 2 * d), ts + 1];
}

/**
 * The lowest window start a fetch shows, given the store's time (its newest window start): the
 * retention hides older windows (the time-ordered store of emit-final has no +1 in its bound).
 */
export function slideVisibleFrom(w: SlideSpec, storeTime: number, emit: 'update' | 'final'): number {
  return storeTime - slidingRetention(w) + (emit === 'final' ? 0 : 1);
}

/** Windows starting below this can never be fetched again (the store time only moves forward). */
export function slidePruneBelow(w: SlideSpec, storeTime: number): number {
  return storeTime - slidingRetention(w);
}

/**
 * One record at `ts` (not late as a whole) with the close time after it, against its key's windows with
 * a start in {@link slideRange}, ascending, as the store shows them: every window it changes goes
 * through `ops.put`, in Kafka Streams' order. Returns the windows it was too late for.
 */
export function slide(
  w: SlideSpec,
  ts: number,
  closeTime: number,
  windows: readonly SlideWindow[],
  ops: SlideOps,
): WindowBounds[] {
  const missed: WindowBounds[] = [];
  const d = w.timeDifferenceMs;
  /** updateWindowAndForward: adds the record to the window unless the window closed. */
  const update = (start: number, agg: SlideAgg) => {
    const end = start + d;
    if (end < closeTime) {
      missed.push({ start, end });
      return;
    }
    const old = agg.value ?? null;
    ops.put(start, ops.aggregate(old), old === null ? ts : Math.max(ts, agg.timestamp));
  };
  /** createCurrentRecordRightWindow: the right window takes the aggregate as it is, unchecked. */
  const createRight = (agg: SlideAgg) => ops.put(ts + 1, agg.value, agg.timestamp);
  const initial = (): SlideAgg => ({ value: ops.initial(), timestamp: ts });
  if (ts < d) early(ts, windows, update, createRight, initial);
  else reverse(d, ts, windows, update, createRight, initial);
  return missed;
}

type Update = (start: number, agg: SlideAgg) => void;

function reverse(
  d: number,
  ts: number,
  windows: readonly SlideWindow[],
  update: Update,
  createRight: (agg: SlideAgg) => void,
  initial: () => SlideAgg,
): void {
  const starts = new Set<number>();
  let leftAgg: SlideAgg | null = null;
  let rightAgg: SlideAgg | null = null;
  let leftCreated = false;
  let rightCreated = false;
  let previous: number | null = null;
  for (const win of [...windows].reverse()) {
    starts.add(win.start);
    const end = win.start + d;
    if (win.start === ts + 1) rightCreated = true;
    else if (end > ts) {
      if (rightAgg === null) rightAgg = win.agg;
      update(win.start, win.agg);
    } else if (end === ts) {
      leftCreated = true;
      update(win.start, win.agg);
      if (win.agg.timestamp < ts) previous = win.agg.timestamp;
      else return; // Kafka Streams returns here: the record's windows all exist
    } else {
      leftAgg = win.agg;
      previous = win.agg.timestamp;
      break;
    }
  }
  if (previous !== null) {
    const prevRight = previous + 1;
    if (!starts.has(prevRight) && prevRight + d >= ts) update(prevRight, initial());
  }
  if (!leftCreated) {
    const notEmpty = previous !== null && ts - d <= previous && leftAgg !== null;
    update(ts - d, notEmpty && leftAgg !== null ? { value: leftAgg.value, timestamp: ts } : initial());
  }
  if (!rightCreated && rightAgg !== null && rightAgg.timestamp > ts) createRight(rightAgg);
}

function early(
  ts: number,
  windows: readonly SlideWindow[],
  update: Update,
  createRight: (agg: SlideAgg) => void,
  initial: () => SlideAgg,
): void {
  let combined: SlideWindow | null = null;
  let rightAgg: SlideAgg | null = null;
  let rightCreated = false;
  let previous: number | null = null;
  const starts = new Set<number>();
  for (const win of windows) {
    starts.add(win.start);
    if (win.start === 0) {
      combined = win;
      if (win.agg.timestamp < ts) previous = win.agg.timestamp;
    } else if (win.start <= ts) {
      rightAgg = win.agg;
      update(win.start, win.agg);
    } else if (win.start === ts + 1) rightCreated = true;
  }
  if (rightAgg === null && combined !== null && combined.agg.timestamp > ts) rightAgg = combined.agg;
  if (!rightCreated && rightAgg !== null && rightAgg.timestamp > ts) createRight(rightAgg);
  if (previous !== null && !starts.has(previous + 1)) update(previous + 1, initial());
  if (combined === null) update(0, initial());
  else update(0, combined.agg);
}
