/**
 * Emit-final sessions and sliding windows, before the calls: the keys holding them are read and their
 * records folded once (fold-group.ts), so the close index gets the sessions and windows the batch will
 * write (final-session.ts, final-sliding.ts) before any key call; the first round of fold.ts'
 * callGroups folds the same reads again, so it writes exactly what was found here.
 */
import { RedfenceError } from '../../errors/index.js';
import type { IndexedWindow, KeyStore, StoreReadAnswer } from '../../store/index.js';
import type { Arrival } from './arrive.js';
import type { WindowClock } from './final.js';
import type { IndexedSession } from './final-session.js';
import { arrivalsByGroup, MAX_FOLD_ROUNDS, settled, type Where } from './fold.js';
import { type FoldArrival, type FoldContext, FoldThrew, GroupFold, readRequest } from './fold-group.js';
import type { KeyGroup, PlacedStep } from './steps.js';

/** A session aggregation with emit('final'): its sessions are indexed from the first read's folds. */
function finalSession(a: Arrival): boolean {
  return a.session !== null && a.agg.node.emit === 'final';
}

/** A sliding aggregation with emit('final'): its windows are indexed from the first read's folds. */
function finalSliding(a: Arrival): boolean {
  return a.sliding && a.agg.node.emit === 'final';
}

/** What {@link foldAhead} gives: the reads, the sessions and sliding windows written, the store times. */
export interface FoldedAhead {
  readonly ahead: Map<string, StoreReadAnswer>;
  /** Per value store, the sessions the batch writes. */
  readonly written: Map<number, IndexedSession[]>;
  /** Per value store, the sliding windows the batch writes (emit-final aggregations). */
  readonly windows: Map<number, IndexedWindow[]>;
  /** Per emit-final sliding arrival, its clock's store time after its fold. */
  readonly storeAfter: Map<Arrival, number>;
  /**
   * A fold that threw (an aggregation's own code): the rest is partial. The earliest record that throws
   * may be another one, of an aggregation not folded ahead: fold.ts' callGroups with `dry` finds it.
   */
  readonly threw?: FoldThrew;
}

/**
 * Emit-final sessions and sliding windows: reads each key holding a session aggregation with
 * emit('final') and folds its session records (final-session.ts): the sessions the batch will write,
 * per value store; with a sliding aggregation with emit('final'), reads every key holding a sliding
 * arrival and folds them all in offset order (the store time couples them), as the first round of
 * fold.ts' callGroups will: the windows written and the store time after each final arrival
 * (final-sliding.ts); the clocks' store times are as before when it returns. The first round of
 * fold.ts' callGroups folds the same reads again, so it writes exactly what was found here.
 */
export async function foldAhead(
  store: KeyStore,
  batch: Where,
  groups: readonly KeyGroup[],
  steps: readonly PlacedStep[],
  ctx: FoldContext,
): Promise<FoldedAhead> {
  try {
    return await foldAheadOf(store, batch, groups, steps, ctx);
  } catch (error) {
    if (!(error instanceof FoldThrew)) throw error;
    const threw = settled(error, batch, 0);
    if (!(threw instanceof FoldThrew)) throw threw;
    return { ahead: new Map(), written: new Map(), windows: new Map(), storeAfter: new Map(), threw };
  }
}

