/**
 * Reduce and aggregate on Redis (JS functions): read-then-write. The batch's key groups that hold a
 * reduce or aggregate are read once each (KeyStore.read, in parallel: the key's values and timestamps,
 * stamped with the last record applied to the key), folded in JS per key in offset order, and sent with
 * `expect` = the stamp, so the call applies only if nothing wrote the key since the read. Records at or
 * below the stamp's offset on the same partition were applied already (a replay): their effects keep
 * their placeholders and the key call answers REEMIT (the results they were applied with) or SKIP. A key
 * answered CONFLICT (another writer moved its token) is read and folded again; after
 * {@link MAX_FOLD_ROUNDS} rounds the batch fails with RF_CAS_CONFLICT (retriable: run it again).
 * Groups without a reduce or aggregate are sent as they are, without `expect`. Session windows
 * (fold-session.ts) and sliding windows (fold-sliding.ts) are folded the same way; as their store time couples the keys of a partition, every
 * round folds the batch's records in offset order across keys.
 */
import { RedfenceError } from '../../errors/index.js';
import { backoffMs, delay } from '../../runtime/backoff.js';
import type {
  Effect,
  KeyCall,
  KeyRecordResult,
  KeyStore,
  PendingEntry,
  StateStamp,
  StoreReadAnswer,
  StoreReadRequest,
} from '../../store/index.js';
import { changelog } from '../model-io.js';
import { type Arrival, folds } from './arrive.js';
import type { WindowClock } from './final.js';
import type { IndexedSession } from './final-session.js';
import { foldSession, type SessionsHeld, sessionsHeld } from './fold-session.js';
import { appliedNewest, foldSliding, type SlidingHeld, slidingHeld } from './fold-sliding.js';
import type { KeyGroup, Placed, PlacedStep } from './steps.js';
import type { TopologyBatch } from './types.js';

/** Read + fold + write rounds of a key before RF_CAS_CONFLICT (as the processor's reducer path). */
export const MAX_FOLD_ROUNDS = 6;

/** A reduce or aggregate arrival and where its effects sit. */
interface FoldArrival {
  readonly arrival: Arrival;
  readonly placed: Placed;
}

/** A key's value and timestamp in one store (and window): `value` null: none. */
interface Held {
  value: Buffer | null;
  ts: number;
}

type Where = Pick<TopologyBatch, 'topic' | 'partition' | 'epoch' | 'committedOffset'>;

/**
 * What sliding folds need of the batch: the partition's clocks (store times move) and window expiry;
 * `ahead`: the reads of {@link foldAhead} by fence key (hex), used by the first round.
 */
export interface FoldContext {
  readonly clocks: Map<string, WindowClock>;
  readonly expireAt: (windowEnd: number, graceMs: number) => number;
  readonly ahead?: ReadonlyMap<string, StoreReadAnswer>;
}

/** A session aggregation with emit('final'): its sessions are indexed from the first read's folds. */
function finalSession(a: Arrival): boolean {
  return a.session !== null && a.agg.node.emit === 'final';
}

/** The folded arrivals per group, and all of them in offset order. */
function arrivalsByGroup(steps: readonly PlacedStep[]) {
  const byGroup = new Map<KeyGroup, FoldArrival[]>();
  const order: FoldArrival[] = [];
  for (const s of steps)
    if ('arrival' in s && folds(s.arrival.agg)) {
      const fa = { arrival: s.arrival, placed: s.placed };
      const list = byGroup.get(s.placed.group) ?? [];
      list.push(fa);
      byGroup.set(s.placed.group, list);
      order.push(fa);
    }
  return { byGroup, order };
}

/**
 * Emit-final sessions: reads each key holding a session aggregation with emit('final') and folds its
 * session records (final-session.ts): the sessions the batch will write, per value store, and the reads
 * (the first round of {@link callGroups} folds them again, so it writes exactly these sessions).
 */
export async function foldAhead(
  store: KeyStore,
  batch: Where,
  groups: readonly KeyGroup[],
  steps: readonly PlacedStep[],
): Promise<{ ahead: Map<string, StoreReadAnswer>; written: Map<number, IndexedSession[]> }> {
  const { byGroup } = arrivalsByGroup(steps);
  const mine = groups.filter((g) => byGroup.get(g)?.some((fa) => finalSession(fa.arrival)) === true);
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
  return { ahead, written };
}

/**
 * Sends every group's key call: folded groups read-then-write (retried on CONFLICT), the others at
 * once. Returns each group's results in `groups` order and how many key records answered CONFLICT.
 */
