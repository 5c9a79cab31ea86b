/**
 * The generators of the fence histories (harness.ts runs them): records with offset holes over three
 * keys, and schedules of steps, new owners, crashes and repairs; `cachedHistoryArb` for owners that fold
 * in JS through the processor's reducer path, most of them with owner-local state.
 */
import fc from 'fast-check';
import type { Action, History, Mode, Rec } from './harness.js';

const KEYS = ['a', 'b', 'c'];

export function recordsArb(
  opts: { ops?: Rec['op'][]; outputs?: Rec['output'][]; texts?: string[]; maxLength?: number } = {},
): fc.Arbitrary<Rec[]> {
  const ops = opts.ops ?? ['add', 'add', 'set', 'max', 'del'];
  const outputs = opts.outputs ?? ['state', 'bytes', 'none', 'dead'];
  const texts = opts.texts ?? ['x', 'y', '7', '12'];
  const one = fc.record({
    gap: fc.integer({ min: 1, max: 3 }),
    key: fc.constantFrom(...KEYS),
    op: fc.constantFrom(...ops),
    n: fc.integer({ min: -5, max: 9 }),
    text: fc.constantFrom(...texts),
    output: fc.constantFrom(...outputs),
  });
  return fc.array(one, { minLength: 2, maxLength: opts.maxLength ?? 8 }).map((rows) => {
    let offset = 0;
    return rows.map((r) => {
      offset += r.gap; // holes: transaction markers and compaction
      const arg = r.op === 'set' ? r.text : String(r.n);
      return { offset, key: r.key, op: r.op, arg, output: r.output };
    });
  });
}

export function historyArb(recs: fc.Arbitrary<Rec[]> = recordsArb()): fc.Arbitrary<History> {
  const action = fc.record({
    kind: fc.constantFrom<Action['kind']>(
      'step',
      'step',
      'step',
      'step',
      'step',
      'newOwner',
      'crash',
      'repair',
    ),
    owner: fc.integer({ min: 0, max: 2 }),
    batch: fc.integer({ min: 1, max: 5 }),
  });
  return fc.record({
    mode: fc.constantFrom<Mode>('alo', 'eos'),
    staleCommitsLand: fc.boolean(),
    records: recs,
    actions: fc.array(action, { maxLength: 24 }),
  });
}

/**
 * Histories whose owners fold in JS as the processor's reducer does, most of them with owner-local
 * state, and repairs between their batches. Values are integers (a JSON number state): a reducer that
 * cannot apply a record throws, which is the dead-letter path, not the fence's REJECT.
 */
export function cachedHistoryArb(): fc.Arbitrary<History> {
  const action = fc.record({
    kind: fc.constantFrom<Action['kind']>(
      'step',
      'step',
      'step',
      'step',
      'step',
      'newOwner',
      'crash',
      'repair',
      'repair',
      'repair',
    ),
    owner: fc.integer({ min: 0, max: 2 }),
    batch: fc.integer({ min: 1, max: 3 }),
  });
  return fc.record({
    mode: fc.constantFrom<Mode>('alo', 'eos'),
    staleCommitsLand: fc.boolean(),
    // longer, in smaller batches: an owner meets a key again in a later batch (a cache hit) more often
    records: recordsArb({ texts: ['7', '12', '-3'], maxLength: 12 }),
    actions: fc.array(action, { maxLength: 16, size: 'max' }),
    reduce: fc.constant(true),
    cached: fc.array(fc.constantFrom(true, true, true, false), { minLength: 4, maxLength: 4 }),
  });
}
