/**
 * How a key record's results are cut back into the parts its aggregations placed in it. A part has a
 * fixed number of effects (a count's, a time window's, a final result's), or, for a sliding-window
 * arrival, as many as its fold found: such a part starts with a `note` effect whose result tells what
 * follows (the windows written, the windows missed, the fields pruned), so a REEMIT, which returns the
 * results the record was applied with whatever the replay carries, is read back the same way.
 */
import { RedfenceError } from '../../errors/index.js';
import type { Effect, EffectResult } from '../../store/index.js';

/** What a sliding arrival did: window starts written (in order), starts missed (late), fields pruned. */
export interface SlidingNote {
  readonly puts: readonly number[];
  readonly missed: readonly number[];
  readonly prunes: number;
}

/** The note's text: `<puts>|<missed>|<prunes>` (starts comma-separated). */
export function encodeNote(n: SlidingNote): string {
  return `${n.puts.join(',')}|${n.missed.join(',')}|${n.prunes}`;
}

function corrupt(node: string, why: string): RedfenceError {
  return new RedfenceError('RF_STATE_CORRUPT', `topology node ${node}: ${why}`, { details: { node } });
}

export function decodeNote(v: EffectResult | undefined, node: string): SlidingNote {
  const m = Buffer.isBuffer(v) ? /^([\d,]*)\|([\d,]*)\|(\d+)$/.exec(v.toString('latin1')) : null;
  if (m === null) throw corrupt(node, 'a sliding window result without its note');
  const list = (s: string | undefined) => (s === undefined || s === '' ? [] : s.split(',').map(Number));
  return { puts: list(m[1]), missed: list(m[2]), prunes: Number(m[3]) };
}

/** The effects that follow a note: a value and a timestamp per window written, one per field pruned. */
export function noteEffects(n: SlidingNote): number {
  return 1 + 2 * n.puts.length + n.prunes;
}

/** A part of a key record: the effects of one arrival (or one final result); `sliding`: a note leads. */
export interface KeyPart {
  effects: Effect[];
  readonly sliding: boolean;
}

/**
 * The results of part `part` of a key record (as {@link partResults} cuts them); a record of one part
 * without a note (the common case: one arrival) is its results as they are.
 */
export function partResult(
  rec: { readonly offset: number; readonly node: string; readonly parts: readonly KeyPart[] },
  results: readonly EffectResult[],
  part: number,
): readonly EffectResult[] {
  const only = rec.parts.length === 1 ? rec.parts[0] : undefined;
  if (only === undefined || only.sliding || only.effects.length !== results.length)
    return partResults(rec, results)[part] ?? [];
  return part === 0 ? results : [];
}

/**
 * A key record's results cut into its parts' (RF_STATE_CORRUPT when they do not add up). `prefix`: the
 * record's parts may be the first of those the results were made with (placed before its final parts
 * were known, which come after the arrivals: steps.ts).
 */
export function partResults(
  rec: { readonly offset: number; readonly node: string; readonly parts: readonly KeyPart[] },
  results: readonly EffectResult[],
  prefix = false,
): EffectResult[][] {
  const out: EffectResult[][] = [];
  let at = 0;
  for (const p of rec.parts) {
    const n = p.sliding ? noteEffects(decodeNote(results[at], rec.node)) : p.effects.length;
    out.push(results.slice(at, at + n));
    at += n;
  }
  if (prefix ? at > results.length : at !== results.length)
    throw new RedfenceError(
      'RF_STATE_CORRUPT',
      `topology node ${rec.node}: offset ${rec.offset} has ${results.length} pending results for ${at} effects (a replay must start from the committed stream time)`,
      { details: { node: rec.node, offset: rec.offset } },
    );
  return out;
}
