/**
 * A history simulator for the fence: one partition, owners with epochs, crashes, zombies, replays,
 * at-least-once and exactly-once commit semantics, writers outside the owner (`reconcile --repair`),
 * owners folding in JS with or without owner-local state, run against a real Redis through a pluggable
 * fence implementation. fast-check generates the schedules; `runHistory` executes one and returns
 * what a verifier needs. The verifier (`violations`) shares no code with the scripts or the model.
 */
import type { FenceRecord, RecordResult } from '../../src/index.js';

export type Mode = 'alo' | 'eos';

export interface Rec {
  offset: number;
  key: string;
  op: 'add' | 'set' | 'max' | 'del';
  arg: string; // integer text for add/max, value for set
  /** dead: the caller dead-letters it (output `{ deadLetter }`; the reducer path: its reducer throws). */
  output: 'state' | 'bytes' | 'none' | 'dead';
}

export interface Action {
  /** repair: a writer outside the owner rewrites one of the keys with a committed record (owner picks it) */
  kind: 'step' | 'newOwner' | 'crash' | 'repair';
  owner: number; // index into owners (mod count), or the key of a repair
  batch: number; // batch size for a fetch step
}

export interface History {
  mode: Mode;
  staleCommitsLand: boolean;
  records: Rec[];
  actions: Action[];
  /** Owners fold in JS (the processor's reducer path, compare-and-set) instead of sending operations. */
  reduce?: boolean;
  /** Per owner (index mod length), with reduce: it keeps owner-local state (the processor's cache). */
  cached?: boolean[];
}

/** Which owner calls, and whether it keeps owner-local state (a new owner starts with none). */
export interface OwnerRef {
  id: number;
  cached: boolean;
}

/** A repair's look at the key: where its fence was and what it held (decoded), or nothing repaired. */
export interface RepairOutcome {
  repaired: boolean;
  found?: { offset: number; value: string | null };
}

/** What the simulator needs from a fence implementation. */
export interface FenceUnderTest {
  acquireEpoch(): Promise<number>;
  /** All records of one key from one batch, in offset order. */
  applyKey(
    key: string,
    records: Rec[],
    epoch: number,
    watermark: number,
    owner: OwnerRef,
  ): Promise<RecordResult[]>;
  /** The stored value of a key (null when absent or deleted). */
  readValue(key: string): Promise<string | null>;
  /**
   * A writer outside the owner: rewrites the key, when its fence is below the committed offset (its
   * pending entries are then all below it too, so dropping them is a prune), to `valueAt(fence)`
   * through reconcile --repair's script, bumping its generation. Absent: the implementation has none.
   */
  repair?(key: string, committed: number, valueAt: (offset: number) => string | null): Promise<RepairOutcome>;
}

export interface Emission {
  offset: number;
  kind: 'output' | 'deadLetter';
  value: string | null;
}

export interface Trace {
  emitted: Emission[];
  /** per key, the caller epochs of writes (APPLY/REBASE/REJECT), in the order they landed */
  writes: Map<string, number[]>;
  finalValues: Map<string, string | null>;
  calls: Array<{ key: string; epoch: number; watermark: number; records: Rec[]; results: RecordResult[] }>;
  /** Keys rewritten by a repair. */
  repairs: number;
  /** A key a repair found holding something other than the fold at its fence (a violation). */
  drift: string[];
}

export { cachedHistoryArb, historyArb, recordsArb } from './history-arbs.js';

/** The fold of a key's records up to `offset` (its value at that fence). */
function foldAt(records: Rec[], key: string, offset: number): string | null {
  return expectedFold(records.filter((r) => r.key === key && r.offset <= offset)).final.get(key) ?? null;
}

export function toFenceRecords(recs: Rec[]): FenceRecord[] {
  return recs.map((r) => ({
    offset: r.offset,
    operation:
      r.op === 'add'
        ? { op: 'add', by: Number(r.arg) }
        : r.op === 'max'
          ? { op: 'max', value: Number(r.arg) }
          : r.op === 'del'
            ? { op: 'delete' }
            : { op: 'set', value: r.arg },
    ...(r.output === 'state'
      ? { output: 'state' as const }
      : r.output === 'bytes'
        ? { output: { value: `out-${r.offset}` } }
        : r.output === 'dead'
          ? { output: { deadLetter: `dead-${r.offset}` } }
          : {}),
  }));
}

interface Owner {
  epoch: number;
  alive: boolean;
  position: number; // next offset to fetch
  watermark: number; // committed offset as this owner knows it
  phase: 'idle' | 'applied' | 'produced';
  cached: boolean;
  batch: Rec[];
  pendingOut: Emission[];
}

