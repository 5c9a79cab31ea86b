/**
 * Topologies whose aggregations' own code throws on some records (a reducer, an aggregator, a merger),
 * for the run-equals-model tests of "A record that cannot be walked" (docs/streams.md): each throw
 * depends on the state it meets, so a record made a dead letter changes whether later ones throw.
 * Amount 7 is the value they refuse (the generated inputs' amounts are 0 to 12). Also topologies whose
 * nodes downstream of an aggregation throw, and the generated-input check the throw tests share.
 */

import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { Cluster, Redis } from 'ioredis';
import {
  type BuiltTopology,
  SessionWindows,
  SlidingWindows,
  serdes,
  TimeWindows,
  topology,
} from '../../src/topology/index.js';
import { runModel } from '../../src/topology/model.js';
import { assertEqualToModel, generated, HOP, type RunTotals, runOnRedis } from './run-helpers.js';
import { SLIDE } from './sliding-topologies.js';

const s = serdes.string();
type Order = { amount: number };

/** What the reducers and aggregators throw: a RangeError naming no value. */
export const refused = () => new RangeError('seven is refused here');

/**
 * An unwindowed reduce of totals that throws on amount 7 when the total so far is odd, beside a count
 * of the same grouped stream (one key call per key: the record's count is undone with it).
 */
export function throwingReduceAndCount(app: string): BuiltTopology {
  const t = topology({ applicationId: app });
  const g = t.stream<string, Order>('in', { key: s }).groupByKey();
  g.reduce(
    (a, b) => {
      if (b.amount === 7 && a.amount % 2 === 1) throw refused();
      return { amount: a.amount + b.amount };
    },
    { name: 'totals' },
  )
    .toStream()
    .to('totals', { key: s });
  g.count({ name: 'n' }).toStream().to('n', { key: s });
  return t.build();
}

/**
 * A hopping-window aggregate (HOP: each record in two windows) whose aggregator throws on amount 7 in
 * a window holding an odd count: it may throw in its second window after its first was folded.
 */
export function throwingHoppingAggregate(app: string, emit: 'update' | 'final' = 'update'): BuiltTopology {
  const t = topology({ applicationId: app });
  t.stream<string, Order | null>('in', { key: s })
    .groupByKey()
    .windowedBy(TimeWindows.ofSizeAndGrace(HOP.sizeMs, HOP.graceMs).advanceBy(HOP.advanceMs))
    .emit(emit)
    .aggregate(
      (): { n: number; sum: number } => ({ n: 0, sum: 0 }),
      (_k, o, a) => {
        if (o !== null && o.amount === 7 && a.n % 2 === 1) throw refused();
        return { n: a.n + 1, sum: a.sum + (o?.amount ?? 0) };
      },
      { name: 'sums' },
    )
    .toStream()
    .map((wk, a) => [wk.key, { start: wk.start, end: wk.end, a }] as const)
    .to('sums', { key: s });
  return t.build();
}

/**
 * A session aggregate (gap 6, grace 4) of the record counts whose aggregator throws on amount 7 when
 * the merged session holds an odd count, and whose merger throws when both sides hold 5 records.
 */
export function throwingSessionAggregate(app: string, emit: 'update' | 'final' = 'final'): BuiltTopology {
  const t = topology({ applicationId: app });
  t.stream<string, Order | null>('in', { key: s })
    .groupByKey()
    .windowedBy(SessionWindows.ofInactivityGapAndGrace(6, 4))
    .emit(emit)
    .aggregate(
      (): { n: number } => ({ n: 0 }),
      (_k, o, a) => {
        if (o !== null && o.amount === 7 && a.n % 2 === 1) throw refused();
        return { n: a.n + 1 };
      },
      (_k, a, b) => {
        if (a.n === 5 && b.n === 5) throw new TypeError('two sessions of five are refused');
        return { n: a.n + b.n };
      },
      { name: 'session-n' },
    )
    .toStream()
    .map((wk, a) => [wk.key, { start: wk.start, end: wk.end, n: a?.n ?? null }] as const)
    .to('session-n', { key: s });
  return t.build();
}

/** A sliding-window reduce (SLIDE) of totals that throws on amount 7 when the window's total is over 3. */
export function throwingSlidingReduce(app: string, emit: 'update' | 'final' = 'final'): BuiltTopology {
  const t = topology({ applicationId: app });
  t.stream<string, Order>('in', { key: s })
    .filter((_k, o) => o !== null)
    .groupByKey()
    .windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(SLIDE.timeDifferenceMs, SLIDE.graceMs))
    .emit(emit)
    .reduce(
      (a, b) => {
        if (b.amount === 7 && a.amount > 3) throw refused();
        return { amount: a.amount + b.amount };
      },
      { name: 'slide-totals' },
    )
    .toStream()
    .map((wk, o) => [wk.key, { start: wk.start, end: wk.end, total: o?.amount ?? null }] as const)
    .to('slide-totals', { key: s });
  return t.build();
}

