/**
 * What a user writes: a processor definition. Either `operation` (built-in, runs inside Redis, no read
 * needed: count, sum, max/min, latest value) or `reduce` (any JS function over a JSON state, applied with
 * a read and a compare-and-set on the fence).
 */
import { RedfenceError } from '../errors/index.js';
import type { Operation } from '../fence/index.js';

/** Where a record came from; given to user functions. */
export interface RecordMeta {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
  readonly key: string;
  readonly timestamp: string;
}

/** The result of a reducer: the new state and, optionally, the output value (default: the new state as JSON). */
export interface Reduction<S> {
  readonly state: S;
  /** Output value; `undefined`: the new state as JSON; `null`: a tombstone; omit outputs with `emit: false`. */
  readonly output?: string | Buffer | null;
  readonly emit?: boolean;
}

/** What every processor definition has, whichever way it changes state. */
export interface ProcessorCommon<T> {
  /** Input topic. */
  readonly input: string;
  /** Output topic (outputs are keyed by the input key). */
  readonly output: string;
  /** Dead-letter topic. Default `<input>.DLT`. */
  readonly deadLetter?: string;
  /** Store name: part of every Redis key. `[A-Za-z0-9_.-]{1,64}`. */
  readonly store: string;
  /** Turns a record value into the input of `operation`/`reduce`. Throwing dead-letters the record (`undecodable`). Default: JSON.parse. */
  readonly decode?: (value: Buffer | null, meta: RecordMeta) => T;
}

export interface OperationProcessor<T> extends ProcessorCommon<T> {
  /** The built-in operation a record applies to its key's state (runs in Redis). */
  readonly operation: (record: T, meta: RecordMeta) => Operation;
  /** `'state'` (default): emit the key's value after the record; `'none'`: emit nothing. */
  readonly emit?: 'state' | 'none';
  readonly reduce?: never;
}

export interface ReducerProcessor<T, S> extends ProcessorCommon<T> {
  /** Folds a record into the key's state (null when the key has none). Must be deterministic. */
  readonly reduce: (state: S | null, record: T, meta: RecordMeta) => Reduction<S>;
  readonly operation?: never;
}

export type ProcessorDefinition<T = unknown, S = unknown> = OperationProcessor<T> | ReducerProcessor<T, S>;

/**
 * Declares a processor; checks its shape at once so mistakes surface at start-up, not mid-stream.
 *
 * @example
 * export default defineProcessor({
 *   input: 'orders', output: 'customer-totals', store: 'totals',
 *   reduce: (s: { total: number; count: number } | null, o: { amount: number }) =>
 *     ({ state: { total: (s?.total ?? 0) + o.amount, count: (s?.count ?? 0) + 1 } }),
 * });
 */
export function defineProcessor<T, S = unknown>(
  definition: ProcessorDefinition<T, S>,
): ProcessorDefinition<T, S> {
  const d = definition as unknown as Record<string, unknown>;
  const bad = (path: string, why: string) =>
    new RedfenceError('RF_INVALID_OPTIONS', `processor definition: ${path} ${why}`);
  const allowed = new Set([
    'input',
    'output',
    'deadLetter',
    'store',
    'decode',
    'operation',
    'emit',
    'reduce',
  ]);
  if (typeof d !== 'object' || d === null) throw bad('', 'must be an object');
  for (const k of Object.keys(d))
    if (!allowed.has(k)) throw bad(k, `is not a known field (known: ${[...allowed].join(', ')})`);
  for (const k of ['input', 'output', 'store'])
    if (typeof d[k] !== 'string' || d[k] === '') throw bad(k, 'must be a non-empty string');
  if (d.deadLetter !== undefined && typeof d.deadLetter !== 'string')
    throw bad('deadLetter', 'must be a string');
  if (d.decode !== undefined && typeof d.decode !== 'function') throw bad('decode', 'must be a function');
  const hasOp = typeof d.operation === 'function';
  const hasReduce = typeof d.reduce === 'function';
  if (hasOp === hasReduce) throw bad('operation/reduce', 'exactly one of them must be a function');
  if (d.emit !== undefined && (!hasOp || (d.emit !== 'state' && d.emit !== 'none'))) {
    throw bad('emit', "is 'state' or 'none', and only with operation");
  }
  if (d.input === d.output) throw bad('output', 'must differ from input');
  return definition;
}
