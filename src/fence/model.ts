/**
 * A pure TypeScript reference model of the fence decision table: the same inputs and the same
 * verdicts as lua/includes/applyCore.lua, without Redis. Tests run both side by side; it also
 * documents the table in code.
 *
 * Values are text. Float arithmetic follows JS doubles, so it matches Redis' HINCRBYFLOAT (long
 * double) only for values both represent exactly; integer addition is exact 64-bit, like HINCRBY.
 */
import { parseToken, tokenText } from './codec.js';
import type { FenceRecord, FencingMode, RecordResult } from './types.js';

/** A pending entry: the record's output text (null: a tombstone output), or its dead-letter reason. */
type PendingEntry = { output: string | null } | { deadLetter: string };

/** A key's stored state in the model: value text (null after delete), fence, writer epoch, pending entries. */
export interface ModelState {
  value: string | null;
  partition: number;
  offset: number;
  epoch: number;
  /** The key's generation (field g): bumped by a writer outside the owner (reconcile --repair); absent: 0. */
  generation?: number;
  /** offset -> entry: { output: text | null } or { deadLetter: reason } */
  pending: Map<number, PendingEntry>;
}

export interface ModelApplyInput {
  partition: number;
  epoch: number;
  committedOffset: number;
  records: readonly FenceRecord[];
}

export interface ModelOptions {
  mode: FencingMode;
  /** strict mode only: the partition's current epoch (0 when never acquired). */
  partitionEpoch?: number;
}

const INT = /^-?(0|[1-9][0-9]*)$/;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

function text(v: string | Uint8Array): string {
  return typeof v === 'string' ? v : Buffer.from(v).toString('utf8');
}

/** Lua's tonumber on decimal text (what the scripts' max/min use); NaN when Lua would give nil. */
function luaNumber(s: string): number {
  if (s.trim() === '') return Number.NaN;
  return Number(s);
}

function cloneState(s: ModelState | null): ModelState | null {
  return s === null ? null : { ...s, pending: new Map(s.pending) };
}

/** Which row of the table a record falls in: APPLY / REBASE with its `gap` / `previousPartition`, or a duplicate. */
type Row = { kind: 'APPLY' | 'REBASE'; n: number } | { kind: 'DUPLICATE' };

function rowOf(s: ModelState | null, partition: number, off: number): Row {
  if (s === null) return { kind: 'APPLY', n: -1 };
  if (s.partition !== partition) return { kind: 'REBASE', n: s.partition };
  if (off > s.offset) return { kind: 'APPLY', n: off - s.offset - 1 };
  return { kind: 'DUPLICATE' };
}

/** A duplicate (at or behind the fence): REEMIT its pending entry, or SKIP when none is kept. */
function duplicate(cur: ModelState, off: number): RecordResult {
  const entry = cur.pending.get(off);
  if (entry === undefined) return { verdict: 'SKIP', offset: off };
  if ('deadLetter' in entry) return { verdict: 'REEMIT', offset: off, deadLetter: entry.deadLetter };
  return {
    verdict: 'REEMIT',
    offset: off,
    output: { value: entry.output === null ? null : Buffer.from(entry.output) },
  };
}

/** The operation on the stored value: the new value, or why it is rejected, or the CAS token that conflicts. */
interface OperationOutcome {
  value: string | null;
  reason?: string;
  conflict?: string;
}

function operate(s: ModelState | null, op: FenceRecord['operation']): OperationOutcome {
  const value = s === null ? null : s.value;
  switch (op.op) {
    case 'set':
      return { value: text(op.value) };
    case 'add': {
      if (value !== null && !INT.test(value))
        return { value, reason: 'add failed: ERR hash value is not an integer' };
      const sum = BigInt(value ?? '0') + BigInt(op.by);
      if (sum < INT64_MIN || sum > INT64_MAX)
        return { value, reason: 'add failed: ERR increment or decrement would overflow' };
      return { value: sum.toString() };
    }
    case 'addFloat': {
      const cur = value === null ? 0 : luaNumber(value);
      if (Number.isNaN(cur)) return { value, reason: 'addf failed: ERR hash value is not a float' };
      return { value: String(cur + op.by) };
    }
    case 'max':
    case 'min': {
      const cur = value === null ? undefined : luaNumber(value);
      if (cur !== undefined && Number.isNaN(cur))
        return { value, reason: `${op.op} failed: stored value is not a number` };
      if (cur === undefined || (op.op === 'max' ? op.value > cur : op.value < cur))
        return { value: String(op.value) };
      return { value };
    }
    case 'delete':
      return { value: null };
    case 'cas': {
      const token =
        s === null
          ? '-'
          : tokenText({
              partition: s.partition,
              offset: s.offset,
              ...(s.generation === undefined ? {} : { generation: s.generation }),
            });
      if (token !== tokenText(op.expected)) return { value, conflict: token };
      return { value: text(op.value) };
    }
  }
}

