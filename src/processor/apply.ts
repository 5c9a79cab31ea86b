/**
 * Apply: every planned record through the fence, grouped by key, one fence call per key (the fence packs
 * up to 128 keys per script). Operation processors need no read: the operation runs inside Redis.
 * Reducers read each key's state, fold the records in JS and write with a compare-and-set chain on the
 * fence; a key whose fence moved meanwhile answers CONFLICT and is read and folded again.
 *
 * The records go straight into the script arguments (the fence's `KeyBatch`) and the verdicts come
 * back in arrays by the record's place in the batch (`BatchResults`): no request or result object per
 * record on the common path.
 *
 * A compare-and-set that still conflicts after {@link MAX_CAS_ROUNDS} rounds means something else keeps
 * writing the same keys. That is not a Redis outage: it throws RF_CAS_CONFLICT, the batch is delivered
 * again from its first record (keys already applied answer SKIP or REEMIT), nothing of it is committed
 * or skipped, and consumption is not paused.
 */

import type { DeadLetterReason } from '../dead-letter/build.js';
import type { OperationProcessor, ProcessorDefinition } from '../definition/definition.js';
import { RedfenceError } from '../errors/index.js';
import { BatchResults, type Fence, type FenceToken, type Operation } from '../fence/index.js';
import { backoffMs, delay } from '../runtime/backoff.js';
import type { OwnerState } from './owner-state.js';
import type { Planned } from './plan.js';
import { storedDeadLetter } from './stored-dead-letter.js';
import { firstThrow, type UserCall, type UserResult } from './user-call.js';
import { checkOperation, checkReduction } from './user-result.js';

/** Read + compare-and-set rounds of a reducer batch before RF_CAS_CONFLICT. */
export const MAX_CAS_ROUNDS = 6;

export interface ApplyContext {
  readonly definition: ProcessorDefinition<unknown, unknown>;
  readonly fence: Pick<Fence, 'batch' | 'applyKeys' | 'read'>;
  /** Runs a Redis call through the outage guard (retried, consumption paused while Redis is down). */
  redisStep<T>(what: string, fn: () => Promise<T>): Promise<T>;
  readonly callUser: UserCall;
  readonly signal: AbortSignal;
  /** Owner-local state of a reducer's keys (owner-state.ts); absent: every key is read. */
  readonly owner?: OwnerState;
}

/** Where the batch is applied: its partition, the owner's epoch and the committed offset (prune watermark). */
export interface ApplyTarget {
  readonly topic: string;
  readonly partition: number;
  readonly epoch: number;
  readonly committed: number;
}

export type UserDeadLetter = { readonly reason: DeadLetterReason; readonly error: unknown };

/** Every index below is a record's place in the planned batch. */
export interface Applied {
  /** The verdicts by index; 'FENCED' when a newer owner holds the partition. */
  readonly results: BatchResults | 'FENCED';
  /** Reducer outputs by index (operation outputs come back in the results). */
  readonly outputs: (Buffer | string | null | undefined)[];
  /** Records whose user function threw, by index: dead-lettered, never applied. */
  readonly deadFromUser: Map<number, UserDeadLetter>;
}

/** The batch's keys in order of first appearance, each with its records as a chain of indexes. */
interface Groups {
  readonly keys: string[];
  readonly first: number[];
  /** The next index of the same key, -1 at the end. */
  readonly next: Int32Array;
}

function group(planned: readonly Planned[]): Groups {
  const index = new Map<string, number>();
  const keys: string[] = [];
  const first: number[] = [];
  const last: number[] = [];
  const next = new Int32Array(planned.length).fill(-1);
  for (let i = 0; i < planned.length; i++) {
    const p = planned[i] as Planned;
    if (p.dead) continue;
    const g = index.get(p.meta.key);
    if (g === undefined) {
      index.set(p.meta.key, keys.length);
      keys.push(p.meta.key);
      first.push(i);
      last.push(i);
    } else {
      next[last[g] as number] = i;
      last[g] = i;
    }
  }
  return { keys, first, next };
}

