/**
 * One key group's fold (fold.ts runs the rounds): what a group's folds read, and the fold of its
 * records onto what the read found, per kind of aggregation: reduce and aggregate unwindowed and in time
 * windows (here), sliding windows (fold-sliding.ts) and session windows (fold-session.ts).
 */
import { RedfenceError } from '../../errors/index.js';
import type { Effect, PendingEntry, StoreReadAnswer, StoreReadRequest } from '../../store/index.js';
import { changelog } from '../model-io.js';
import { readStored, StoredUnreadable } from '../threw.js';
import type { Arrival } from './arrive.js';
import type { WindowClock } from './final.js';
import { foldSession, type SessionsHeld, sessionsHeld } from './fold-session.js';
import { appliedNewest, foldSliding, type SlidingHeld, slidingHeld } from './fold-sliding.js';
import type { OwnerCache } from './owner-cache.js';
import type { KeyGroup, Placed } from './steps.js';

/**
 * An aggregation's own code threw while a record was folded (not an Error: fold.ts turns it into the
 * record's dead letter before any call is sent, or into RF_TOPOLOGY_NODE_THREW): `fold`, its key
 * serde, initializer, aggregator, merger or store serde writing; `stored`, its store serde reading the
 * state in Redis; `before`, a record the key's fence passed (a later record of the key applied) with no
 * pending entry: its fold threw when the batch ran before, and it was not applied.
 */
export class FoldThrew {
  constructor(
    readonly offset: number,
    readonly node: string,
    readonly kind: 'fold' | 'stored' | 'before',
    readonly error: unknown,
  ) {}
}

/** Runs `fold` of record `offset` at `node`; what it throws becomes a FoldThrew (RedfenceErrors stay). */
function folding<T>(offset: number, node: string, fold: () => T): T {
  try {
    return fold();
  } catch (error) {
    if (error instanceof RedfenceError) throw error;
    if (error instanceof StoredUnreadable) throw new FoldThrew(offset, node, 'stored', error.error);
    throw new FoldThrew(offset, node, 'fold', error);
  }
}

/** A folded arrival and where its effects sit. */
export interface FoldArrival {
  readonly arrival: Arrival;
  readonly placed: Placed;
}

/**
 * What sliding folds need of the batch: the partition's clocks (store times move) and window expiry;
 * `ahead`: reads made before the calls (fold-ahead.ts' foldAhead) by fence key (hex), used by the first round.
 */
export interface FoldContext {
  readonly clocks: Map<string, WindowClock>;
  readonly expireAt: (windowEnd: number, graceMs: number) => number;
  readonly ahead?: ReadonlyMap<string, StoreReadAnswer>;
  /** Owner-local state (owner-cache.ts): round 0 reads a cached key from it. */
  readonly owner?: OwnerCache;
}

/** A key's value and timestamp in one store (and window): `value` null: none. */
interface Held {
  value: Buffer | null;
  ts: number;
}

/** The id of a store's value (and window) in a fold's state. */
function heldId(store: number, start: number | null): string {
  return start === null ? `${store}` : `${store}@${start}`;
}

/**
 * What a group's folds read: each aggregation's values and timestamps, per window of the batch.
 *
 * @example
 * const answer = await store.readParts(readRequest(group, arrivals));
 */
export function readRequest(g: KeyGroup, arrivals: readonly FoldArrival[]): StoreReadRequest {
  const kv = new Set<number>();
  const windows = new Map<number, Set<number>>();
  const hashes = new Set<number>();
  const pending = new Set<number>();
  const sessions = new Set<number>();
  for (const { arrival: a, placed } of arrivals) {
    const { valueStore, timeStore } = a.agg;
    // a record applied already has its pending entry; one without was not applied (FoldThrew 'before')
    pending.add(g.records[placed.record]?.offset ?? 0);
    if (a.session !== null) {
      sessions.add(valueStore);
      continue;
    }
    if (a.sliding) {
      hashes.add(valueStore);
      hashes.add(timeStore);
      // a record applied already: what it wrote moves the store time (its pending entry, above)
      continue;
    }
    if (a.starts === null) {
      kv.add(valueStore);
      kv.add(timeStore);
      continue;
    }
    // a time window's value and timestamp: the two fields of its one key
    const starts = windows.get(valueStore) ?? new Set<number>();
    for (const s of a.starts) starts.add(s);
    windows.set(valueStore, starts);
  }
  return {
    key: g.key,
    kv: [...kv],
    windows: [...windows].map(([store, starts]) => ({ store, starts: [...starts] })),
    hashes: [...hashes],
    sessions: [...sessions],
    pending: [...pending],
  };
}

