/**
 * Emit-final on Redis: which windows close at a record (the reference model's rule, Kafka Streams'
 * AbstractKStreamTimeWindowAggregateProcessor with an emit interval of 0), and the partition's index of
 * windows by close time that finds them across keys. The index lives in the partition's own slot
 * (src/store's CloseIndex: `rf:{<app>:<topic>:<p>}:close:<store>`, score the start, member `<start>:<key
 * bytes>`): a
 * batch adds its new windows (ZADD NX, idempotent) *before* its key calls and reads the closing range
 * after, so a window written by any key call is always found; a member whose window was never written
 * finalizes to nothing (the `final` effect gives null). Each closing window is then a `final` effect of
 * the record that closed it, in the window's own key call: pending and re-emitted like any result.
 */
import type { CloseIndex, IndexedWindow } from '../../store/index.js';
import { NO_TIMESTAMP } from '../model-io.js';
import { timeWindowsFor } from '../windows.js';

/** What a windowed count keeps per partition: stream time, the close time of its last final emission, the newest window start it wrote. */
export interface WindowClock {
  stream: number;
  emitted: number;
  store: number;
}

export function newClock(): WindowClock {
  return { stream: NO_TIMESTAMP, emitted: NO_TIMESTAMP, store: NO_TIMESTAMP };
}

/** Windows with a start in `[from, upper]` close now. */
export interface FinalRange {
  readonly from: number;
  readonly upper: number;
}

interface TimeSpec {
  readonly sizeMs: number;
  readonly advanceMs: number;
  readonly graceMs: number;
}

/**
 * The windows that close when the close time (stream time - grace) reaches `closeTime`, as the model
 * decides them (checked at every record; the store's retention, size + grace behind its newest window,
 * hides older windows): the range, or null. Moves `clock.emitted` when the model does.
 */
export function finalRange(spec: TimeSpec, clock: WindowClock, closeTime: number): FinalRange | null {
  const last = clock.emitted;
  if (last !== NO_TIMESTAMP && last >= closeTime) return null;
  const upper = closeTime - spec.sizeMs;
  if (upper < 0) return null;
  const lower = last === NO_TIMESTAMP ? 0 : Math.max(0, last - spec.sizeMs) + 1;
  if (last !== NO_TIMESTAMP && timeWindowsFor(spec, upper).join() === timeWindowsFor(spec, lower - 1).join())
    return null;
  clock.emitted = closeTime;
  return { from: Math.max(lower, clock.store - (spec.sizeMs + spec.graceMs)), upper };
}

/**
 * The highest window start no record after a commit can close again, given the clock at that commit:
 * every later range starts above `emitted - size` (windows up to it were emitted, or lost behind the
 * store's retention, which never runs ahead of the close time). -1: nothing yet.
 */
export function settledUpTo(sizeMs: number, clock: WindowClock | undefined): number {
  return clock === undefined || clock.emitted === NO_TIMESTAMP ? -1 : clock.emitted - sizeMs;
}

/** One window store's index: the windows to add and the ranges to read. */
export interface IndexWork {
  readonly store: number;
  readonly add: IndexedWindow[];
  readonly ranges: FinalRange[];
}

/**
 * Adds the batch's windows (NX), then reads what the ranges cover, by start and key bytes (the order
 * the model emits final results in). Returns, per window store id, the windows read.
 */
export async function syncIndexes(
  index: CloseIndex,
  topic: string,
  partition: number,
  work: readonly IndexWork[],
): Promise<Map<number, IndexedWindow[]>> {
  await Promise.all(
    work.filter((w) => w.add.length > 0).map((w) => index.add(topic, partition, w.store, w.add)),
  );
  const out = new Map<number, IndexedWindow[]>();
  await Promise.all(
    work.map(async (w) => {
      if (w.ranges.length === 0) return;
      const min = Math.min(...w.ranges.map((r) => r.from));
      const max = Math.max(...w.ranges.map((r) => r.upper));
      out.set(w.store, min > max ? [] : await index.dueAll(topic, partition, w.store, Math.max(0, min), max));
    }),
  );
  return out;
}

/** The windows of `indexed` a range closes, in order. */
export type { IndexedWindow };

export function closing(indexed: readonly IndexedWindow[], range: FinalRange): IndexedWindow[] {
  return indexed.filter((w) => w.start >= range.from && w.start <= range.upper);
}
