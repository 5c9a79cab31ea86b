/**
 * The processor's own reducer path for the generated histories: `applyAll` (src/processor/apply.ts)
 * with its owner-local state (src/processor/owner-state.ts), run for one key's records of a batch as a
 * history's owner would. Nothing of the cache is written again here: the read (or the cached state and
 * token), the JS fold, the compare-and-set chain, CONFLICT -> forget and read again, the entry kept
 * only under its epoch and only for records newer than its token, the partition dropped on FENCE, all
 * are the processor's code. What this file adds: a reducer doing the harness's operations on a JSON
 * number state, every script round checked against the reference model (`checkedFence`), and the
 * verdicts turned back into the harness's `RecordResult`s.
 */
import type { ProcessorDefinition, Reduction } from '../../src/definition/definition.js';
import { parseToken } from '../../src/fence/codec.js';
import {
  type BatchResults,
  type Fence,
  type FenceRecord,
  type FencingMode,
  type KeyBatch,
  type RecordResult,
  type RedisArg,
  V,
} from '../../src/fence/index.js';
import { decideApply, type ModelState } from '../../src/fence/model.js';
import { type ApplyContext, applyAll } from '../../src/processor/apply.js';
import type { OwnerState } from '../../src/processor/owner-state.js';
import type { Planned } from '../../src/processor/plan.js';
import type { Rec } from './harness.js';

/** What the model check and the counters need to share with the implementation. */
export interface PathState {
  readonly model: Map<string, ModelState | null>;
  readonly mode: FencingMode;
  partitionEpoch(): number;
  readonly disagreements: string[];
  /** CONFLICT verdicts seen (every round), and those whose current token carries a generation. */
  conflicts: number;
  generationConflicts: number;
}

/** The harness's operations on a JSON number state (null: none, or deleted). */
function reduceRec(state: number | null, r: Rec): Reduction<number | null> {
  const n = Number(r.arg);
  let next: number | null;
  if (r.op === 'set') next = n;
  else if (r.op === 'add') next = (state ?? 0) + n;
  else if (r.op === 'max') next = state === null || n > state ? n : state;
  else next = null;
  // a record the caller dead-letters: the reducer throws (apply.ts keeps it in Redis as a dead letter)
  if (r.output === 'dead') throw new TypeError(`dead-${r.offset}`);
  if (r.output === 'none') return { state: next, emit: false };
  if (r.output === 'bytes') return { state: next, output: `out-${r.offset}` };
  return { state: next, output: next === null ? null : String(next) };
}

const DEFINITION = {
  input: 'h',
  output: 'h-out',
  reduce: (s: unknown, r: unknown) => reduceRec(s as number | null, r as Rec),
} as unknown as ProcessorDefinition<unknown, unknown>;

const txt = (a: RedisArg | undefined): string =>
  a === undefined ? '' : Buffer.isBuffer(a) ? a.toString('utf8') : String(a);

/** Key k's records of a script round as the object form the model takes (every one a cas). */
function roundRecords(b: KeyBatch, k: number): FenceRecord[] {
  const out: FenceRecord[] = [];
  let at = (b.argStart[k] as number) + 1; // after the key's record text
  for (let j = b.firstRecord[k] as number; j < b.recordEnd(k); j++) {
    const value = txt(b.args[at++]);
    const expected = parseToken(txt(b.args[at++]));
    const mode = b.modes[j];
    const output =
      mode === 1
        ? { output: { value: txt(b.args[at++]) } }
        : mode === 2
          ? { output: 'state' as const }
          : mode === 3
            ? { output: { value: null } }
            : mode === 4
              ? { output: { deadLetter: txt(b.args[at++]) } }
              : {};
    out.push({ offset: b.offsets[j] as number, operation: { op: 'cas', expected, value }, ...output });
  }
  return out;
}

/** One verdict as text, the same for the model's result and a decoded round. */
function said(r: RecordResult): string {
  const out = 'output' in r && r.output !== undefined ? (r.output.value?.toString() ?? 'null') : '';
  switch (r.verdict) {
    case 'REBASE':
      return `B${r.previousPartition}:${out}`;
    case 'REEMIT':
      return 'deadLetter' in r ? `Rd:${r.deadLetter}` : `R:${out}`;
    case 'FENCE':
      return `F${r.epoch}`;
    case 'CONFLICT':
      return `C:${JSON.stringify(r.current)}`;
    case 'REJECT':
      return `X:${r.reason}`;
    default:
      return `${r.verdict[0]}:${out}`;
  }
}

