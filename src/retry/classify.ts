/**
 * Exception classification: is a failed attempt worth another try (`retriable`) or not (`fatal`:
 * straight to the dead-letter topic)? Rules match by error class, by `code` and by predicate, on the
 * error and on every error of its `cause` chain (outermost first), as Spring Kafka's classifier walks
 * causes. Order of precedence, first hit wins:
 *   1. the user's `fatal` rules, 2. the user's `retriable` rules,
 *   3. an explicit `retriable: true | false` on an error of the chain (RedfenceError sets one),
 *   4. the defaults: decoding and validation errors are fatal (they will not fix themselves),
 *   5. `otherwise` (default 'retriable').
 */
import { RedfenceError } from '../errors/index.js';

export type Classification = 'retriable' | 'fatal';

/** A class of errors, as `instanceof` takes it. */
// biome-ignore lint/suspicious/noExplicitAny: constructors of any arguments
export type ErrorClass = abstract new (...args: any[]) => unknown;

export interface ClassRules {
  /** Errors that are instances of one of these classes. */
  readonly classes?: readonly ErrorClass[];
  /** Errors whose `code` (e.g. `'ECONNRESET'`, `'23505'`) is one of these. */
  readonly codes?: readonly (string | number)[];
  /** Errors for which this returns true (it is called on every error of the cause chain). */
  readonly when?: (error: unknown) => boolean;
}

export interface ClassifyRules {
  readonly fatal?: ClassRules;
  readonly retriable?: ClassRules;
  /** What an error no rule and no default matches is. Default 'retriable'. */
  readonly otherwise?: Classification;
}

/** Error names that mean "the input is wrong", whichever library threw them. */
const VALIDATION_NAMES = new Set(['ValidationError', 'ZodError', 'ValiError', 'TypeBoxError', 'AjvError']);
const MAX_DEPTH = 8;

/** The error and its causes, outermost first (at most 8, cycles cut). */
export function causeChain(error: unknown): unknown[] {
  const out: unknown[] = [];
  for (let e = error; e !== undefined && e !== null && out.length < MAX_DEPTH; ) {
    if (out.includes(e)) break;
    out.push(e);
    e = typeof e === 'object' ? (e as { cause?: unknown }).cause : undefined;
  }
  return out;
}

function matches(rules: ClassRules | undefined, e: unknown): boolean {
  if (rules === undefined) return false;
  if (rules.classes?.some((c) => e instanceof c)) return true;
  const code = typeof e === 'object' && e !== null ? (e as { code?: unknown }).code : undefined;
  if ((typeof code === 'string' || typeof code === 'number') && rules.codes?.includes(code)) return true;
  if (rules.when !== undefined) {
    try {
      return rules.when(e) === true;
    } catch {
      return false; // a throwing predicate matches nothing
    }
  }
  return false;
}

/** The seed's defaults: decoding (SyntaxError from JSON.parse, RF_HANDLER_DECODE) and validation errors. */
export function isDecodeOrValidation(e: unknown): boolean {
  if (RedfenceError.is(e, 'RF_HANDLER_DECODE')) return true;
  if (e instanceof SyntaxError) return true;
  const name = typeof e === 'object' && e !== null ? (e as { name?: unknown }).name : undefined;
  return typeof name === 'string' && VALIDATION_NAMES.has(name);
}

/** Classifies one failure; see the file comment for the order of the rules. */
export function classify(error: unknown, rules: ClassifyRules = {}): Classification {
  const chain = causeChain(error);
  if (chain.some((e) => matches(rules.fatal, e))) return 'fatal';
  if (chain.some((e) => matches(rules.retriable, e))) return 'retriable';
  for (const e of chain) {
    const r = typeof e === 'object' && e !== null ? (e as { retriable?: unknown }).retriable : undefined;
    if (r === true) return 'retriable';
    if (r === false) return 'fatal';
    if (isDecodeOrValidation(e)) return 'fatal';
  }
  return rules.otherwise ?? 'retriable';
}

/** Checks rules given by a user (definition or options); throws RF_INVALID_OPTIONS naming `path`. */
export function checkClassifyRules(path: string, v: unknown): ClassifyRules {
  const bad = (p: string, why: string) => new RedfenceError('RF_INVALID_OPTIONS', `${path}${p} ${why}`);
  if (v === undefined) return {};
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw bad('', 'must be an object');
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o))
    if (k !== 'fatal' && k !== 'retriable' && k !== 'otherwise')
      throw bad(`.${k}`, 'is not a known field (known: fatal, retriable, otherwise)');
  if (o.otherwise !== undefined && o.otherwise !== 'retriable' && o.otherwise !== 'fatal')
    throw bad('.otherwise', "must be 'retriable' or 'fatal'");
  for (const side of ['fatal', 'retriable'] as const) {
    const r = o[side];
    if (r === undefined) continue;
    if (typeof r !== 'object' || r === null || Array.isArray(r)) throw bad(`.${side}`, 'must be an object');
    const rr = r as Record<string, unknown>;
    for (const k of Object.keys(rr))
      if (k !== 'classes' && k !== 'codes' && k !== 'when')
        throw bad(`.${side}.${k}`, 'is not a known field (known: classes, codes, when)');
    if (
      rr.classes !== undefined &&
      !(Array.isArray(rr.classes) && rr.classes.every((c) => typeof c === 'function'))
    )
      throw bad(`.${side}.classes`, 'must be an array of error classes');
    if (
      rr.codes !== undefined &&
      !(Array.isArray(rr.codes) && rr.codes.every((c) => typeof c === 'string' || typeof c === 'number'))
    )
      throw bad(`.${side}.codes`, 'must be an array of strings or numbers');
    if (rr.when !== undefined && typeof rr.when !== 'function')
      throw bad(`.${side}.when`, 'must be a function');
  }
  return o as ClassifyRules;
}
