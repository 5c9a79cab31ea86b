/**
 * The sliding-window topologies the executor tests run (run-sliding.test.ts, run-equals-model.test.ts).
 */
import { type BuiltTopology, SlidingWindows, serdes, topology } from '../../src/topology/index.js';

const s = serdes.string();
type Order = { amount: number };
/** Sliding windows of difference 5 and grace 3. */
export const SLIDE = { timeDifferenceMs: 5, graceMs: 3 };

/**
 * A sliding-window count and a sliding reduce (the largest amount) of one grouped stream, after a
 * flatMapValues that doubles some records: several sliding arrivals on one key record; `onLate` and
 * `emit` as given.
 */
export function slidingCountReduce(
  app: string,
  onLate: 'dead-letter' | 'drop' = 'dead-letter',
  emit: 'update' | 'final' = 'update',
): BuiltTopology {
  const t = topology({ applicationId: app });
  const g = t
    .stream<string, Order>('in', { key: s })
    .flatMapValues((o) => (o !== null && o.amount % 5 === 0 ? [o, o] : [o]))
    .groupByKey();
  const w = SlidingWindows.ofTimeDifferenceAndGrace(SLIDE.timeDifferenceMs, SLIDE.graceMs);
  g.windowedBy(w)
    .emit(emit)
    .onLate(onLate)
    .count({ name: 'slide-counts' })
    .toStream()
    .map((wk, n) => [wk.key, { start: wk.start, end: wk.end, n }] as const)
    .to('slide-counts', { key: s });
  g.windowedBy(w)
    .emit(emit)
    .onLate(onLate)
    .reduce((a, b) => (b.amount > a.amount ? b : a), { name: 'slide-max' })
    .toStream()
    .map((wk, o) => [wk.key, { start: wk.start, end: wk.end, max: o?.amount ?? null }] as const)
    .to('slide-max', { key: s });
  return t.build();
}
