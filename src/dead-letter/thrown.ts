/**
 * Describing what was thrown, for a dead letter's exception headers: its class as a Java-like name
 * (`redfence.<ErrorName>`), its message, its cause, and its stack with causes as Java prints them, every
 * host path made portable. Never throws: this is the path of last resort for a bad record.
 */
import { types } from 'node:util';

const MAX_CAUSE_DEPTH = 8;

function safeGet(target: object, property: string): unknown {
  try {
    return (target as Record<string, unknown>)[property];
  } catch {
    return undefined;
  }
}

function isError(value: unknown): value is Error {
  return value instanceof Error || types.isNativeError(value);
}

function javaIdentifier(name: string): string | undefined {
  const cleaned = name.replace(/[^A-Za-z0-9_$]/g, '_');
  if (cleaned === '' || /^_+$/.test(cleaned)) return undefined;
  return /^[0-9]/.test(cleaned) ? `_${cleaned}` : cleaned;
}

/**
 * `name`, unless it is the inherited `'Error'` of a subclass that did not set one; then the
 * constructor's name (`class ValidationError extends Error {}` → `ValidationError`).
 */
function errorName(error: Error): string {
  const name = safeGet(error, 'name');
  const fromName = typeof name === 'string' ? javaIdentifier(name) : undefined;
  if (fromName !== undefined && fromName !== 'Error') return fromName;
  const ctor = safeGet(error, 'constructor');
  const ctorName = typeof ctor === 'function' ? javaIdentifier(ctor.name) : undefined;
  return ctorName ?? fromName ?? 'Error';
}

/** `redfence.<ErrorName>` for an Error, `redfence.NonErrorThrown` for anything else thrown. */
export function fqcnOf(thrown: unknown): string {
  return isError(thrown) ? `redfence.${errorName(thrown)}` : 'redfence.NonErrorThrown';
}

export function textOf(thrown: unknown): string {
  if (isError(thrown)) {
    const message = safeGet(thrown, 'message');
    return typeof message === 'string' ? message : '';
  }
  if (typeof thrown === 'string') return thrown;
  try {
    const json = JSON.stringify(thrown);
    if (typeof json === 'string') return json;
  } catch {
    // Circular, or holds a bigint: fall through to String().
  }
  try {
    return String(thrown);
  } catch {
    return `<unprintable ${typeof thrown}>`;
  }
}

export function causeOf(thrown: unknown): unknown {
  if (!isError(thrown)) return undefined;
  const cause = safeGet(thrown, 'cause');
  return cause === null ? undefined : cause;
}

function stackOf(thrown: unknown): string {
  if (isError(thrown)) {
    const stack = safeGet(thrown, 'stack');
    if (typeof stack === 'string' && stack !== '') return stack;
    return `${errorName(thrown)}: ${textOf(thrown)}`;
  }
  return `${fqcnOf(thrown)}: ${textOf(thrown)}`;
}

/**
 * A path as it may leave the process: a package's file from `<package>/...` (what its frames point
 * into once installed), a file under the working directory as `./...`, any other absolute path as
 * its file name only. Host paths (home directories, build and deploy folders) never go into records.
 */
function portablePath(path: string): string {
  const p = path.replace(/^file:\/\//, '').replace(/\\/g, '/');
  const nm = /.*\/node_modules\/((?:@[^/]+\/)?[^/]+\/.*)$/.exec(p);
  if (nm?.[1] !== undefined) return nm[1];
  const cwd = process.cwd().replace(/\\/g, '/');
  if (cwd !== '/' && p.startsWith(`${cwd}/`)) return `./${p.slice(cwd.length + 1)}`;
  return `.../${p.slice(p.lastIndexOf('/') + 1)}`;
}

/** `text` with every absolute path (POSIX, Windows, file:// URL) made portable. */
export function withoutHostPaths(text: string): string {
  return text.replace(/(?<![\w:./])(?:file:\/\/)?(?:\/|[A-Za-z]:\\)[^\s()'"`:,;]+/g, (m) => portablePath(m));
}

/** The stack, then each cause's as Java prints them (`Caused by: ...`); stops on cycles. */
export function stackWithCauses(thrown: unknown): string {
  const parts = [stackOf(thrown)];
  const seen = new Set<unknown>([thrown]);
  for (let c = causeOf(thrown); c !== undefined && !seen.has(c) && parts.length <= MAX_CAUSE_DEPTH; ) {
    seen.add(c);
    parts.push(`Caused by: ${stackOf(c)}`);
    c = causeOf(c);
  }
  return parts.join('\n');
}
