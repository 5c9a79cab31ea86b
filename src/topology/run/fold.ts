/**
 * Reduce and aggregate on Redis (JS functions): read-then-write. The batch's key groups that hold a
 * reduce or aggregate are read once each (KeyStore.read, in parallel: the key's values and timestamps,
 * stamped with the last record applied to the key), folded in JS per key in offset order, and sent with
 * `expect` = the stamp, so the call applies only if nothing wrote the key since the read. Records at or
 * below the stamp's offset on the same partition were applied already (a replay): their effects keep
 * their placeholders and the key call answers REEMIT (the results they were applied with) or SKIP. A key
 * answered CONFLICT (another writer moved its token) is read and folded again; after
 * {@link MAX_FOLD_ROUNDS} rounds the batch fails with RF_CAS_CONFLICT (retriable: run it again).
 * Groups without a reduce or aggregate are sent as they are, without `expect`, with the first round's
 * calls: the first round reads and folds every key before any call is sent, so a reducer, aggregator,
 * initializer, merger or store serde that throws there has written nothing (a FoldThrew: the executor
 * makes the record a dead letter and runs the batch again); a record the fence passed without a pending
 * result threw so before (FoldThrew 'before'). Each group's fold is
 * fold-group.ts. Session windows (fold-session.ts) and sliding windows (fold-sliding.ts) are folded the
 * same way; as the sliding store time couples the keys of a partition, every round folds the batch's
 * records in offset order across keys. Session windows with emit('final') are read and folded once
 * before the calls (fold-ahead.ts: their sessions go into the close index), and the first round
 * folds those reads again; such a key answered CONFLICT fails the batch with RF_CAS_CONFLICT.
 */
import { RedfenceError } from '../../errors/index.js';
import { backoffMs, delay } from '../../runtime/backoff.js';
import type {
  KeyCall,
  KeyRecordResult,
  KeyStore,
  StateStamp,
  StoreReadRequest,
  StoreToken,
} from '../../store/index.js';
import { nodeThrew, STORED } from '../threw.js';
import { folds } from './arrive.js';
import type { WindowClock } from './final.js';
import { type FoldArrival, type FoldContext, FoldThrew, GroupFold, readRequest } from './fold-group.js';
import type { KeyPart } from './note.js';
import type { KeyGroup, PlacedStep } from './steps.js';
import type { TopologyBatch } from './types.js';

export { type FoldContext, FoldThrew } from './fold-group.js';

/** A read's stamp as the token a call expects (its epoch is not compared; its generation is). */
function tokenOf(s: StateStamp): StoreToken {
  const t = { partition: s.partition, offset: s.offset };
  return s.generation === undefined ? t : { ...t, generation: s.generation };
}

/** Read + fold + write rounds of a key before RF_CAS_CONFLICT (as the processor's reducer path). */
export const MAX_FOLD_ROUNDS = 6;

export type Where = Pick<TopologyBatch, 'topic' | 'partition' | 'epoch' | 'committedOffset'>;

