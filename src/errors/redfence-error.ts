import { ERROR_CODES, type ErrorCode } from './codes.js';

const BRAND = Symbol.for('redfence.error');

/** Options for {@link RedfenceError}. */
export interface RedfenceErrorOptions {
  /** The underlying error, kept on `cause`. */
  cause?: unknown;
  /** Overrides the code's default retriability. */
  retriable?: boolean;
  /** Structured, log-safe details (never raw key text). */
  details?: Record<string, unknown>;
}

/**
 * The one error class redfence throws. `code` is stable and documented in docs/errors.md;
 * `retriable` says whether the same call may succeed later. `RedfenceError.is(err)` works
 * across duplicate installs of the package, where `instanceof` would not.
 */
export class RedfenceError extends Error {
  override readonly name = 'RedfenceError';
  readonly code: ErrorCode;
  readonly retriable: boolean;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, options: RedfenceErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retriable = options.retriable ?? ERROR_CODES[code].retriable;
    this.details = options.details;
    Object.defineProperty(this, BRAND, { value: true });
  }

  /** True for any redfence error, optionally of one code, even from another copy of the package. */
  static is(err: unknown, code?: ErrorCode): err is RedfenceError {
    if (typeof err !== 'object' || err === null || (err as Record<symbol, unknown>)[BRAND] !== true) {
      return false;
    }
    return code === undefined || (err as RedfenceError).code === code;
  }

  /** True when `err` or any error on its `cause` chain is marked retriable. */
  static isRetriable(err: unknown): boolean {
    for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 16; depth++) {
      if (RedfenceError.is(e) && e.retriable) return true;
      e = (e as { cause?: unknown }).cause;
    }
    return false;
  }
}