export async function callGroups(
  store: KeyStore,
  batch: Where,
  groups: readonly KeyGroup[],
  steps: readonly PlacedStep[],
  ctx: FoldContext,
): Promise<{ replies: KeyRecordResult[][]; conflicts: number }> {
  const { byGroup, order } = arrivalsByGroup(steps); // order: every folded arrival, in offset order
  // the sliding clocks' store times before the batch's folds (each round starts from them)
  const storeTimes = new Map<WindowClock, number>();
  for (const fa of order)
    if (fa.arrival.sliding) {
      const clock = ctx.clocks.get(fa.arrival.agg.node.name) as WindowClock;
      if (!storeTimes.has(clock)) storeTimes.set(clock, clock.store);
    }
  /** Per sliding arrival, the newest window start it wrote (as last folded or read back). */
  const newest = new Map<FoldArrival, number>();
  const replies: KeyRecordResult[][] = groups.map(() => []);
  const callOf = (g: KeyGroup, expect?: StateStamp | null): KeyCall => ({
    partition: batch.partition,
    epoch: batch.epoch,
    committedOffset: batch.committedOffset,
    key: g.key,
    ...(expect === undefined
      ? {}
      : { expect: expect === null ? null : { partition: expect.partition, offset: expect.offset } }),
    records: g.records.map((r) => ({
      offset: r.offset,
      emit: 1,
      effects: r.parts.flatMap((p) => p.effects),
    })),
  });
  const plain = groups.map((g, i) => [g, i] as const).filter(([g]) => !byGroup.has(g));
  const sendPlain = async () => {
    if (plain.length === 0) return;
    const rs = await store.callMany(plain.map(([g]) => callOf(g)));
    plain.forEach(([, i], j) => {
      replies[i] = rs[j] ?? [];
    });
  };
  let conflicts = 0;
  const sendFolded = async () => {
    let pending = groups.map((g, i) => [g, i] as const).filter(([g]) => byGroup.has(g));
    for (let round = 0; pending.length > 0; round++) {
      if (round >= MAX_FOLD_ROUNDS)
        throw new RedfenceError(
          'RF_CAS_CONFLICT',
          `topology batch ${batch.topic}/${batch.partition}: ${pending.length} keys kept changing between their read and their write for ${MAX_FOLD_ROUNDS} rounds (another writer of the application's keys); run the batch again`,
          { details: { topic: batch.topic, partition: batch.partition, keys: pending.length } },
        );
      // another writer is on these keys: let it finish before reading again
      if (round > 0) await delay(backoffMs(round - 1, 5, 200));
      const answers = await Promise.all(
        pending.map(([g]) => {
          const ahead = round === 0 ? ctx.ahead?.get(g.key.toString('hex')) : undefined;
          return ahead ?? store.readParts(readRequest(g, byGroup.get(g) ?? []));
        }),
      );
      // a key whose reads in parts saw different stamps is read again (nothing sent); with sliding
      // windows every key waits for it (the store time of later records depends on its records)
      const again = pending.filter((_, j) => answers[j] === null);
      if (again.length > 0 && storeTimes.size > 0) continue;
      const read = pending.flatMap((p, j) => {
        const answer = answers[j];
        return answer == null ? [] : [{ p, answer }];
      });
      const folding = new Map(
        read.map(({ p: [g], answer }) => [
          g,
          new GroupFold(g, byGroup.get(g) ?? [], answer, batch.partition),
        ]),
      );
      for (const [clock, t] of storeTimes) clock.store = t;
      for (const fa of order) {
        const f = folding.get(fa.placed.group);
        if (f !== undefined) f.apply(fa, ctx, newest);
        else if (fa.arrival.sliding) {
          // sent in an earlier round: the windows it wrote move the store time as they did then
          const clock = ctx.clocks.get(fa.arrival.agg.node.name) as WindowClock;
          clock.store = Math.max(clock.store, newest.get(fa) ?? -1);
        }
      }
      const rs = await store.callMany(read.map(({ p: [g], answer }) => callOf(g, answer.stamp)));
      read.forEach(({ p: [g, i] }, j) => {
        const r = rs[j] ?? [];
        const c = r.filter((x) => x.verdict === 'CONFLICT').length;
        conflicts += c;
        if (c > 0 && byGroup.get(g)?.some((fa) => finalSession(fa.arrival)) === true)
          throw new RedfenceError(
            'RF_CAS_CONFLICT',
            `topology batch ${batch.topic}/${batch.partition}: a key with emit-final sessions changed between its read and its write (another writer); its sessions were indexed from that read: run the batch again`,
            { details: { topic: batch.topic, partition: batch.partition, keys: 1 } },
          );
        if (c > 0) again.push([g, i]);
        else replies[i] = r;
      });
      pending = again;
    }
  };
  await Promise.all([sendPlain(), sendFolded()]);
  return { replies, conflicts };
}

