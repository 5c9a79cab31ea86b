/**
 * Sliding windows on Redis: one record's fold. A key's sliding windows live in two window hashes of the
 * key (`<fence hash>:h:<s>`: field `<start>`, the serialized aggregate; `:h:<s+1>`: its timestamp), read
 * whole with the key (fold.ts). The record runs Kafka Streams' algorithm (../sliding.ts, the model's own)
 * on the windows a fetch would show (its range, and none hidden by the store's retention behind the
 * partition's store time), and every window it writes becomes a `field` effect pair; windows behind the
 * retention bound are pruned (`delete`); a leading `note` tells a REEMIT what the results are.
 *
 * The store time (the newest window start written in the partition, Kafka Streams' store stream time)
 * decides what the retention hides, so records are folded in offset order across keys, and a record
 * applied already (a replay) moves it by the windows its pending note names.
 */
import { RedfenceError } from '../../errors/index.js';
import type { Effect, PendingEntry, StoreOp } from '../../store/index.js';
import { changelog } from '../model-io.js';
import {
  type SlideSpec,
  type SlideWindow,
  slide,
  slidePruneBelow,
  slideRange,
  slideVisibleFrom,
} from '../sliding.js';
import { readStored } from '../threw.js';
import type { Arrival } from './arrive.js';
import type { WindowClock } from './final.js';
import { decodeNote, encodeNote, type KeyPart, partResults } from './note.js';

/** One sliding aggregation's windows of one key, as read and as folded so far: start -> bytes / timestamp. */
export interface SlidingHeld {
  readonly values: Map<number, Buffer>;
  readonly times: Map<number, number>;
}

/** The held windows from the read's two hashes (timestamps as numbers). */
export function slidingHeld(
  node: string,
  values: ReadonlyMap<number, Buffer>,
  times: ReadonlyMap<number, Buffer>,
): SlidingHeld {
  const t = new Map<number, number>();
  for (const [start, b] of times) {
    const n = Number(b.toString('latin1'));
    if (!Number.isSafeInteger(n))
      throw new RedfenceError(
        'RF_STATE_CORRUPT',
        `topology node ${node}: a window timestamp in Redis is not an integer`,
        {
          details: { node },
        },
      );
    t.set(start, n);
  }
  return { values: new Map(values), times: t };
}

/** The newest window start of a list, or -1. */
function newest(starts: Iterable<number>): number {
  let m = -1;
  for (const s of starts) m = Math.max(m, s);
  return m;
}

/**
 * Folds one sliding arrival onto `held` (mutated) with the partition's clock (its store time moved):
 * sets the part's effects. Returns the newest window start written (-1: none).
 */
export function foldSliding(
  a: Arrival,
  part: KeyPart,
  held: SlidingHeld,
  clock: WindowClock,
  expireAt: (windowEnd: number, graceMs: number) => number,
): number {
  const p = a.agg.node;
  const w = p.window as SlideSpec;
  const d = w.timeDifferenceMs;
  const r = a.record;
  const [from, to] = slideRange(w, r.timestamp);
  const lo = Math.max(from, slideVisibleFrom(w, clock.store, p.emit));
  const windows: SlideWindow[] = [...held.values]
    .filter(([start]) => start >= lo && start <= to)
    .sort(([x], [y]) => x - y)
    .map(([start, bytes]) => {
      const timestamp = held.times.get(start);
      if (timestamp === undefined)
        throw new RedfenceError(
          'RF_STATE_CORRUPT',
          `topology node ${p.name}: a window in Redis without its timestamp`,
          {
            details: { node: p.name },
          },
        );
      return {
        start,
        agg: { value: readStored(() => p.valueSerde.deserialize(bytes, changelog(p))), timestamp },
      };
    });
  const puts: { start: number; value: StoreOp; ts: number }[] = [];
  const missed = slide(w, r.timestamp, a.closeTime, windows, {
    aggregate: (old) => p.aggregator(r.key, r.value, old),
    initial: () => p.initializer(),
    put: (start, value, ts) => {
      const bytes =
        value === null || value === undefined ? null : p.valueSerde.serialize(value, changelog(p));
      if (bytes === null) held.values.delete(start);
      else held.values.set(start, bytes);
      held.times.set(start, ts);
      puts.push({ start, value: bytes === null ? { op: 'delete' } : { op: 'set', value: bytes }, ts });
      clock.store = Math.max(clock.store, start);
    },
  });
  // windows no fetch can show again (the store time only moves forward) are pruned, both hashes
  const bound = slidePruneBelow(w, clock.store);
  const pruned: { store: number; start: number }[] = [];
  for (const [store, m] of [
    [a.agg.valueStore, held.values],
    [a.agg.timeStore, held.times],
  ] as const)
    for (const start of [...m.keys()].sort((x, y) => x - y))
      if (start < bound) {
        m.delete(start);
        pruned.push({ store, start });
      }
  // the hash lives as long as its newest window (every field of the call carries that expiry)
  const expire = expireAt(Math.max(newest(held.times.keys()), r.timestamp - d) + d, w.graceMs);
  const field = (store: number, start: number, op: StoreOp): Effect => ({
    store,
    kind: 'field',
    start,
    expireAt: expire,
    op,
  });
  const note = encodeNote({
    puts: puts.map((x) => x.start),
    missed: missed.map((m) => m.start),
    prunes: pruned.length,
  });
  part.effects = [
    { store: a.agg.valueStore, kind: 'note', value: note },
    ...puts.flatMap((x) => [
      field(a.agg.valueStore, x.start, x.value),
      field(a.agg.timeStore, x.start, { op: 'set', value: String(x.ts) }),
    ]),
    ...pruned.map((x) => field(x.store, x.start, { op: 'delete' })),
  ];
  return newest(puts.map((x) => x.start));
}

/**
 * The newest window start a record applied already wrote (its pending note), -1 when none (no entry:
 * applied without results, or refused).
 */
export function appliedNewest(
  rec: { readonly offset: number; readonly node: string; readonly parts: readonly KeyPart[] },
  part: number,
  entry: PendingEntry | null | undefined,
): number {
  if (entry == null || 'deadLetter' in entry) return -1;
  // a prefix: foldAhead places a record before its final parts are known (they come last)
  const results = partResults(rec, entry.results, true)[part] ?? [];
  return newest(decodeNote(results[0], rec.node).puts);
}