/** Executes one history. Throws only on infrastructure errors. */
export async function runHistory(h: History, fence: FenceUnderTest): Promise<Trace> {
  const trace: Trace = {
    emitted: [],
    writes: new Map(),
    finalValues: new Map(),
    calls: [],
    repairs: 0,
    drift: [],
  };
  const end = (h.records.at(-1)?.offset ?? 0) + 1;
  let committed = 0;
  const owners: Owner[] = [];
  let current = -1;

  const assign = async () => {
    const epoch = await fence.acquireEpoch();
    owners.push({
      epoch,
      alive: true,
      position: committed,
      watermark: committed,
      phase: 'idle',
      cached: h.reduce === true && (h.cached?.[owners.length % (h.cached.length || 1)] ?? false),
      batch: [],
      pendingOut: [],
    });
    current = owners.length - 1;
  };

  const step = async (i: number, batchSize: number) => {
    const o = owners[i];
    if (!o?.alive) return;
    if (o.phase === 'idle') {
      const batch = h.records.filter((r) => r.offset >= o.position).slice(0, batchSize);
      if (batch.length === 0) return;
      const out: Emission[] = [];
      const byKey = new Map<string, Rec[]>();
      for (const r of batch) byKey.set(r.key, [...(byKey.get(r.key) ?? []), r]);
      const results = new Map<number, RecordResult>();
      for (const [key, recs] of byKey) {
        const res = await fence.applyKey(key, recs, o.epoch, o.watermark, { id: i, cached: o.cached });
        trace.calls.push({ key, epoch: o.epoch, watermark: o.watermark, records: recs, results: res });
        for (const r of res) {
          results.set(r.offset, r);
          if (r.verdict === 'APPLY' || r.verdict === 'REBASE' || r.verdict === 'REJECT') {
            trace.writes.set(key, [...(trace.writes.get(key) ?? []), o.epoch]);
          }
        }
      }
      if ([...results.values()].some((r) => r.verdict === 'FENCE')) {
        o.alive = false; // stop processing the partition: no produce, no commit
        return;
      }
      for (const rec of batch) {
        const r = results.get(rec.offset);
        if (r === undefined) throw new Error(`no result for offset ${rec.offset}`);
        if (r.verdict === 'REJECT') out.push({ offset: rec.offset, kind: 'deadLetter', value: r.reason });
        else if (r.verdict === 'REEMIT') {
          out.push(
            'deadLetter' in r
              ? { offset: rec.offset, kind: 'deadLetter', value: r.deadLetter }
              : {
                  offset: rec.offset,
                  kind: 'output',
                  value: r.output.value === null ? null : r.output.value.toString(),
                },
          );
        } else if (r.verdict === 'APPLY' || r.verdict === 'REBASE') {
          if (rec.output === 'bytes')
            out.push({ offset: rec.offset, kind: 'output', value: `out-${rec.offset}` });
          else if (rec.output === 'state') {
            const v = r.output?.value;
            out.push({
              offset: rec.offset,
              kind: 'output',
              value: v === undefined || v === null ? null : v.toString(),
            });
          }
        }
      }
      o.batch = batch;
      o.pendingOut = out;
      o.phase = 'applied';
    } else if (o.phase === 'applied') {
      // produce: visible at once in at-least-once mode; inside the open transaction in exactly-once mode
      if (h.mode === 'alo') trace.emitted.push(...o.pendingOut);
      o.phase = 'produced';
    } else {
      const next = (o.batch.at(-1)?.offset ?? o.position) + 1;
      const isCurrent = owners.indexOf(o) === current;
      if (h.mode === 'eos') {
        if (isCurrent) {
          trace.emitted.push(...o.pendingOut); // outputs and offsets commit atomically
          committed = next;
        } else {
          o.alive = false; // the broker fences the zombie's transaction: aborted, nothing visible
          return;
        }
      } else if (isCurrent || h.staleCommitsLand) {
        committed = next; // may move backwards when a stale commit lands: only causes replays
      } else {
        o.alive = false; // CommitFailedException: the zombie stops
        return;
      }
      o.watermark = next;
      o.position = next;
      o.phase = 'idle';
      o.batch = [];
      o.pendingOut = [];
    }
  };

  const repair = async (key: string) => {
    if (fence.repair === undefined) return;
    const r = await fence.repair(key, committed, (offset) => foldAt(h.records, key, offset));
    if (!r.repaired || r.found === undefined) return;
    trace.repairs++;
    const want = foldAt(h.records, key, r.found.offset);
    if (r.found.value !== want)
      trace.drift.push(
        `key ${key}: held ${JSON.stringify(r.found.value)} at offset ${r.found.offset} before a repair, the fold is ${JSON.stringify(want)}`,
      );
  };

  await assign();
  for (const a of h.actions) {
    if (a.kind === 'repair') {
      // one of the keys with a committed record (a key whose fence is above the committed offset is
      // not repaired: its pending outputs may not be out yet)
      const keys = [...new Set(h.records.filter((r) => r.offset < committed).map((r) => r.key))];
      if (keys.length > 0) await repair(keys[a.owner % keys.length] as string);
    } else if (a.kind === 'newOwner') {
      if (owners.length < 3) await assign();
    } else if (a.kind === 'crash') {
      const o = owners[a.owner % owners.length];
      if (o) o.alive = false; // in-flight transaction aborted with it
      if (!owners.some((x) => x.alive) && owners.length < 3) await assign();
    } else {
      await step(a.owner % owners.length, a.batch);
    }
  }
  // Recovery: a fresh owner takes over and runs to the end without faults.
  for (const o of owners) o.alive = false;
  await assign();
  const last = owners.length - 1;
  for (let guard = 0; (owners[last]?.position ?? end) < end; guard++) {
    if (guard > 1000) throw new Error('recovery did not finish');
    for (let k = 0; k < 3; k++) await step(last, 3);
  }
  for (const key of new Set(h.records.map((r) => r.key)))
    trace.finalValues.set(key, await fence.readValue(key));
  return trace;
}

