/**
 * Apply: every planned record through the fence, grouped by key, one fence call per key (the fence packs
 * up to 128 keys per script). Operation processors need no read: the operation runs inside Redis.
 * Reducers read each key's state, fold the records in JS and write with a compare-and-set chain on the
 * fence; a key whose fence moved meanwhile answers CONFLICT and is read and folded again.
 *
 * A compare-and-set that still conflicts after {@link MAX_CAS_ROUNDS} rounds means something else keeps
 * writing the same keys. That is not a Redis outage: it throws RF_CAS_CONFLICT, the batch is delivered
 * again from its first record (keys already applied answer SKIP or REEMIT), nothing of it is committed
 * or skipped, and consumption is not paused.
 */

import type { DeadLetterReason } from '../dead-letter/build.js';
import type { OperationProcessor, ProcessorDefinition } from '../definition/definition.js';
import { RedfenceError } from '../errors/index.js';
import type { ApplyRequest, Fence, FenceRecord, RecordResult } from '../fence/index.js';
import { backoffMs, delay } from '../runtime/backoff.js';
import type { Planned } from './plan.js';
import type { UserCall } from './user-call.js';
import { checkOperation, checkReduction } from './user-result.js';

/** Read + compare-and-set rounds of a reducer batch before RF_CAS_CONFLICT. */
export const MAX_CAS_ROUNDS = 6;

export interface ApplyContext {
  readonly definition: ProcessorDefinition<unknown, unknown>;
  readonly fence: Pick<Fence, 'applyBatch' | 'read'>;
  /** Runs a Redis call through the outage guard (retried, consumption paused while Redis is down). */
  redisStep<T>(what: string, fn: () => Promise<T>): Promise<T>;
  readonly callUser: UserCall;
  readonly signal: AbortSignal;
}

/** Where the batch is applied: its partition, the owner's epoch and the committed offset (prune watermark). */
export interface ApplyTarget {
  readonly topic: string;
  readonly partition: number;
  readonly epoch: number;
  readonly committed: number;
}

export type UserDeadLetter = { readonly reason: DeadLetterReason; readonly error: unknown };

export interface Applied {
  /** One result per applied offset; 'FENCED' when a newer owner holds the partition. */
  readonly results: Map<number, RecordResult> | 'FENCED';
  /** Reducer outputs by offset (operation outputs come back in the results). */
  readonly outputs: Map<number, Buffer | string | null>;
  /** Records whose user function threw: dead-lettered, never applied. */
  readonly deadFromUser: Map<number, UserDeadLetter>;
}

export async function applyAll(
  ctx: ApplyContext,
  target: ApplyTarget,
  planned: readonly Planned[],
): Promise<Applied> {
  const byKey = new Map<string, Planned[]>();
  for (const p of planned) {
    if (p.dead) continue;
    const list = byKey.get(p.meta.key) ?? [];
    if (list.length === 0) byKey.set(p.meta.key, list);
    list.push(p);
  }
  const applied: Applied = { results: new Map(), outputs: new Map(), deadFromUser: new Map() };
  const results = applied.results as Map<number, RecordResult>;
  if (ctx.definition.operation) await applyOperations(ctx, target, byKey, results, applied.deadFromUser);
  else await applyReductions(ctx, target, byKey, applied);
  for (const r of results.values()) if (r.verdict === 'FENCE') return { ...applied, results: 'FENCED' };
  return applied;
}

async function applyOperations(
  ctx: ApplyContext,
  target: ApplyTarget,
  byKey: Map<string, Planned[]>,
  results: Map<number, RecordResult>,
  deadFromUser: Map<number, UserDeadLetter>,
): Promise<void> {
  const def = ctx.definition as OperationProcessor<unknown>;
  const operation = def.operation;
  const base = request(target);
  const requests: ApplyRequest[] = [];
  for (const [key, list] of byKey) {
    const recs: FenceRecord[] = [];
    for (const p of list) {
      const call = ctx.callUser(() => operation(p.value, p.meta));
      const op = call instanceof Promise ? await call : call;
      // a wrong shape is a throw: dead-lettered, never the whole batch failing in the codec
      const error = op.ok ? checkOperation(op.value) : op.error;
      if (!op.ok || error !== undefined) {
        deadFromUser.set(p.meta.offset, { reason: 'processing-error', error });
        continue;
      }
      recs.push({
        offset: p.meta.offset,
        operation: op.value,
        ...(def.emit === 'none' ? {} : { output: 'state' as const }),
      });
    }
    if (recs.length > 0) requests.push({ ...base, key, records: recs });
  }
  const replies = await ctx.redisStep('apply', () => ctx.fence.applyBatch(requests));
  for (const reply of replies) for (const r of reply) results.set(r.offset, r);
}