async function foldAheadOf(
  store: KeyStore,
  batch: Where,
  groups: readonly KeyGroup[],
  steps: readonly PlacedStep[],
  ctx: FoldContext,
): Promise<FoldedAhead> {
  const { byGroup, order } = arrivalsByGroup(steps);
  const sliding = order.some((fa) => finalSliding(fa.arrival));
  const reads = (a: Arrival) => finalSession(a) || (sliding && a.sliding);
  const mine = groups.filter((g) => byGroup.get(g)?.some((fa) => reads(fa.arrival)) === true);
  const ahead = new Map<string, StoreReadAnswer>();
  const written = new Map<number, IndexedSession[]>();
  await Promise.all(
    mine.map(async (g) => {
      const arrivals = byGroup.get(g) ?? [];
      let answer: StoreReadAnswer | null = null;
      for (let round = 0; answer === null; round++) {
        if (round >= MAX_FOLD_ROUNDS)
          throw new RedfenceError(
            'RF_CAS_CONFLICT',
            `topology batch ${batch.topic}/${batch.partition}: a key kept changing while it was read in parts; run the batch again`,
            { details: { topic: batch.topic, partition: batch.partition, keys: 1 } },
          );
        answer = await store.readParts(readRequest(g, arrivals));
      }
      ahead.set(g.key.toString('hex'), answer);
      const f = new GroupFold(g, arrivals, answer, batch.partition);
      for (const fa of arrivals) {
        if (!finalSession(fa.arrival)) continue;
        const s = f.foldSession(fa);
        if (s === null) continue;
        const list = written.get(fa.arrival.agg.valueStore) ?? [];
        list.push({ key: g.key, ...s });
        written.set(fa.arrival.agg.valueStore, list);
      }
    }),
  );
  const windows = new Map<number, IndexedWindow[]>();
  const storeAfter = new Map<Arrival, number>();
  if (sliding) foldSlidingAhead(batch, byGroup, order, ahead, ctx, { windows, storeAfter });
  return { ahead, written, windows, storeAfter };
}

/** {@link foldAhead}'s sliding part: every sliding arrival folded in offset order on its key's read. */
function foldSlidingAhead(
  batch: Where,
  byGroup: ReadonlyMap<KeyGroup, FoldArrival[]>,
  order: readonly FoldArrival[],
  ahead: ReadonlyMap<string, StoreReadAnswer>,
  ctx: FoldContext,
  out: Pick<FoldedAhead, 'windows' | 'storeAfter'>,
): void {
  const before = new Map<WindowClock, number>();
  const folding = new Map<KeyGroup, GroupFold>();
  const newest = new Map<FoldArrival, number>();
  try {
    slideAhead(batch, byGroup, order, ahead, ctx, out, { before, folding, newest });
  } finally {
    for (const [clock, t] of before) clock.store = t;
  }
}

function slideAhead(
  batch: Where,
  byGroup: ReadonlyMap<KeyGroup, FoldArrival[]>,
  order: readonly FoldArrival[],
  ahead: ReadonlyMap<string, StoreReadAnswer>,
  ctx: FoldContext,
  out: Pick<FoldedAhead, 'windows' | 'storeAfter'>,
  {
    before,
    folding,
    newest,
  }: {
    before: Map<WindowClock, number>;
    folding: Map<KeyGroup, GroupFold>;
    newest: Map<FoldArrival, number>;
  },
): void {
  for (const fa of order) {
    if (!fa.arrival.sliding) continue;
    const clock = ctx.clocks.get(fa.arrival.agg.node.name) as WindowClock;
    if (!before.has(clock)) before.set(clock, clock.store);
    const g = fa.placed.group;
    let f = folding.get(g);
    if (f === undefined) {
      const answer = ahead.get(g.key.toString('hex')) as StoreReadAnswer; // every sliding key was read
      f = new GroupFold(g, byGroup.get(g) ?? [], answer, batch.partition);
      folding.set(g, f);
    }
    f.apply(fa, ctx, newest);
    if (!finalSliding(fa.arrival)) continue;
    out.storeAfter.set(fa.arrival, clock.store);
    // the windows its fold set (a record applied already keeps its placeholder: indexed by its first run)
    const { valueStore } = fa.arrival.agg;
    const part = g.records[fa.placed.record]?.parts[fa.placed.part];
    for (const e of part?.effects ?? [])
      if (e.kind === 'field' && e.store === valueStore && e.op.op === 'set') {
        const list = out.windows.get(valueStore) ?? [];
        list.push({ key: g.key, start: e.start });
        out.windows.set(valueStore, list);
      }
  }
}