/** The fold of a key's records applied exactly once, in offset order: the expected emission per record. */
export function expectedFold(records: Rec[]): {
  final: Map<string, string | null>;
  emissions: Map<number, Emission | null>;
} {
  const values = new Map<string, string | null>();
  const emissions = new Map<number, Emission | null>();
  for (const r of records) {
    const cur = values.get(r.key) ?? null;
    let next = cur;
    let reject: string | undefined;
    if (r.output === 'dead') reject = 'dead';
    else if (r.op === 'set') next = r.arg;
    else if (r.op === 'del') next = null;
    else if (r.op === 'add') {
      if (cur !== null && !/^-?(0|[1-9][0-9]*)$/.test(cur)) reject = 'add';
      else next = String(BigInt(cur ?? '0') + BigInt(r.arg));
    } else if (r.op === 'max') {
      if (cur !== null && Number.isNaN(Number(cur))) reject = 'max';
      else if (cur === null || Number(r.arg) > Number(cur)) next = r.arg;
    }
    if (reject !== undefined) {
      emissions.set(r.offset, { offset: r.offset, kind: 'deadLetter', value: null });
      continue;
    }
    values.set(r.key, next);
    emissions.set(
      r.offset,
      r.output === 'none'
        ? null
        : { offset: r.offset, kind: 'output', value: r.output === 'bytes' ? `out-${r.offset}` : next },
    );
  }
  return { final: values, emissions };
}

/** Every way the trace breaks the contract; empty when it holds. */
export function violations(h: History, t: Trace): string[] {
  const out: string[] = [...t.drift];
  const { final, emissions } = expectedFold(h.records);
  for (const [key, value] of final) {
    const got = t.finalValues.get(key) ?? null;
    if (got !== value)
      out.push(
        `key ${key}: state ${JSON.stringify(got)}, expected ${JSON.stringify(value)} (records applied != once)`,
      );
  }
  for (const [offset, exp] of emissions) {
    const seen = t.emitted.filter((e) => e.offset === offset);
    if (exp === null) {
      if (seen.length > 0) out.push(`offset ${offset}: emitted ${seen.length}x but has no output`);
      continue;
    }
    if (seen.length === 0) out.push(`offset ${offset}: ${exp.kind} lost (never emitted)`);
    if (h.mode === 'eos' && seen.length > 1)
      out.push(`offset ${offset}: visible ${seen.length}x under read_committed`);
    for (const s of seen) {
      if (s.kind !== exp.kind || (exp.kind === 'output' && s.value !== exp.value)) {
        out.push(
          `offset ${offset}: emitted ${s.kind} ${JSON.stringify(s.value)}, expected ${exp.kind} ${JSON.stringify(exp.value)}`,
        );
      }
    }
  }
  for (const [key, epochs] of t.writes) {
    for (let i = 1; i < epochs.length; i++) {
      if ((epochs[i] as number) < Math.max(...epochs.slice(0, i))) {
        out.push(
          `key ${key}: a write from epoch ${epochs[i]} landed after epoch ${Math.max(...epochs.slice(0, i))} wrote it`,
        );
        break;
      }
    }
  }
  return out;
}
