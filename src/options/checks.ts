/**
 * The library's one option checker: every component's options (the processor's, the handler's, the
 * outbox relay's, telemetry's, snapshots', each kit component's) are checked with these, and each check
 * throws RF_INVALID_OPTIONS naming the option's path (and, for the kit's components, the component),
 * before any connection. Unknown options are rejected.
 */
import { RedfenceError } from '../errors/index.js';

/** Longest delay a Node timer takes. */
export const MAX_TIMER_MS = 2_147_483_647;

/** An RF_INVALID_OPTIONS error; with `where` (a component, e.g. `cache "quotes"`) it leads the message. */
export function invalid(message: string): RedfenceError;
export function invalid(where: string, message: string): RedfenceError;
export function invalid(first: string, second?: string): RedfenceError {
  return new RedfenceError('RF_INVALID_OPTIONS', second === undefined ? first : `${first}: ${second}`);
}

/** A value for an error message: numbers, booleans and short strings as they are, else only their type. */
export function shown(v: unknown): string {
  if (typeof v === 'number' || typeof v === 'boolean' || v === null || v === undefined) return String(v);
  if (typeof v === 'string') return v.length <= 40 ? JSON.stringify(v) : `a string of ${v.length} characters`;
  return Array.isArray(v) ? 'an array' : `a ${typeof v}`;
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function checkKeys(
  path: string,
  value: Record<string, unknown>,
  names: Record<string, true>,
  what = 'processor',
): void {
  for (const k of Object.keys(value)) {
    if (!Object.hasOwn(names, k)) {
      const where = path === '' ? k : `${path}.${k}`;
      throw invalid(`unknown ${what} option "${where}"; known: ${Object.keys(names).join(', ')}`);
    }
  }
}

export function integer(path: string, v: unknown, min: number, max: number, fallback: number): number {
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `from ${min} to ${max}`;
    throw invalid(`option "${path}" must be an integer ${range}, got ${shown(v)}`);
  }
  return v;
}

export function text(path: string, v: unknown): string | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v === '')
    throw invalid(`option "${path}" must be a non-empty string, got ${shown(v)}`);
  return v;
}

export function oneOf<V extends string>(path: string, v: unknown, allowed: readonly V[], fallback: V): V {
  if (v === undefined) return fallback;
  if (!(allowed as readonly unknown[]).includes(v))
    throw invalid(`option "${path}" must be ${allowed.map((a) => `'${a}'`).join(' or ')}, got ${shown(v)}`);
  return v as V;
}

export function bool(path: string, v: unknown, fallback: boolean): boolean {
  if (v === undefined) return fallback;
  if (typeof v !== 'boolean') throw invalid(`option "${path}" must be true or false, got ${shown(v)}`);
  return v;
}

export function withMethods<V>(
  path: string,
  v: unknown,
  methods: readonly string[],
  what: string,
): V | undefined {
  if (v === undefined) return undefined;
  const missing = methods.find((m) => typeof (v as Record<string, unknown> | null)?.[m] !== 'function');
  if (missing !== undefined) throw invalid(`option "${path}" must be ${what} (method ${missing} missing)`);
  return v as V;
}

export function fn(path: string, v: unknown): (error: Error) => void {
  if (typeof v !== 'function') throw invalid(`option "${path}" must be a function, got ${shown(v)}`);
  return v as (error: Error) => void;
}

/** The checks of one options object: `where` names the component (e.g. `cache "quotes"`). */
export class Checker {
  readonly where: string;
  constructor(where: string) {
    this.where = where;
  }

  object(path: string, v: unknown, names: readonly string[]): Record<string, unknown> {
    if (v === undefined) return {};
    if (!isObject(v)) throw invalid(this.where, `option "${path}" must be an object, got ${shown(v)}`);
    for (const k of Object.keys(v)) {
      if (!names.includes(k)) {
        const at = path === '' ? k : `${path}.${k}`;
        throw invalid(this.where, `unknown option "${at}"; known: ${names.join(', ')}`);
      }
    }
    return v;
  }

  integer(path: string, v: unknown, min: number, max: number, fallback?: number): number {
    if (v === undefined && fallback !== undefined) return fallback;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) {
      const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `from ${min} to ${max}`;
      const req = v === undefined ? ' (required)' : '';
      throw invalid(this.where, `option "${path}"${req} must be an integer ${range}, got ${shown(v)}`);
    }
    return v;
  }

  number(path: string, v: unknown, min: number, max: number, fallback?: number): number {
    if (v === undefined && fallback !== undefined) return fallback;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) {
      const req = v === undefined ? ' (required)' : '';
      throw invalid(
        this.where,
        `option "${path}"${req} must be a number from ${min} to ${max}, got ${shown(v)}`,
      );
    }
    return v;
  }

  oneOf<V extends string>(path: string, v: unknown, allowed: readonly V[], fallback: V): V {
    if (v === undefined) return fallback;
    if (!(allowed as readonly unknown[]).includes(v)) {
      const list = allowed.map((a) => `'${a}'`).join(' or ');
      throw invalid(this.where, `option "${path}" must be ${list}, got ${shown(v)}`);
    }
    return v as V;
  }

  bool(path: string, v: unknown, fallback: boolean): boolean {
    if (v === undefined) return fallback;
    if (typeof v !== 'boolean')
      throw invalid(this.where, `option "${path}" must be true or false, got ${shown(v)}`);
    return v;
  }

  fn<F>(path: string, v: unknown): F | undefined {
    if (v === undefined) return undefined;
    if (typeof v !== 'function')
      throw invalid(this.where, `option "${path}" must be a function, got ${shown(v)}`);
    return v as F;
  }

  /** A client with the named methods (ioredis' Redis or Cluster). */
  client<C>(path: string, v: unknown, methods: readonly string[]): C {
    for (const m of methods) {
      if (typeof (v as Record<string, unknown> | null | undefined)?.[m] !== 'function') {
        throw invalid(
          this.where,
          `option "${path}" must be a Redis client (ioredis Redis or Cluster); it lacks ${m}()`,
        );
      }
    }
    return v as C;
  }
}