/** What the nodes downstream of an aggregation throw: a TypeError naming no value. */
export const refusedDownstream = () => new TypeError('refused downstream');

/**
 * A count whose updates go to `n` first, then through a mapValues that throws on every third count of
 * a key (downstream of the count: the record's count stays, that update's `n` output goes with it), and
 * a reduce of the same grouped stream whose updates pass a filter that throws on a total of 7.
 */
export function throwingAfterCount(app: string): BuiltTopology {
  const t = topology({ applicationId: app });
  const g = t.stream<string, Order>('in', { key: s }).groupByKey();
  const counts = g.count({ name: 'n' }).toStream();
  counts.to('n', { key: s });
  counts
    .mapValues((n) => {
      if (n % 3 === 0) throw refusedDownstream();
      return n * 10;
    })
    .to('n10', { key: s });
  g.reduce((a, b) => ({ amount: a.amount + b.amount }), { name: 'totals' })
    .toStream()
    .filter((_k, o) => {
      if (o.amount === 7) throw new RangeError('a total of seven is refused downstream');
      return true;
    })
    .to('totals', { key: s });
  return t.build();
}

/**
 * A hopping-window count (HOP) whose updates, or final results with emit final, are mapped by a
 * function that throws on a count of 2 in a window starting at a multiple of 10, after a sink wrote them.
 */
export function throwingAfterHoppingCount(app: string, emit: 'update' | 'final' = 'final'): BuiltTopology {
  const t = topology({ applicationId: app });
  const results = t
    .stream<string, Order | null>('in', { key: s })
    .groupByKey()
    .windowedBy(TimeWindows.ofSizeAndGrace(HOP.sizeMs, HOP.graceMs).advanceBy(HOP.advanceMs))
    .emit(emit)
    .count({ name: 'hop-n' })
    .toStream();
  results.map((wk, n) => [wk.key, `${wk.start}:${n}` as string] as const).to('hop-n', { key: s, value: s });
  results
    .map((wk, n) => {
      if (n === 2 && wk.start % 10 === 0) throw refusedDownstream();
      return [wk.key, `${wk.start}:${n * 10}` as string] as const;
    })
    .to('hop-n10', { key: s, value: s });
  return t.build();
}

/**
 * Runs `make`'s topology on `runs` generated inputs, on Redis (batches cut and replayed) and in the
 * model, equal on each; `count` checks a run's dead letters and gives how many of them it looks for.
 * Some outputs, some such dead letters (`what` says which) and some replays must have happened.
 */
export async function assertGeneratedEqualModel(
  redis: Redis | Cluster,
  make: () => BuiltTopology,
  window: typeof HOP | null,
  runs: number,
  what: string,
  count: (built: BuiltTopology, got: RunTotals) => number,
): Promise<void> {
  const seen = { counted: 0, outputs: 0, replays: 0 };
  // the generated inputs reach a throw only now and then (a sliding reduce: an amount of 7 onto a
  // window already above 3): more runs, up to four times as many, until one did, so the check below
  // asserts what the runs did rather than what the dice gave
  for (let round = 0; round < 4 && (round === 0 || seen.counted === 0 || seen.replays === 0); round++)
    await fc.assert(
      fc.asyncProperty(generated(4, 20, 1), async (g) => {
        const built = make();
        const model = runModel(built, g.input, { partitions: { in: g.partitions } });
        const got = await runOnRedis(redis, built, g, window);
        assertEqualToModel(model, got);
        seen.counted += count(built, got);
        seen.outputs += got.outputs.length;
        seen.replays += got.replays;
      }),
      { numRuns: runs },
    );
  assert.ok(seen.outputs > 0, 'some outputs');
  assert.ok(seen.counted > 0, what);
  assert.ok(seen.replays > 0, 'some batches were replayed');
}

/** A record of topic `in`, partition 0, key `key`, value `{ amount }` (timestamp: offset + 1 unless given). */
export const amountAt = (offset: number, key: string, amount: number, timestamp = offset + 1) => ({
  topic: 'in',
  partition: 0,
  offset,
  key: Buffer.from(key),
  value: Buffer.from(JSON.stringify({ amount })),
  timestamp,
});