export async function applyAll(
  ctx: ApplyContext,
  target: ApplyTarget,
  planned: readonly Planned[],
): Promise<Applied> {
  const groups = group(planned);
  const results = new BatchResults(planned.length);
  const applied: Applied = { results, outputs: [], deadFromUser: new Map() };
  if (ctx.definition.operation) await applyOperations(ctx, target, planned, groups, applied);
  else {
    const tp = `${target.topic}/${target.partition}`;
    try {
      await applyReductions(ctx, target, planned, groups, applied);
    } catch (error) {
      // an unknown outcome (some keys may have applied): what this owner knows of them is gone
      ctx.owner?.dropPartition(tp);
      throw error;
    }
    if (results.fenced) ctx.owner?.dropPartition(tp);
  }
  if (results.fenced)
    return { outputs: applied.outputs, deadFromUser: applied.deadFromUser, results: 'FENCED' };
  return applied;
}

/** A user call's outcome after a direct call threw (see {@link firstThrow}). */
async function settle<R>(r: UserResult<R> | Promise<UserResult<R>>): Promise<UserResult<R>> {
  return r instanceof Promise ? await r : r;
}

async function applyOperations(
  ctx: ApplyContext,
  target: ApplyTarget,
  planned: readonly Planned[],
  groups: Groups,
  applied: Applied,
): Promise<void> {
  const def = ctx.definition as OperationProcessor<unknown>;
  const operation = def.operation;
  const mode = def.emit === 'none' ? 0 : 2;
  const batch = ctx.fence.batch(target.topic, target.partition, target.epoch, target.committed);
  for (let g = 0; g < groups.keys.length; g++) {
    batch.key(groups.keys[g] as string);
    for (let i = groups.first[g] as number; i >= 0; i = groups.next[i] as number) {
      const p = planned[i] as Planned;
      let op: unknown;
      let error: unknown;
      let failed = false;
      try {
        op = operation(p.value, p.meta);
      } catch (e) {
        const r = await settle(ctx.callUser(firstThrow(e, () => operation(p.value, p.meta))));
        if (r.ok) op = r.value;
        else {
          failed = true;
          error = r.error;
        }
      }
      // a wrong shape is a throw: dead-lettered, never the whole batch failing in the codec
      if (!failed) {
        error = checkOperation(op);
        failed = error !== undefined;
      }
      if (failed) {
        applied.deadFromUser.set(i, { reason: 'processing-error', error });
        continue;
      }
      batch.record(i, p.meta.offset, op as Operation, mode);
    }
  }
  const results = applied.results as BatchResults;
  await ctx.redisStep('apply', () => ctx.fence.applyKeys(batch, results));
}

