/**
 * What a processor's `operation` or `reduce` returned, checked before it reaches the fence. A wrong
 * shape (a reducer that returns the state itself instead of `{ state }`, an operation without a known
 * `op`, a non-finite number, a state JSON cannot write) is treated as a throw: the record goes to the
 * dead-letter topic with RF_USER_RESULT naming the function and what it returned (its type and shape,
 * never a value: the value may be the record's), and the partition goes on. Unchecked, it failed the
 * whole batch in the fence's codec, and the batch was delivered again for ever.
 */
import { RedfenceError } from '../errors/index.js';

/** The type of a value, for a message: never the value itself. */
export function typeOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (Buffer.isBuffer(v)) return 'a Buffer';
  if (v instanceof Uint8Array) return 'a Uint8Array';
  const t = typeof v;
  if (t === 'number') return Number.isFinite(v) ? 'a number' : `a non-finite number`;
  if (t === 'object') return 'an object';
  if (t === 'undefined') return 'undefined';
  return /^[aeiou]/.test(t) ? `an ${t}` : `a ${t}`;
}

function wrong(fn: 'reduce' | 'operation', what: string, fix: string): RedfenceError {
  return new RedfenceError('RF_USER_RESULT', `${fn} returned ${what}; ${fix}`, {
    details: { function: fn },
  });
}

const isBytes = (v: unknown) => typeof v === 'string' || v instanceof Uint8Array;
const asBuffer = (v: string | Uint8Array | null): string | Buffer | null =>
  v instanceof Uint8Array && !Buffer.isBuffer(v) ? Buffer.from(v.buffer, v.byteOffset, v.byteLength) : v;
const isOffset = (v: unknown) => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const OPS = "{ op: 'set' | 'add' | 'addFloat' | 'max' | 'min' | 'delete', ... }";

const OP_FIX = `it must return an operation ${OPS} (docs/processor.md)`;

function badField(o: Record<string, unknown>, name: string, expected: string): RedfenceError {
  return wrong(
    'operation',
    `{ op: '${String(o.op)}' } with ${name} ${typeOf(o[name])}`,
    `${name} must be ${expected}`,
  );
}

/** Why `op` is not an operation the fence can apply, or undefined when it is one. */
export function checkOperation(op: unknown): RedfenceError | undefined {
  if (typeof op !== 'object' || op === null || Array.isArray(op))
    return wrong('operation', typeOf(op), OP_FIX);
  const o = op as Record<string, unknown>;
  switch (o.op) {
    case 'set':
      return isBytes(o.value) ? undefined : badField(o, 'value', 'a string or a Uint8Array/Buffer');
    case 'add': {
      const by = o.by;
      if (typeof by === 'bigint') {
        return by < -(2n ** 63n) || by >= 2n ** 63n
          ? wrong(
              'operation',
              "{ op: 'add' } with a bigint outside the 64-bit range",
              'keep `by` within 64 bits',
            )
          : undefined;
      }
      return Number.isSafeInteger(by)
        ? undefined
        : badField(o, 'by', 'a safe integer or a bigint (addFloat for fractions)');
    }
    case 'addFloat':
      return typeof o.by === 'number' && Number.isFinite(o.by)
        ? undefined
        : badField(o, 'by', 'a finite number');
    case 'max':
    case 'min':
      return typeof o.value === 'number' && Number.isFinite(o.value)
        ? undefined
        : badField(o, 'value', 'a finite number');
    case 'delete':
      return undefined;
    case 'cas': {
      const e = o.expected as Record<string, unknown> | null | undefined;
      const tokenOk =
        e === null ||
        (typeof e === 'object' && e !== undefined && isOffset(e.partition) && isOffset(e.offset));
      return tokenOk && isBytes(o.value)
        ? undefined
        : wrong('operation', "a malformed { op: 'cas' }", OP_FIX);
    }
    default:
      return wrong(
        'operation',
        `an object whose op is ${typeOf(o.op)}${typeof o.op === 'string' ? ' the fence does not know' : ''}`,
        OP_FIX,
      );
  }
}

/** A reducer's result as the fence takes it: the state's JSON, the output (or none) and whether to emit. */
export type CheckedReduction =
  | { ok: true; state: unknown; json: string; output: string | Buffer | null; emit: boolean }
  | { ok: false; error: RedfenceError };

/** Checks what `reduce` returned: `{ state, output?, emit? }`, the state writable as JSON. */
export function checkReduction(r: unknown): CheckedReduction {
  const fix = 'it must return { state, output?, emit? } (return { state: next }, not the state itself)';
  if (typeof r !== 'object' || r === null || Array.isArray(r))
    return { ok: false, error: wrong('reduce', typeOf(r), fix) };
  const o = r as { state?: unknown; output?: unknown; emit?: unknown };
  if (o.state === undefined)
    return {
      ok: false,
      error: wrong(
        'reduce',
        `an object without a "state" field${'state' in o ? ' (state: undefined)' : ''}`,
        fix,
      ),
    };
  let json: string | undefined;
  try {
    json = JSON.stringify(o.state);
  } catch (e) {
    const why = e instanceof Error ? e.name : 'an error';
    return {
      ok: false,
      error: wrong(
        'reduce',
        `a state JSON.stringify cannot write (${why}: a bigint or a cycle?)`,
        'the state must be JSON',
      ),
    };
  }
  if (typeof json !== 'string')
    return {
      ok: false,
      error: wrong('reduce', `a state of type ${typeOf(o.state)}`, 'the state must be JSON'),
    };
  if (o.output !== undefined && o.output !== null && !isBytes(o.output))
    return {
      ok: false,
      error: wrong(
        'reduce',
        `an output of type ${typeOf(o.output)}`,
        'output must be a string, a Buffer, null (a tombstone) or omitted',
      ),
    };
  if (o.emit !== undefined && typeof o.emit !== 'boolean')
    return {
      ok: false,
      error: wrong('reduce', `emit of type ${typeOf(o.emit)}`, 'emit must be a boolean or omitted'),
    };
  return {
    ok: true,
    state: o.state,
    json,
    output: o.output === undefined ? json : asBuffer(o.output as string | Uint8Array | null),
    emit: o.emit !== false,
  };
}
