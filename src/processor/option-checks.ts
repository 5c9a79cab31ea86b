/** The small checks options.ts is made of; each throws RF_INVALID_OPTIONS naming the option's path. */
import { RedfenceError } from '../errors/index.js';

/** Longest delay a Node timer takes. */
export const MAX_TIMER_MS = 2_147_483_647;

export function invalid(message: string): RedfenceError {
  return new RedfenceError('RF_INVALID_OPTIONS', message);
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
