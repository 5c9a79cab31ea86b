/**
 * The batch executor's first two steps, without Redis in between: `walkBatch` runs the stateless nodes
 * per record and decides each record at a count (effects, late windows, drops, the windows that close);
 * `placeSteps` then puts every effect in its fence key's key record, a closing window's `final`
 * effects in the record that closed it, in offset order per key.
 */
import type { Effect } from '../../store/index.js';
import type { ModelDrop, ModelInput, ModelMisplaced } from '../model.js';
import { type WindowBounds, withHeaders } from '../model-io.js';
import { fromBytes } from '../serdes.js';
import { isTick } from '../tick.js';
import { type Arrival, arrive, effectsOf, finalEffects } from './arrive.js';
import { type FinalRange, finalRange, type IndexedWindow, type WindowClock } from './final.js';
import { sessionFinalRange } from './final-session.js';
import { slidingFinalFrom, slidingFinalRange } from './final-sliding.js';
import type { FlowTally } from './flows.js';
import type { KeyPart } from './note.js';
import type { AggregatePlan, RunPlan, SourceNode } from './plan.js';
import { tickSteps } from './tick.js';
import type { TopologyDeadLetter, TopologyOutput } from './types.js';
import { children, flowOf, graphNode, type WalkSink } from './walk.js';

/** What step 1 leaves per record, in order (drops and late records too: the model's order). */
export type WalkStep =
  | { readonly out: TopologyOutput }
  | { readonly drop: ModelDrop }
  | { readonly dead: TopologyDeadLetter }
  | { readonly arrival: Arrival; readonly effects: Effect[]; readonly source: ModelInput }
  | {
      readonly closes: AggregatePlan;
      readonly range: FinalRange;
      readonly source: ModelInput;
      /** Sliding windows: the closing record's arrival (the store time after its fold bounds `range`). */
      readonly after?: Arrival;
      /** Sliding windows closed by a tick (tick.ts): the store time at the batch's start. */
      readonly storeAt?: number;
    };

export interface Walked {
  readonly steps: WalkStep[];
}

/** A record an aggregation's own code threw on (fold.ts' FoldThrew), by offset: the node and the throw. */
export type FailedRecords = ReadonlyMap<number, { readonly node: string; readonly error: unknown }>;

/**
 * Step 1: every record through the stateless nodes from `sources` (its sub-topology's); counts decided
 * against `clocks` (moved); each node's records in and out counted in `tally`. A record in `failed` is
 * its dead letter and nothing else (not walked); a record whose walk throws too (a stateless node, or
 * an aggregation's key serde); so is a record `misplaced` refuses (the partition check).
 */
