/**
 * Emit-final of sliding windows on Redis. The model (Kafka Streams' KStreamSlidingWindowAggregate with
 * emitStrategy onWindowClose) emits, after each record that is neither late as a whole nor earlier than
 * the time difference d, when the close time (stream - grace) moved, every window whose end is before
 * it, once, by (start, key bytes), timestamped with its newest record, skipping windows the store's
 * retention hides (start below the store time - (2d + grace), the store time after the record's puts).
 * A window's start follows from the key's fold, so the batch's sliding keys are read and folded before
 * any call (fold-ahead.ts' foldAhead): the windows the folds write go into the partition's close index (score
 * the start, member `<start>:<key bytes>`, as time windows), and the store time after each record
 * bounds its closing range from below. Each closing window is then two `final` effects of the record
 * that closed it in the window's own key call (its value and its timestamp, the fields `<start>` of the
 * key's two window hashes, null when the window was deleted or pruned): pending and re-emitted like any
 * result. The value's final marks the window (`f<start>` in the value hash, gone with the value), so a
 * window's result comes once; the ranges never meet a window twice anyway, and a closed window never changes (a record
 * updates only windows ending at or after the close time, and its right window starts after it).
 */
import { NO_TIMESTAMP } from '../model-io.js';
import { type SlideSpec, slideVisibleFrom } from '../sliding.js';
import type { FinalRange, WindowClock } from './final.js';

/**
 * The window starts that close when the close time reaches `closeTime`, before the retention bound
 * (which needs the store time after the record's fold: {@link slidingFinalFrom}), or null. Moves
 * `clock.emitted` as the model moves its last emit close time.
 *
 * @example
 * const range = slidingFinalRange({ timeDifferenceMs: 10, graceMs: 5 }, clock, 40); // starts up to 29
 */
export function slidingFinalRange(spec: SlideSpec, clock: WindowClock, closeTime: number): FinalRange | null {
  const last = clock.emitted;
  if (last !== NO_TIMESTAMP && last >= closeTime) return null;
  const d = spec.timeDifferenceMs;
  const upper = closeTime - d - 1;
  if (upper < 0) return null;
  clock.emitted = closeTime;
  return { from: last === NO_TIMESTAMP ? 0 : Math.max(0, last - d), upper };
}

/** The range with the store's retention bound, given the store time after the closing record's fold. */
export function slidingFinalFrom(spec: SlideSpec, range: FinalRange, storeTime: number): FinalRange {
  return { from: Math.max(range.from, slideVisibleFrom(spec, storeTime, 'final')), upper: range.upper };
}

/**
 * The highest window start no record after a commit can close again, given the clock at that commit
 * (every later range starts at `emitted - d` or above). -1: nothing yet.
 */
export function slidingSettledUpTo(spec: SlideSpec, clock: WindowClock | undefined): number {
  return clock === undefined || clock.emitted === NO_TIMESTAMP
    ? -1
    : clock.emitted - spec.timeDifferenceMs - 1;
}
