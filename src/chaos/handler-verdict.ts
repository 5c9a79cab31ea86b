/**
 * The verdict of a handler chaos run, from the far side's calls (src/chaos/far-side.ts), the input and
 * dead-letter topics read back, the group's committed offsets, and when each process died (SIGKILL) or
 * was stopped (the zombie's SIGSTOP). The rules:
 *
 * - **missing**: every input record has an effect (a call answered 200) or a dead letter.
 * - **duplicate**: a record's effects beyond one are allowed only when they are the gap `ctx.once`
 *   documents: work that ran and whose mark never happened because its process died or was stopped
 *   right then. An effect is such an *unmarked* one when its process was SIGKILLed or SIGSTOPped and the
 *   `handle` call that made it never returned (the instance reports every return to the far side before
 *   it can commit the record: src/chaos/any-handler.ts). No clock window: a call that returned had its
 *   mark (with `ctx.once`, the mark is inside the call), however long before the kill it was. Every
 *   effect of a record but its last must be unmarked: an earlier effect that was marked should have
 *   stopped the later one, however that later one ended (a replay that is itself cut short by the next
 *   kill does not excuse the first). A zombie's effects answered after its SIGSTOP are counted apart and
 *   left out of this rule (its mark is fenced). A breach is a duplicate (the id and the key are named).
 * - **order**: per key (records of one key are one partition's, in offset order), the first effect of
 *   each record comes in offset order. A retry (a 503, then the same record again) or a replay adds
 *   calls of a record already in effect; only first effects are ordered.
 * - **offsets**: every partition's committed offset is its end offset. With every record done (no
 *   missing) and no duplicates this is the contiguous-commit rule seen from outside: a commit past an
 *   unfinished record whose process then died would have left that record without an effect.
 */
import type { FarSideCall, FarSideReturn } from './far-side.js';

export type HandlerViolationKind = 'missing' | 'duplicate' | 'order' | 'offsets';
export const HANDLER_KINDS: readonly HandlerViolationKind[] = ['missing', 'duplicate', 'order', 'offsets'];

export interface HandlerViolation {
  kind: HandlerViolationKind;
  message: string;
}

export interface InputPosition {
  partition: number;
  offset: number;
  /** The key's bytes as hex; null: no key (no order to keep). */
  key: string | null;
}

export interface HandlerVerdictInput {
  records: readonly InputPosition[];
  /** `<partition>/<offset>` of every dead letter's original record. */
  deadLettered: ReadonlySet<string>;
  calls: readonly FarSideCall[];
  /** Process name -> when it was SIGKILLed or SIGSTOPped (ms since the epoch). */
  deaths: ReadonlyMap<string, number>;
  /** The zombie processes (their calls after the SIGSTOP are counted apart). */
  zombies: ReadonlySet<string>;
  committed: ReadonlyMap<number, number>;
  ends: ReadonlyMap<number, number>;
  /** Every `handle` call that returned, as the instances reported them. */
  returns: readonly FarSideReturn[];
}

export interface HandlerResult {
  inputRecords: number;
  calls: number;
  failedCalls: number;
  effects: number;
  /** Calls made outside a bound `handle` (not counted as any record's). */
  unboundCalls: number;
  deadLetters: number;
  /** Records with more than one effect, all but one of them unmarked (allowed). */
  replayedRecords: number;
  /** Records whose `handle` returned more than once (a replay after a return: `ctx.once` made it skip). */
  handledAgain: number;
  unmarkedEffects: number;
  /** Effects of zombie processes answered after their SIGSTOP, and how many of them another process repeated. */
  zombieEffects: number;
  zombieEffectsRepeated: number;
  keys: number;
  committed: number;
  endOffsets: number;
  violations: HandlerViolation[];
  counts: Map<HandlerViolationKind, number>;
}

/** At most this many violations of one kind are listed (all are counted). */
const LISTED = 20;

type Add = (kind: HandlerViolationKind, message: string) => void;

const at = (p: number, o: number) => `${p}/${o}`;
const keyName = (hex: string | null) =>
  hex === null ? 'null' : JSON.stringify(Buffer.from(hex, 'hex').toString('utf8'));

function push<T>(m: Map<string, T[]>, k: string, v: T): void {
  const list = m.get(k) ?? [];
  if (list.length === 0) m.set(k, list);
  list.push(v);
}

/** The answered (200) calls by record, in call order, and the tallies of the calls that are no effect. */
function effectsByRecord(calls: readonly FarSideCall[]) {
  const effectsOf = new Map<string, FarSideCall[]>();
  let failedCalls = 0;
  let unboundCalls = 0;
  let effects = 0;
  for (const c of [...calls].sort((a, b) => a.seq - b.seq)) {
    if (c.partition === undefined || c.offset === undefined) {
      unboundCalls++;
      continue;
    }
    if (c.status !== 200) {
      failedCalls++;
      continue;
    }
    effects++;
    push(effectsOf, at(c.partition, c.offset), c);
  }
  return { effectsOf, failedCalls, unboundCalls, effects };
}