/**
 * One group's fold in a round: what its read found and what its folded records changed. Reduce and
 * aggregate records set their effects: the value `set` to the aggregate's serde bytes (`delete` when it
 * is null) and the timestamp `set` to the largest record timestamp of the key or window since it was
 * last empty (Kafka Streams keeps it beside the aggregate; a deleted aggregate forgets it, so a time
 * left beside no value is not read). Sliding records: fold-sliding.ts; session records: fold-session.ts.
 *
 * @example
 * const f = new GroupFold(group, arrivals, answer, batch.partition);
 * for (const fa of arrivals) f.apply(fa, ctx, newest); // the effects now hold the folded ops
 */
export class GroupFold {
  readonly #read = new Map<string, Buffer | null>();
  /** A time window's timestamp as read (its key's `time` field), by the value's held id. */
  readonly #readTime = new Map<string, Buffer | null>();
  readonly #state = new Map<string, Held | null>();
  readonly #sliding = new Map<string, SlidingHeld>();
  readonly #pending = new Map<number, PendingEntry | null>();
  /** Session stores: their sessions, by store id. */
  readonly #sessions = new Map<number, SessionsHeld>();
  /** Unwindowed values the folds set, by store id (value and time stores): the owner cache's update. */
  readonly written = new Map<number, Buffer | null>();

  constructor(
    readonly group: KeyGroup,
    arrivals: readonly FoldArrival[],
    readonly answer: StoreReadAnswer,
    readonly partition: number,
  ) {
    const req = readRequest(group, arrivals);
    (req.kv ?? []).forEach((store, i) => {
      this.#read.set(heldId(store, null), answer.kv[i] ?? null);
    });
    for (const w of answer.windows) {
      this.#read.set(heldId(w.store, w.start), w.value);
      this.#readTime.set(heldId(w.store, w.start), w.time);
    }
    const hashes = new Map((req.hashes ?? []).map((store, i) => [store, answer.hashes[i] ?? new Map()]));
    for (const { arrival: a } of arrivals)
      if (a.sliding && !this.#sliding.has(a.agg.node.name))
        this.#sliding.set(
          a.agg.node.name,
          slidingHeld(
            a.agg.node.name,
            hashes.get(a.agg.valueStore) ?? new Map(),
            hashes.get(a.agg.timeStore) ?? new Map(),
          ),
        );
    for (const store of req.sessions ?? [])
      this.#sessions.set(store, sessionsHeld(answer.sessions.filter((x) => x.store === store)));
    (req.pending ?? []).forEach((offset, i) => {
      this.#pending.set(offset, answer.pending[i] ?? null);
    });
  }