/** A decoded round's verdict of record tag as a RecordResult (APPLY's gap is not kept: 0). */
function resultOf(res: BatchResults, tag: number, offset: number): RecordResult {
  const rare = res.rare.get(tag);
  if (rare !== undefined) return rare;
  const out = res.outputs[tag];
  const output = out === undefined ? {} : { output: { value: out } };
  const letter = res.verdicts[tag] as number;
  if (letter === V.REEMIT) return { verdict: 'REEMIT', offset, output: { value: out ?? null } };
  if (letter === V.SKIP) return { verdict: 'SKIP', offset };
  return { verdict: 'APPLY', offset, gap: 0, ...output };
}

/** The fence as apply.ts calls it, every round also run through the reference model. */
function checkedFence(fence: Fence, st: PathState): ApplyContext['fence'] {
  return {
    batch: (topic, partition, epoch, committed) => fence.batch(topic, partition, epoch, committed),
    read: (key) => fence.read(key),
    async applyKeys(b, into) {
      const wants = b.userKeys.map((key, k) => {
        const req = {
          partition: b.partition,
          epoch: b.epoch,
          committedOffset: b.committedOffset,
          records: roundRecords(b, k),
        };
        const want = decideApply(st.model.get(key) ?? null, req, {
          mode: st.mode,
          partitionEpoch: st.partitionEpoch(),
        });
        st.model.set(key, want.state);
        return want.results;
      });
      const conflicts = await fence.applyKeys(b, into);
      b.userKeys.forEach((key, k) => {
        const from = b.firstRecord[k] as number;
        const got: string[] = [];
        for (let j = from; j < b.recordEnd(k); j++) {
          const r = resultOf(into, b.tags[j] as number, b.offsets[j] as number);
          if (r.verdict === 'CONFLICT') {
            st.conflicts++;
            if ((r.current?.generation ?? 0) > 0) st.generationConflicts++;
          }
          got.push(said(r));
        }
        const want = (wants[k] ?? []).map(said);
        if (JSON.stringify(got) !== JSON.stringify(want))
          st.disagreements.push(
            `key ${key} epoch ${b.epoch} (reducer): scripts ${JSON.stringify(got)} != model ${JSON.stringify(want)}`,
          );
      });
      return conflicts;
    },
  };
}

/**
 * One key's records of a batch through the processor's reducer path, with this owner's local state
 * (undefined: every key read, as with the cache off). Returns one result per record, as the object
 * form of the fence would: the output of an APPLY is the one the reducer gave (the script keeps it).
 */
export async function reduceKey(
  fence: Fence,
  st: PathState,
  owner: OwnerState | undefined,
  key: string,
  recs: Rec[],
  epoch: number,
  watermark: number,
): Promise<RecordResult[]> {
  const planned = recs.map(
    (r): Planned => ({
      record: undefined as never,
      meta: { topic: 'h', partition: 0, offset: r.offset, key, timestamp: '0' },
      value: r,
    }),
  );
  const ctx: ApplyContext = {
    definition: DEFINITION,
    fence: checkedFence(fence, st),
    redisStep: (_what, fn) => fn(),
    callUser: (fn) => {
      try {
        return { ok: true, value: fn() };
      } catch (error) {
        return { ok: false, error };
      }
    },
    signal: new AbortController().signal,
    ...(owner === undefined ? {} : { owner }),
  };
  const applied = await applyAll(ctx, { topic: 'h', partition: 0, epoch, committed: watermark }, planned);
  const res = applied.results;
  if (res === 'FENCED')
    return recs.map((r): RecordResult => ({ verdict: 'FENCE', offset: r.offset, epoch: 0 }));
  return recs.map((r, i): RecordResult => {
    const got = resultOf(res, i, r.offset);
    const js = applied.outputs[i];
    if ((got.verdict !== 'APPLY' && got.verdict !== 'REBASE') || js === undefined) return got;
    const value = js === null ? null : Buffer.from(js);
    return { ...got, output: { value } };
  });
}