export function walkBatch(
  plan: RunPlan,
  sources: readonly SourceNode[],
  records: readonly ModelInput[],
  clocks: Map<string, WindowClock>,
  expireAt: (windowEnd: number, graceMs: number) => number,
  tally: FlowTally,
  failed: FailedRecords = new Map(),
  misplaced: (rec: ModelInput) => ModelMisplaced | null = () => null,
): Walked {
  const w: Walked = { steps: [] };
  // one sink for the batch: `rec` is the record being walked
  let rec = records[0] as ModelInput;
  // per aggregation: its plan, and its clock as it was before the walked record's first arrival (put
  // back if the record's walk throws), one copy per aggregation reused by every record of the batch
  const aggs = new Map<string, AggState>();
  /** The aggregations the walked record arrived at (their `before` is its). */
  const moved: AggState[] = [];
  const sink: WalkSink = {
    tally,
    at: '',
    output: (topic, key, value, timestamp) =>
      w.steps.push({
        out: withHeaders({ topic, key, value, timestamp, offset: rec.offset }, rec.headers),
      }),
    dropNullKey: (name) => w.steps.push({ drop: { reason: 'null-key', node: name, source: rec } }),
    aggregate: (node, r) => {
      const agg = stateOf(plan, aggs, node.name, moved, clocks);
      const a = arrive(agg, r, clocks);
      if ('drop' in a) {
        w.steps.push({ drop: { reason: a.drop, node: node.name, source: rec } });
        return;
      }
      if (a.missed.length > 0) w.steps.push(lateStep(node, a.missed, rec));
      const effects = effectsOf(a, expireAt);
      if (effects.length > 0) w.steps.push({ arrival: a, effects, source: rec });
      const win = node.window;
      if (node.emit !== 'final' || win === null) return;
      const clock = clocks.get(node.name) as WindowClock;
      if (win.kind === 'sliding') {
        // the model checks no final results after a record late as a whole or earlier than d
        if (!a.sliding || a.record.timestamp < win.timeDifferenceMs) return;
        const range = slidingFinalRange(win, clock, a.closeTime);
        if (range !== null) w.steps.push({ closes: agg, range, source: rec, after: a });
        return;
      }
      const range =
        win.kind === 'session'
          ? sessionFinalRange(win, clock, a.closeTime)
          : finalRange(win, clock, a.closeTime);
      if (range !== null) w.steps.push({ closes: agg, range, source: rec });
    },
  };
  // the sources' graph nodes (walked from, counted in), once per batch
  const from = sources.map((source) => graphNode(plan, source.name));
  for (let i = 0; i < records.length; i++) {
    rec = records[i] as ModelInput;
    // a tick is not walked: it moves the windowed aggregations' clocks (tick.ts)
    if (isTick(rec)) {
      w.steps.push(...tickSteps(plan, rec, clocks));
      continue;
    }
    // the partition check: not walked, none of its effects (as the model's model-placement.ts)
    const wrong = misplaced(rec);
    if (wrong !== null) {
      w.steps.push({ dead: wrong });
      continue;
    }
    const threw = failed.get(rec.offset);
    if (threw !== undefined) {
      w.steps.push({
        dead: { reason: 'processing-error', node: threw.node, error: threw.error, source: rec },
      });
      continue;
    }
    const mark = w.steps.length;
    for (const m of moved) m.moved = false;
    moved.length = 0;
    try {
      for (let j = 0; j < sources.length; j++) {
        const source = sources[j] as SourceNode;
        sink.at = source.name;
        const key = fromBytes(source.keySerde, rec.key, rec.topic);
        const value = fromBytes(source.valueSerde, rec.value, rec.topic);
        const g = from[j];
        if (g === undefined) {
          tally.in(source.name);
          tally.out(source.name);
          continue;
        }
        const flow = flowOf(g, tally);
        flow.in++;
        flow.out++;
        children(g, { key, value, timestamp: rec.timestamp }, sink);
      }
    } catch (error) {
      // all or nothing: the record's steps go, the clocks its arrivals moved come back
      w.steps.length = mark;
      for (const m of moved)
        if (m.before === null) clocks.delete(m.agg.node.name);
        else clocks.set(m.agg.node.name, { ...m.before });
      w.steps.push({ dead: { reason: 'processing-error', node: sink.at, error, source: rec } });
    }
  }
  return w;
}

/** An aggregation in a batch's walk: its plan and its clock before the walked record (`moved`: saved). */
interface AggState {
  readonly agg: AggregatePlan;
  moved: boolean;
  /** A copy of its clock before the record's first arrival; null: it had none. */
  before: WindowClock | null;
}

/**
 * The aggregation's state in the walk, its clock saved when the walked record first arrives at it
 * (listed in `moved`).
 */
function stateOf(
  plan: RunPlan,
  aggs: Map<string, AggState>,
  name: string,
  moved: AggState[],
  clocks: ReadonlyMap<string, WindowClock>,
): AggregatePlan {
  let s = aggs.get(name);
  if (s === undefined) {
    const agg = plan.aggregates.get(name);
    if (agg === undefined) throw new TypeError(`no plan for ${name}`);
    s = { agg, moved: false, before: null };
    aggs.set(name, s);
  }
  if (!s.moved) {
    s.moved = true;
    moved.push(s);
    const c = clocks.get(name);
    if (c === undefined) s.before = null;
    else if (s.before === null) s.before = { ...c };
    else Object.assign(s.before, c);
  }
  return s.agg;
}

/**
 * The walk's steps with each sliding closing range bounded by the store's retention, given the store
 * time after each closing arrival's fold (fold-ahead.ts' foldAhead).
 */
export function slidingBounded(
  steps: readonly WalkStep[],
  storeAfter: ReadonlyMap<Arrival, number>,
): WalkStep[] {
  // per aggregation, the store time after its latest arrival folded so far (a tick's range stands there)
  const last = new Map<string, number>();
  return steps.map((s) => {
    if ('arrival' in s) {
      const t = storeAfter.get(s.arrival);
      if (t !== undefined) last.set(s.arrival.agg.node.name, t);
      return s;
    }
    if (!('closes' in s) || (s.after === undefined && s.storeAt === undefined)) return s;
    const t = s.after === undefined ? (last.get(s.closes.node.name) ?? s.storeAt) : storeAfter.get(s.after);
    if (t === undefined) throw new TypeError('a sliding closing arrival is folded ahead');
    return {
      ...s,
      range: slidingFinalFrom(
        s.closes.node.window as { timeDifferenceMs: number; graceMs: number },
        s.range,
        t,
      ),
    };
  });
}

/** What a record late for `windows` becomes: a dead letter, or a drop with `onLate('drop')`. */
export function lateStep(
  node: AggregatePlan['node'],
  windows: readonly WindowBounds[],
  source: ModelInput,
): { readonly drop: ModelDrop } | { readonly dead: TopologyDeadLetter } {
  if (node.onLate === 'drop') return { drop: { reason: 'late', node: node.name, source } };
  return { dead: { reason: 'late', node: node.name, store: node.store, windows, source } };
}