  /** Folds one arrival (records applied already keep their placeholders: the call will not apply them). */
  apply(fa: FoldArrival, ctx: FoldContext, newest: Map<FoldArrival, number>): void {
    const { arrival: a, placed } = fa;
    const rec = this.group.records[placed.record];
    const part = rec?.parts[placed.part];
    if (rec === undefined || part === undefined) throw new TypeError('a placed record is in its group');
    const applied = this.#applied(rec.offset, a.agg.node.name);
    const node = a.agg.node.name;
    if (a.session !== null) {
      if (!applied) folding(rec.offset, node, () => foldSession(a, part, this.#sessionsOf(a.agg.valueStore)));
      return;
    }
    if (a.sliding) {
      const clock = ctx.clocks.get(node) as WindowClock;
      const held = this.#sliding.get(node) as SlidingHeld;
      const n = applied
        ? appliedNewest(rec, placed.part, this.#pending.get(rec.offset))
        : folding(rec.offset, node, () => foldSliding(a, part, held, clock, ctx.expireAt));
      newest.set(fa, n);
      clock.store = Math.max(clock.store, n);
      return;
    }
    if (!applied) folding(rec.offset, node, () => this.#foldTime(a, part.effects));
  }

  /**
   * Whether the key's fence passed record `offset` already (a replay: its effects keep their
   * placeholders); passed without a pending entry, it was never applied: FoldThrew 'before'.
   */
  #applied(offset: number, node: string): boolean {
    const stamp = this.answer.stamp;
    const applied = stamp !== null && stamp.partition === this.partition && offset <= stamp.offset;
    if (applied && (this.#pending.get(offset) ?? null) === null)
      throw new FoldThrew(offset, node, 'before', undefined);
    return applied;
  }

  #sessionsOf(store: number): SessionsHeld {
    let held = this.#sessions.get(store);
    if (held === undefined) {
      held = new Map();
      this.#sessions.set(store, held);
    }
    return held;
  }

  /** Folds a session arrival alone (foldAhead): the session it writes, null when none or applied already. */
  foldSession(fa: FoldArrival): { start: number; end: number } | null {
    const { arrival: a, placed } = fa;
    const rec = this.group.records[placed.record];
    const part = rec?.parts[placed.part];
    if (rec === undefined || part === undefined) throw new TypeError('a placed record is in its group');
    if (this.#applied(rec.offset, a.agg.node.name)) return null;
    return folding(rec.offset, a.agg.node.name, () =>
      foldSession(a, part, this.#sessionsOf(a.agg.valueStore)),
    );
  }

  #heldAt(a: Arrival, start: number | null): Held | null {
    const id = heldId(a.agg.valueStore, start);
    if (this.#state.has(id)) return this.#state.get(id) ?? null;
    const value = this.#read.get(id) ?? null;
    if (value === null) return null;
    const t = start === null ? this.#read.get(heldId(a.agg.timeStore, null)) : this.#readTime.get(id);
    const ts = t == null ? Number.NaN : Number(t.toString('latin1'));
    if (!Number.isSafeInteger(ts))
      throw new RedfenceError(
        'RF_STATE_CORRUPT',
        `topology node ${a.agg.node.name}: an aggregate in Redis without an integer timestamp`,
        { details: { node: a.agg.node.name } },
      );
    return { value, ts };
  }

  #foldTime(a: Arrival, effects: Effect[]): void {
    const p = a.agg.node;
    const starts = a.starts ?? [null];
    starts.forEach((start, i) => {
      const old = this.#heldAt(a, start);
      const r = a.record;
      const oldAgg =
        old === null
          ? p.initializer()
          : readStored(() => p.valueSerde.deserialize(old.value as Buffer, changelog(p)));
      const ts = old === null ? r.timestamp : Math.max(r.timestamp, old.ts);
      const next = p.aggregator(r.key, r.value, oldAgg);
      const bytes = next === null || next === undefined ? null : p.valueSerde.serialize(next, changelog(p));
      effects[2 * i] = withOp(
        effects[2 * i],
        bytes === null ? { op: 'delete' } : { op: 'set', value: bytes },
      );
      effects[2 * i + 1] = withOp(effects[2 * i + 1], { op: 'set', value: String(ts) });
      this.#state.set(heldId(a.agg.valueStore, start), bytes === null ? null : { value: bytes, ts });
      if (start === null) {
        this.written.set(a.agg.valueStore, bytes);
        this.written.set(a.agg.timeStore, Buffer.from(String(ts)));
      }
    });
  }
}

function withOp(e: Effect | undefined, op: Extract<Effect, { kind: 'kv' }>['op']): Effect {
  if (e === undefined || (e.kind !== 'kv' && e.kind !== 'window'))
    throw new TypeError('a folded effect is a kv or window effect');
  return { ...e, op };
}