/** The missing and duplicate rules, record by record; also each keyed record's first effect, for the order rule. */
function judgeRecords(x: HandlerVerdictInput, effectsOf: Map<string, FarSideCall[]>, add: Add) {
  const returnsOf = new Map<string, FarSideReturn[]>();
  for (const r of x.returns) push(returnsOf, at(r.partition, r.offset), r);
  const returned = (c: FarSideCall) =>
    (returnsOf.get(at(c.partition ?? -1, c.offset ?? -1)) ?? []).some(
      (r) => r.instance === c.instance && r.at >= c.answeredAt,
    );
  const unmarked = (c: FarSideCall) => x.deaths.has(c.instance) && !returned(c);
  const afterStop = (c: FarSideCall) => {
    const died = x.deaths.get(c.instance);
    return x.zombies.has(c.instance) && died !== undefined && c.answeredAt >= died;
  };
  const tally = {
    replayedRecords: 0,
    handledAgain: 0,
    unmarkedEffects: 0,
    zombieEffects: 0,
    zombieEffectsRepeated: 0,
  };
  const byKey = new Map<string, Array<{ offset: number; first: FarSideCall }>>();
  const sorted = [...x.records].sort((a, b) => a.partition - b.partition || a.offset - b.offset);
  for (const r of sorted) {
    const k = at(r.partition, r.offset);
    if ((returnsOf.get(k)?.length ?? 0) > 1) tally.handledAgain++;
    const list = effectsOf.get(k) ?? [];
    if (list.length === 0) {
      if (!x.deadLettered.has(k))
        add('missing', `record ${k} (key ${keyName(r.key)}): no effect at the far side and no dead letter`);
      continue;
    }
    for (const c of list) {
      if (afterStop(c)) {
        tally.zombieEffects++;
        if (list.length > 1) tally.zombieEffectsRepeated++;
      }
    }
    if (list.length > 1) {
      tally.unmarkedEffects += list.filter(unmarked).length;
      const ruled = list.filter((c) => !afterStop(c));
      const breaches = ruled.slice(0, -1).filter((c) => !unmarked(c));
      if (breaches.length > 0)
        add(
          'duplicate',
          `record ${k} (id ${JSON.stringify(list[0]?.id)}, key ${keyName(r.key)}): ${list.length} effects, ` +
            `${breaches.length} before the last from a handle call that returned (${breaches.map((c) => c.instance).join(', ')})`,
        );
      else tally.replayedRecords++;
    }
    if (r.key !== null)
      push(byKey, `${r.partition}:${r.key}`, { offset: r.offset, first: list[0] as FarSideCall });
  }
  return { tally, byKey };
}

/** The order rule: per key, first effects in offset order. */
function judgeOrder(byKey: Map<string, Array<{ offset: number; first: FarSideCall }>>, add: Add): void {
  for (const [kk, seq] of byKey) {
    for (let i = 1; i < seq.length; i++) {
      const a = seq[i - 1] as (typeof seq)[number];
      const b = seq[i] as (typeof seq)[number];
      if (b.first.seq < a.first.seq)
        add(
          'order',
          `key ${keyName(kk.slice(kk.indexOf(':') + 1))} on partition ${kk.slice(0, kk.indexOf(':'))}: ` +
            `offset ${b.offset} took effect before offset ${a.offset}`,
        );
    }
  }
}

/** The offsets rule: every partition committed to its end. */
function judgeOffsets(x: HandlerVerdictInput, add: Add): { committed: number; endOffsets: number } {
  let committed = 0;
  let endOffsets = 0;
  for (const [p, end] of x.ends) {
    const c = x.committed.get(p) ?? -1;
    endOffsets += end;
    committed += Math.max(0, c);
    if (c !== end) add('offsets', `partition ${p}: committed ${c}, end offset ${end}`);
  }
  return { committed, endOffsets };
}

export function judgeHandlerRun(x: HandlerVerdictInput): HandlerResult {
  const violations: HandlerViolation[] = [];
  const counts = new Map<HandlerViolationKind, number>();
  const add: Add = (kind, message) => {
    const n = (counts.get(kind) ?? 0) + 1;
    counts.set(kind, n);
    if (n <= LISTED) violations.push({ kind, message });
  };
  const { effectsOf, failedCalls, unboundCalls, effects } = effectsByRecord(x.calls);
  const { tally, byKey } = judgeRecords(x, effectsOf, add);
  judgeOrder(byKey, add);
  const { committed, endOffsets } = judgeOffsets(x, add);
  return {
    inputRecords: x.records.length,
    calls: x.calls.length,
    failedCalls,
    effects,
    unboundCalls,
    deadLetters: x.deadLettered.size,
    ...tally,
    keys: byKey.size,
    committed,
    endOffsets,
    violations,
    counts,
  };
}