async function applyReductions(
  ctx: ApplyContext,
  target: ApplyTarget,
  planned: readonly Planned[],
  groups: Groups,
  applied: Applied,
): Promise<void> {
  const def = ctx.definition;
  const reduce = def.reduce as NonNullable<typeof def.reduce>;
  const results = applied.results as BatchResults;
  const { outputs, deadFromUser } = applied;
  const { partition } = target;
  const tp = `${target.topic}/${partition}`;
  /** Per group: the state's JSON text and the key's token after its records (owner-local state). */
  const after: [string | null, FenceToken | null][] = [];
  const groupOf = new Map<string, number>();
  for (let g = 0; g < groups.keys.length; g++) groupOf.set(groups.keys[g] as string, g);
  let pending = groups.keys.map((_, g) => g);
  for (let round = 0; pending.length > 0; round++) {
    if (round >= MAX_CAS_ROUNDS)
      throw new RedfenceError(
        'RF_CAS_CONFLICT',
        `compare-and-set kept conflicting for ${pending.length} keys of ${target.topic}/${partition} after ${MAX_CAS_ROUNDS} rounds; the batch is delivered again`,
        { details: { topic: target.topic, partition, keys: pending.length } },
      );
    // another writer is on these keys: let it finish before reading again
    if (round > 0) await delay(backoffMs(round - 1, 5, 200), ctx.signal);
    const owner = round === 0 ? ctx.owner : undefined;
    const states = await ctx.redisStep('read', () =>
      Promise.all(
        pending.map((g) => {
          const key = groups.keys[g] as string;
          const first = (planned[groups.first[g] as number] as Planned).meta.offset;
          return owner?.stored(tp, partition, target.epoch, key, first) ?? ctx.fence.read(key);
        }),
      ),
    );
    const batch = ctx.fence.batch(target.topic, partition, target.epoch, target.committed);
    for (let j = 0; j < pending.length; j++) {
      const g = pending[j] as number;
      const stored = states[j] ?? null;
      let text: string | null = stored?.value == null ? null : stored.value.toString('utf8');
      let current: unknown = text === null ? null : JSON.parse(text);
      // a generation (a writer outside the owner, e.g. reconcile --repair) stays in the key's token
      const generation = stored?.generation === undefined ? {} : { generation: stored.generation };
      let token: FenceToken | null =
        stored === null ? null : { partition: stored.partition, offset: stored.offset, ...generation };
      batch.key(groups.keys[g] as string);
      for (let i = groups.first[g] as number; i >= 0; i = groups.next[i] as number) {
        const p = planned[i] as Planned;
        if (stored !== null && stored.partition === partition && p.meta.offset <= stored.offset) {
          // already applied: the script answers SKIP or REEMIT before looking at the value
          batch.cas(i, p.meta.offset, token, '', 1, '');
          continue;
        }
        let red: unknown;
        let failed = false;
        let error: unknown;
        try {
          red = reduce(current, p.value, p.meta);
        } catch (e) {
          const r = await settle(ctx.callUser(firstThrow(e, () => reduce(current, p.value, p.meta))));
          if (r.ok) red = r.value;
          else {
            failed = true;
            error = r.error;
          }
        }
        // a wrong shape (the state itself instead of { state }) is a throw: dead-lettered, never the
        // whole batch failing in the codec and delivered again for ever
        const checked = failed ? { ok: false as const, error } : checkReduction(red);
        if (!checked.ok) {
          deadFromUser.set(i, { reason: 'processing-error', error: checked.error });
          // kept in Redis as a dead letter (the value unchanged, the fence past it): once a later record
          // of the key moves the fence, a replay of the batch answers REEMIT with it, not SKIP
          batch.cas(i, p.meta.offset, token, '', 4, storedDeadLetter(checked.error));
          token = { partition, offset: p.meta.offset, ...generation };
          continue;
        }
        const { json, emit, output } = checked;
        if (emit) outputs[i] = output;
        if (!emit) batch.cas(i, p.meta.offset, token, json, 0);
        else if (output === null) batch.cas(i, p.meta.offset, token, json, 3);
        else batch.cas(i, p.meta.offset, token, json, 1, output);
        current = checked.state;
        text = json;
        token = { partition, offset: p.meta.offset, ...generation };
      }
      after[g] = [text, token];
    }
    const conflicts = await ctx.redisStep('apply', () => ctx.fence.applyKeys(batch, results));
    const again = conflicts.map((k) => groupOf.get(batch.userKeys[k] as string) as number);
    if (ctx.owner !== undefined)
      keepOwned(ctx.owner, tp, target.epoch, groups, pending, again, after, results);
    pending = again.sort((a, b) => a - b);
  }
}

/**
 * Verdict letters a reducer's record may have and leave the key as the fold computed it (REJECT: the
 * reducer threw, kept as a dead letter with the value unchanged).
 */
const SETTLED = new Set([65, 66, 82, 83, 88, 0]); // APPLY, REBASE, REEMIT, SKIP, REJECT, not sent

/**
 * After a round: each sent key whose records all settled keeps the state its fold left and its new
 * token; a key sent again (CONFLICT) or with another verdict is forgotten.
 */
function keepOwned(
  owner: OwnerState,
  tp: string,
  epoch: number,
  groups: Groups,
  sent: readonly number[],
  again: readonly number[],
  after: readonly [string | null, FenceToken | null][],
  results: BatchResults,
): void {
  const conflicted = new Set(again);
  for (const g of sent) {
    const key = groups.keys[g] as string;
    const [json, token] = after[g] ?? [null, null];
    let settled = !conflicted.has(g) && token !== null;
    for (let i = groups.first[g] as number; settled && i >= 0; i = groups.next[i] as number)
      settled = SETTLED.has(results.verdicts[i] as number);
    if (settled && token !== null) owner.keep(tp, epoch, key, json, token);
    else owner.forget(tp, key);
  }
}
