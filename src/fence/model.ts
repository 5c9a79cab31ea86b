/**
 * A pure TypeScript reference model of the fence decision table: the same inputs and the same
 * verdicts as lua/includes/applyCore.lua, without Redis. Tests run both side by side; it also
 * documents the table in code.
 *
 * Values are text. Float arithmetic follows JS doubles, so it matches Redis' HINCRBYFLOAT (long
 * double) only for values both represent exactly; integer addition is exact 64-bit, like HINCRBY.
 */
import { tokenText } from './codec.js';
import type { FenceRecord, FencingMode, RecordResult } from './types.js';

/** A key's stored state in the model: value text (null after delete), fence, writer epoch, pending entries. */
export interface ModelState {
  value: string | null;
  partition: number;
  offset: number;
  epoch: number;
  /** offset -> entry: { output: text | null } or { deadLetter: reason } */
  pending: Map<number, { output: string | null } | { deadLetter: string }>;
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

/** Applies one call's records to `state` (not mutated) and returns the verdicts and the new state. */
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
    const off = r.offset;
    let kind: 'APPLY' | 'REBASE' | undefined;
    let n = 0;
    if (s === null) {
      kind = 'APPLY';
      n = -1;
    } else if (s.partition !== partition) {
      kind = 'REBASE';
      n = s.partition;
    } else if (off > s.offset) {
      kind = 'APPLY';
      n = off - s.offset - 1;
    }

    if (kind === undefined) {
      const cur = s as ModelState;
      const entry = cur.pending.get(off);
      if (entry === undefined) results.push({ verdict: 'SKIP', offset: off });
      else if ('deadLetter' in entry)
        results.push({ verdict: 'REEMIT', offset: off, deadLetter: entry.deadLetter });
      else
        results.push({
          verdict: 'REEMIT',
          offset: off,
          output: { value: entry.output === null ? null : Buffer.from(entry.output) },
        });
      if (epoch > cur.epoch) cur.epoch = epoch;
      continue;
    }

    let value = s === null ? null : s.value;
    let reason: string | undefined;
    let conflict: string | undefined;
    const op = r.operation;
    switch (op.op) {
      case 'set':
        value = text(op.value);
        break;
      case 'add': {
        if (value !== null && !INT.test(value)) {
          reason = 'add failed: ERR hash value is not an integer';
          break;
        }
        const sum = BigInt(value ?? '0') + BigInt(op.by);
        if (sum < INT64_MIN || sum > INT64_MAX)
          reason = 'add failed: ERR increment or decrement would overflow';
        else value = sum.toString();
        break;
      }
      case 'addFloat': {
        const cur = value === null ? 0 : luaNumber(value);
        if (Number.isNaN(cur)) reason = 'addf failed: ERR hash value is not a float';
        else value = String(cur + op.by);
        break;
      }
      case 'max':
      case 'min': {
        const cur = value === null ? undefined : luaNumber(value);
        if (cur !== undefined && Number.isNaN(cur)) reason = `${op.op} failed: stored value is not a number`;
        else if (cur === undefined || (op.op === 'max' ? op.value > cur : op.value < cur))
          value = String(op.value);
        break;
      }
      case 'delete':
        value = null;
        break;
      case 'cas': {
        const token = s === null ? '-' : tokenText({ partition: s.partition, offset: s.offset });
        if (token !== tokenText(op.expected)) conflict = token;
        else value = text(op.value);
        break;
      }
    }

    if (conflict !== undefined) {
      results.push({
        verdict: 'CONFLICT',
        offset: off,
        current:
          conflict === '-'
            ? null
            : { partition: Number(conflict.split(':')[0]), offset: Number(conflict.split(':')[1]) },
      });
      continue;
    }

    const pending =
      kind === 'REBASE' || s === null
        ? new Map<number, { output: string | null } | { deadLetter: string }>()
        : s.pending;
    const prevValue = s === null ? null : s.value;
    s = { value: reason === undefined ? value : prevValue, partition, offset: off, epoch, pending };
    let stateOutput: string | null | undefined;
    if (reason !== undefined) {
      pending.set(off, { deadLetter: reason });
      results.push({ verdict: 'REJECT', offset: off, reason });
      continue;
    }
    if (r.output === 'state') {
      stateOutput = value;
      pending.set(off, { output: value });
    } else if (r.output !== undefined) {
      pending.set(off, { output: r.output.value === null ? null : text(r.output.value) });
    }
    const output =
      stateOutput === undefined
        ? {}
        : { output: { value: stateOutput === null ? null : Buffer.from(stateOutput) } };
    results.push(
      kind === 'APPLY'
        ? { verdict: 'APPLY', offset: off, gap: n, ...output }
        : { verdict: 'REBASE', offset: off, previousPartition: n, ...output },
    );
  }
  return { results, state: s };
}