function conflictResult(off: number, conflict: string): RecordResult {
  return { verdict: 'CONFLICT', offset: off, current: parseToken(conflict) };
}

/**
 * A record past the fence (APPLY / REBASE row) whose operation did not conflict: the new state (the
 * fence moves to its offset even when rejected; a REBASE starts a fresh pending map) and its verdict.
 */
function advance(
  s: ModelState | null,
  r: FenceRecord,
  row: { kind: 'APPLY' | 'REBASE'; n: number },
  outcome: OperationOutcome,
  at: { partition: number; epoch: number },
): { state: ModelState; result: RecordResult } {
  const off = r.offset;
  const pending = row.kind === 'REBASE' || s === null ? new Map<number, PendingEntry>() : s.pending;
  const { value, reason } = outcome;
  const state: ModelState = {
    value: reason === undefined ? value : s === null ? null : s.value,
    partition: at.partition,
    offset: off,
    epoch: at.epoch,
    // writes by the owner keep the key's generation (the scripts never touch field g)
    ...(s?.generation === undefined ? {} : { generation: s.generation }),
    pending,
  };
  if (reason !== undefined) {
    pending.set(off, { deadLetter: reason });
    return { state, result: { verdict: 'REJECT', offset: off, reason } };
  }
  let stateOutput: string | null | undefined;
  if (r.output === 'state') {
    stateOutput = value;
    pending.set(off, { output: value });
  } else if (r.output !== undefined && 'value' in r.output) {
    pending.set(off, { output: r.output.value === null ? null : text(r.output.value) });
  }
  const output =
    stateOutput === undefined
      ? {}
      : { output: { value: stateOutput === null ? null : Buffer.from(stateOutput) } };
  const result: RecordResult =
    row.kind === 'APPLY'
      ? { verdict: 'APPLY', offset: off, gap: row.n, ...output }
      : { verdict: 'REBASE', offset: off, previousPartition: row.n, ...output };
  return { state, result };
}

/**
 * Applies one call's records to `state` (not mutated) and returns the verdicts and the new state. The
 * table: a stale epoch FENCEs the whole call; otherwise per record, a duplicate REEMITs or SKIPs
 * ({@link duplicate}), a record past the fence is operated on ({@link operate}) and CONFLICTs, is
 * REJECTed, or APPLYs / REBASEs ({@link advance}).
 */
export function decideApply(
  state: ModelState | null,
  input: ModelApplyInput,
  options: ModelOptions,
): { results: RecordResult[]; state: ModelState | null } {
  const { partition, epoch, committedOffset, records } = input;
  const fenceAll = (by: number) => ({
    results: records.map((r): RecordResult => ({ verdict: 'FENCE', offset: r.offset, epoch: by })),
    state,
  });

  if (options.mode === 'strict' && epoch < (options.partitionEpoch ?? 0))
    return fenceAll(options.partitionEpoch ?? 0);
  if (state !== null && state.partition === partition && epoch < state.epoch) return fenceAll(state.epoch);

  let s = cloneState(state);
  if (s !== null && s.partition === partition && committedOffset >= 0) {
    for (const off of [...s.pending.keys()]) if (off < committedOffset) s.pending.delete(off);
  }

  const results: RecordResult[] = [];
  for (const r of records) {
    const row = rowOf(s, partition, r.offset);
    if (row.kind === 'DUPLICATE') {
      const cur = s as ModelState;
      results.push(duplicate(cur, r.offset));
      if (epoch > cur.epoch) cur.epoch = epoch;
      continue;
    }
    // a dead letter the caller made: the value kept, its reason stored (a cas checks its token first)
    const dead = typeof r.output === 'object' && 'deadLetter' in r.output ? r.output.deadLetter : undefined;
    const outcome =
      dead !== undefined && r.operation.op !== 'cas'
        ? { value: s === null ? null : s.value }
        : operate(s, r.operation);
    if (outcome.conflict !== undefined) {
      results.push(conflictResult(r.offset, outcome.conflict));
      continue;
    }
    const next = advance(s, r, row, dead === undefined ? outcome : { ...outcome, reason: dead }, {
      partition,
      epoch,
    });
    s = next.state;
    results.push(next.result);
  }
  return { results, state: s };
}