/**
 * A fence key's record of the batch: its effects in parts (one per arrival or final result), and itself
 * the key call's record (`emit` and `effects`: fold.ts' callRecords sets `effects` before each call; a
 * record of one part starts with that part's list), so no call record is made per record.
 */
export interface GroupRecord {
  readonly offset: number;
  readonly parts: KeyPart[];
  readonly node: string;
  readonly emit: 1;
  effects: readonly Effect[];
}

/** One fence key's records of the batch, each record's effects in parts (one per arrival or final result). */
export interface KeyGroup {
  /** Its place among the placement's groups (their key calls' replies come in that order). */
  readonly index: number;
  readonly key: Buffer;
  readonly records: GroupRecord[];
}

/** Where some effects sit in the key calls: a part of a record of a group. */
export interface Placed {
  readonly group: KeyGroup;
  readonly record: number;
  readonly part: number;
}

export type PlacedStep =
  | { readonly out: TopologyOutput }
  | { readonly drop: ModelDrop }
  | { readonly dead: TopologyDeadLetter }
  | { readonly arrival: Arrival; readonly placed: Placed; readonly source: ModelInput }
  | {
      readonly closes: AggregatePlan;
      readonly windows: readonly { readonly window: ClosingWindow; readonly placed: Placed }[];
      readonly source: ModelInput;
    };

/** A window that closes (its key and start), or a session (with its `end`). */
export type ClosingWindow = IndexedWindow & { readonly end?: number };

/** Step 2: the key groups (in first-seen order) and the steps with their places. */
export function placeSteps(
  steps: readonly WalkStep[],
  closing: (agg: AggregatePlan, range: FinalRange) => readonly ClosingWindow[],
  finalsLast = false,
): { groups: KeyGroup[]; steps: PlacedStep[] } {
  const groups = new Map<string, KeyGroup>();
  // finalsLast: a key record's final parts' places: an arrival goes before them (below), moving them up
  const finals = new Map<KeyGroup['records'][number], { part: number }[]>();
  const put = (
    key: Buffer,
    offset: number,
    node: string,
    effects: Effect[],
    sliding = false,
    final = false,
  ) => {
    // a map key per byte string: latin1 maps each byte to one character (hex made two)
    const id = key.toString('latin1');
    const p: KeyPart = { effects, sliding };
    const known = groups.get(id);
    const at = known?.records[known.records.length - 1];
    if (known === undefined || at?.offset !== offset) {
      // the record's first part (lists of one made as such: grown by push, a list reserves 16 more)
      const rec: GroupRecord = { offset, parts: [p], node, emit: 1, effects };
      let group = known;
      if (group === undefined) {
        group = { index: groups.size, key, records: [rec] };
        groups.set(id, group);
      } else group.records.push(rec);
      const placed = { group, record: group.records.length - 1, part: 0 };
      if (final && finalsLast) finals.set(rec, [placed]);
      return placed;
    }
    const group = known;
    const last = at;
    const record = group.records.length - 1;
    const after = finalsLast ? finals.get(last) : undefined;
    if (final && finalsLast) {
      const placed = { group, record, part: last.parts.length };
      last.parts.push(p);
      if (after === undefined) finals.set(last, [placed]);
      else after.push(placed);
      return placed;
    }
    if (after === undefined) {
      // no final part placed in the record: the arrival goes last
      last.parts.push(p);
      return { group, record, part: last.parts.length - 1 };
    }
    // finalsLast (a topology with emit-final sliding windows): arrivals first, then final parts, so a
    // record placed before its finals were known (fold-ahead.ts' foldAhead) holds a prefix of its parts. The
    // aggregations' stores differ, and a record never changes a window it closes, so the order across
    // aggregations changes no result. Other topologies keep the walk's order (the pending entries of
    // records applied before this version were cut by it).
    const part = last.parts.length - after.length;
    last.parts.splice(part, 0, p);
    for (const f of after) f.part++;
    return { group, record, part };
  };
  const out: PlacedStep[] = steps.map((s) => {
    if ('out' in s || 'drop' in s || 'dead' in s) return s;
    const offset = s.source.offset;
    if ('arrival' in s) {
      const placed = put(s.arrival.fenceKey, offset, s.arrival.agg.node.name, s.effects, s.arrival.sliding);
      return { arrival: s.arrival, placed, source: s.source };
    }
    const windows = closing(s.closes, s.range).map((window) => ({
      window,
      placed: put(window.key, offset, s.closes.node.name, finalEffects(s.closes, window), false, true),
    }));
    return { closes: s.closes, windows, source: s.source };
  });
  return { groups: [...groups.values()], steps: out };
}