async function applyReductions(
  ctx: ApplyContext,
  target: ApplyTarget,
  byKey: Map<string, Planned[]>,
  applied: Applied,
): Promise<void> {
  const def = ctx.definition;
  const reduce = def.reduce as NonNullable<typeof def.reduce>;
  const results = applied.results as Map<number, RecordResult>;
  const { outputs, deadFromUser } = applied;
  const base = request(target);
  const { partition } = target;
  let pending = [...byKey];
  for (let round = 0; pending.length > 0; round++) {
    if (round >= MAX_CAS_ROUNDS)
      throw new RedfenceError(
        'RF_CAS_CONFLICT',
        `compare-and-set kept conflicting for ${pending.length} keys of ${target.topic}/${partition} after ${MAX_CAS_ROUNDS} rounds; the batch is delivered again`,
        { details: { topic: target.topic, partition, keys: pending.length } },
      );
    // another writer is on these keys: let it finish before reading again
    if (round > 0) await delay(backoffMs(round - 1, 5, 200), ctx.signal);
    const states = await ctx.redisStep('read', () =>
      Promise.all(pending.map(([key]) => ctx.fence.read(key))),
    );
    const requests: ApplyRequest[] = [];
    for (const [i, [key, list]] of pending.entries()) {
      const stored = states[i] ?? null;
      let current: unknown = stored?.value == null ? null : JSON.parse(stored.value.toString('utf8'));
      let token = stored === null ? null : { partition: stored.partition, offset: stored.offset };
      const recs: FenceRecord[] = [];
      for (const p of list) {
        if (stored !== null && stored.partition === partition && p.meta.offset <= stored.offset) {
          // already applied: the script answers SKIP or REEMIT before looking at the value
          recs.push({
            offset: p.meta.offset,
            operation: { op: 'cas', expected: token, value: '' },
            output: { value: '' },
          });
          continue;
        }
        const call = ctx.callUser(() => reduce(current, p.value, p.meta));
        const red = call instanceof Promise ? await call : call;
        // a wrong shape (the state itself instead of { state }) is a throw: dead-lettered, never the
        // whole batch failing in the codec and delivered again for ever
        const checked = red.ok ? checkReduction(red.value) : { ok: false as const, error: red.error };
        if (!checked.ok) {
          deadFromUser.set(p.meta.offset, { reason: 'processing-error', error: checked.error });
          continue;
        }
        const { json, emit, output } = checked;
        if (emit) outputs.set(p.meta.offset, output);
        recs.push({
          offset: p.meta.offset,
          operation: { op: 'cas', expected: token, value: json },
          ...(emit ? { output: { value: output } } : {}),
        });
        current = checked.state;
        token = { partition, offset: p.meta.offset };
      }
      if (recs.length > 0) requests.push({ ...base, key, records: recs });
    }
    const replies = await ctx.redisStep('apply', () => ctx.fence.applyBatch(requests));
    const retry = new Set<string>();
    replies.forEach((reply, i) => {
      for (const r of reply) {
        if (r.verdict === 'CONFLICT') retry.add(String(requests[i]?.key));
        else results.set(r.offset, r);
      }
    });
    pending = pending.filter(([key]) => retry.has(key));
  }
}

function request(target: ApplyTarget): Omit<ApplyRequest, 'key' | 'records'> {
  return {
    topic: target.topic,
    partition: target.partition,
    epoch: target.epoch,
    committedOffset: target.committed,
  };
}