/** The folded arrivals per group, and all of them in offset order. */
export function arrivalsByGroup(steps: readonly PlacedStep[]) {
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
 * What a fold's throw does to the batch: in round 0 (nothing sent yet) a FoldThrew of the aggregation's
 * own code stays one (the executor runs the batch again with its record a dead letter; 'before' gets
 * the error it names); a store serde that cannot read, and any throw in a later round (other keys are
 * written), is RF_TOPOLOGY_NODE_THREW.
 */
export function settled(e: FoldThrew, batch: Where, round: number): FoldThrew | Error {
  const at = { topic: batch.topic, partition: batch.partition, offset: e.offset };
  const error =
    e.kind === 'before'
      ? new RedfenceError(
          'RF_TOPOLOGY_NODE_THREW',
          `topology node ${e.node} threw on ${at.topic}/${at.partition} offset ${at.offset} when its batch ran before (what it threw then is not kept); the record was not applied`,
          { details: { node: e.node, ...at, where: 'replayed' } },
        )
      : e.error;
  if (e.kind === 'stored') return nodeThrew(e.node, at, error, STORED);
  if (round > 0)
    return nodeThrew(e.node, at, error, 'in a read-then-write round after a CONFLICT, other keys written');
  return new FoldThrew(e.offset, e.node, e.kind, error);
}

/**
 * Sends every group's key call: folded groups read-then-write (retried on CONFLICT), the others with
 * them. Round 0 reads and folds every folded group before any call is sent, so a throw of an
 * aggregation's own code there (the earliest record that throws: the folds run in offset order) is a
 * FoldThrew with nothing written; in a later round it is RF_TOPOLOGY_NODE_THREW ({@link settled}).
 * `dry`: round 0's reads and folds only, nothing sent (what throws). Returns each group's results in
 * `groups` order, how many key records answered CONFLICT, and how many keys round 0 took from
 * owner-local state (`ctx.owner`) or read.
 */
export async function callGroups(
  store: KeyStore,
  batch: Where,
  groups: readonly KeyGroup[],
  steps: readonly PlacedStep[],
  ctx: FoldContext,
  dry = false,
): Promise<{ replies: KeyRecordResult[][]; conflicts: number; cache: { hits: number; misses: number } }> {
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
  const replies: KeyRecordResult[][] = new Array(groups.length);
  const callOf = (g: KeyGroup, expect?: StateStamp | null): KeyCall => {
    const call = {
      partition: batch.partition,
      epoch: batch.epoch,
      committedOffset: batch.committedOffset,
      key: g.key,
      records: callRecords(g.records),
    };
    return expect === undefined ? call : { ...call, expect: expect === null ? null : tokenOf(expect) };
  };
  const tp = `${batch.topic}/${batch.partition}`;
  /** The groups sent as they are (no fold), by index in `groups`. */
  const plain: number[] = [];
  for (let i = 0; i < groups.length; i++) if (!byGroup.has(groups[i] as KeyGroup)) plain.push(i);
  const sendPlain = async () => {
    if (plain.length === 0) return;
    const calls: KeyCall[] = new Array(plain.length);
    for (let j = 0; j < plain.length; j++) calls[j] = callOf(groups[plain[j] as number] as KeyGroup);
    const rs = await store.callMany(calls);
    for (let j = 0; j < plain.length; j++) {
      const i = plain[j] as number;
      const r = rs[j] ?? [];
      replies[i] = r;
      ctx.owner?.after(tp, groups[i] as KeyGroup, batch.partition, batch.epoch, r);
    }
  };
  let conflicts = 0;
  const cache = { hits: 0, misses: 0 };
  // a group's read request depends only on its arrivals: made once, used by every read and the cache
  const requests = new Map<KeyGroup, StoreReadRequest>();
  const requestOf = (g: KeyGroup): StoreReadRequest => {
    const known = requests.get(g);
    if (known !== undefined) return known;
    const r = readRequest(g, byGroup.get(g) ?? []);
    requests.set(g, r);
    return r;
  };
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
      const readOf = ([g]: readonly [KeyGroup, number]) => {
        const ahead = round === 0 ? ctx.ahead?.get(g.key.toString('hex')) : undefined;
        if (ahead !== undefined) return ahead;
        const request = requestOf(g);
        // owner-local state: round 0 only (a CONFLICT means the cache was wrong about the key)
        if (round > 0 || ctx.owner === undefined) return store.readParts(request);
        const cached = ctx.owner.answer(tp, g, batch.partition, request);
        if (cached === undefined) cache.misses++;
        else cache.hits++;
        return cached ?? store.readParts(request);
      };
      const answers = await Promise.all(pending.map(readOf));
      // round 0 folds every key before any call: a key whose reads in parts saw different stamps is
      // read again first (bounded as the rounds are)
      for (let tries = 1; round === 0 && answers.includes(null); tries++) {
        if (tries >= MAX_FOLD_ROUNDS)
          throw new RedfenceError(
            'RF_CAS_CONFLICT',
            `topology batch ${batch.topic}/${batch.partition}: a key kept changing while it was read in parts; run the batch again`,
            { details: { topic: batch.topic, partition: batch.partition, keys: 1 } },
          );
        await Promise.all(
          pending.map(async (p, j) => {
            if (answers[j] === null) answers[j] = await store.readParts(requestOf(p[0]));
          }),
        );
      }
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
      try {
        for (const fa of order) {
          const f = folding.get(fa.placed.group);
          if (f !== undefined) f.apply(fa, ctx, newest);
          else if (fa.arrival.sliding) {
            // sent in an earlier round: the windows it wrote move the store time as they did then
            const clock = ctx.clocks.get(fa.arrival.agg.node.name) as WindowClock;
            clock.store = Math.max(clock.store, newest.get(fa) ?? -1);
          }
        }
      } catch (error) {
        throw error instanceof FoldThrew ? settled(error, batch, round) : error;
      }
      if (dry) return;
      const calls = read.map(({ p: [g], answer }) => callOf(g, answer.stamp));
      // round 0: the plain groups' calls go with the folded ones, once every fold is done
      const [rs] = await Promise.all([store.callMany(calls), round === 0 ? sendPlain() : undefined]);
      read.forEach(({ p: [g, i], answer }, j) => {
        const r = rs[j] ?? [];
        const c = r.filter((x) => x.verdict === 'CONFLICT').length;
        conflicts += c;
        const f = folding.get(g);
        if (ctx.owner !== undefined && f !== undefined)
          ctx.owner.after(tp, g, batch.partition, batch.epoch, r, {
            read: answer,
            request: requestOf(g),
            written: f.written,
          });
        if (c > 0 && ctx.ahead?.has(g.key.toString('hex')) === true)
          throw new RedfenceError(
            'RF_CAS_CONFLICT',
            `topology batch ${batch.topic}/${batch.partition}: a key with emit-final sessions or sliding windows changed between its read and its write (another writer); its windows were indexed from that read: run the batch again`,
            { details: { topic: batch.topic, partition: batch.partition, keys: 1 } },
          );
        if (c > 0) again.push([g, i]);
        else replies[i] = r;
      });
      pending = again;
    }
  };
  if (plain.length < groups.length) await sendFolded();
  else if (!dry) await sendPlain();
  // a group without results (dry, or none answered): no records
  for (let i = 0; i < replies.length; i++) replies[i] ??= [];
  return { replies, conflicts, cache };
}

/**
 * A group's records as the call sends them: each its parts' effects in order (one part: its own list,
 * not a copy; set again per call, a fold may have replaced a part's list), the records themselves.
 */
function callRecords(records: KeyGroup['records']): KeyCall['records'] {
  for (const r of records)
    r.effects = r.parts.length === 1 ? (r.parts[0] as KeyPart).effects : r.parts.flatMap((p) => p.effects);
  return records;
}