/** The id of a store's value (and window) in a fold's state. */
function heldId(store: number, start: number | null): string {
  return start === null ? `${store}` : `${store}@${start}`;
}

/** What a group's folds read: each aggregation's values and timestamps, per window of the batch. */
function readRequest(g: KeyGroup, arrivals: readonly FoldArrival[]): StoreReadRequest {
  const kv = new Set<number>();
  const windows = new Map<number, Set<number>>();
  const hashes = new Set<number>();
  const pending = new Set<number>();
  const sessions = new Set<number>();
  for (const { arrival: a, placed } of arrivals) {
    const { valueStore, timeStore } = a.agg;
    if (a.session !== null) {
      sessions.add(valueStore);
      continue;
    }
    if (a.sliding) {
      hashes.add(valueStore);
      hashes.add(timeStore);
      // a record applied already: what it wrote moves the store time
      pending.add(g.records[placed.record]?.offset ?? 0);
      continue;
    }
    if (a.starts === null) {
      kv.add(valueStore);
      kv.add(timeStore);
      continue;
    }
    for (const store of [valueStore, timeStore]) {
      const starts = windows.get(store) ?? new Set<number>();
      for (const s of a.starts) starts.add(s);
      windows.set(store, starts);
    }
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
 * left beside no value is not read). Sliding records: fold-sliding.ts.
 */
class GroupFold {
  readonly #read = new Map<string, Buffer | null>();
  readonly #state = new Map<string, Held | null>();
  readonly #sliding = new Map<string, SlidingHeld>();
  readonly #pending = new Map<number, PendingEntry | null>();
  /** Session stores: their sessions, by store id. */
  readonly #sessions = new Map<number, SessionsHeld>();

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
    for (const w of answer.windows) this.#read.set(heldId(w.store, w.start), w.value);
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
    const stamp = this.answer.stamp;
    const applied = stamp !== null && stamp.partition === this.partition && rec.offset <= stamp.offset;
    if (a.session !== null) {
      if (!applied) foldSession(a, part, this.#sessionsOf(a.agg.valueStore));
      return;
    }
    if (a.sliding) {
      const clock = ctx.clocks.get(a.agg.node.name) as WindowClock;
      const held = this.#sliding.get(a.agg.node.name) as SlidingHeld;
      const n = applied
        ? appliedNewest(rec, placed.part, this.#pending.get(rec.offset))
        : foldSliding(a, part, held, clock, ctx.expireAt);
      newest.set(fa, n);
      clock.store = Math.max(clock.store, n);
      return;
    }
    if (!applied) this.#foldTime(a, part.effects);
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
    const stamp = this.answer.stamp;
    if (stamp !== null && stamp.partition === this.partition && rec.offset <= stamp.offset) return null;
    return foldSession(a, part, this.#sessionsOf(a.agg.valueStore));
  }

  #heldAt(a: Arrival, start: number | null): Held | null {
    const id = heldId(a.agg.valueStore, start);
    if (this.#state.has(id)) return this.#state.get(id) ?? null;
    const value = this.#read.get(id) ?? null;
    if (value === null) return null;
    const t = this.#read.get(heldId(a.agg.timeStore, start));
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
        old === null ? p.initializer() : p.valueSerde.deserialize(old.value as Buffer, changelog(p));
      const ts = old === null ? r.timestamp : Math.max(r.timestamp, old.ts);
      const next = p.aggregator(r.key, r.value, oldAgg);
      const bytes = next === null || next === undefined ? null : p.valueSerde.serialize(next, changelog(p));
      effects[2 * i] = withOp(
        effects[2 * i],
        bytes === null ? { op: 'delete' } : { op: 'set', value: bytes },
      );
      effects[2 * i + 1] = withOp(effects[2 * i + 1], { op: 'set', value: String(ts) });
      this.#state.set(heldId(a.agg.valueStore, start), bytes === null ? null : { value: bytes, ts });
    });
  }
}

function withOp(e: Effect | undefined, op: Extract<Effect, { kind: 'kv' }>['op']): Effect {
  if (e === undefined || (e.kind !== 'kv' && e.kind !== 'window'))
    throw new TypeError('a folded effect is a kv or window effect');
  return { ...e, op };
}
