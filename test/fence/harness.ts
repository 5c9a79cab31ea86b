/**
 * A history simulator for the fence: one partition, owners with epochs, crashes, zombies, replays,
 * at-least-once and exactly-once commit semantics, run against a real Redis through a pluggable
 * fence implementation. fast-check generates the schedules; `runHistory` executes one and returns
 * what a verifier needs. The verifier (`violations`) shares no code with the scripts or the model.
 */
import fc from 'fast-check';
import type { FenceRecord, RecordResult } from '../../src/index.js';

export type Mode = 'alo' | 'eos';

export interface Rec {
  offset: number;
  key: string;
  op: 'add' | 'set' | 'max' | 'del';
  arg: string; // integer text for add/max, value for set
  output: 'state' | 'bytes' | 'none';
}

export interface Action {
  kind: 'step' | 'newOwner' | 'crash';
  owner: number; // index into owners (mod count)
  batch: number; // batch size for a fetch step
}

export interface History {
  mode: Mode;
  staleCommitsLand: boolean;
  records: Rec[];
  actions: Action[];
}

/** What the simulator needs from a fence implementation. */
export interface FenceUnderTest {
  acquireEpoch(): Promise<number>;
  /** All records of one key from one batch, in offset order. */
  applyKey(key: string, records: Rec[], epoch: number, watermark: number): Promise<RecordResult[]>;
  /** The stored value of a key (null when absent or deleted). */
  readValue(key: string): Promise<string | null>;
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
}

const KEYS = ['a', 'b', 'c'];

export function recordsArb(opts: { ops?: Rec['op'][]; outputs?: Rec['output'][] } = {}): fc.Arbitrary<Rec[]> {
  const ops = opts.ops ?? ['add', 'add', 'set', 'max', 'del'];
  const outputs = opts.outputs ?? ['state', 'bytes', 'none'];
  const one = fc.record({
    gap: fc.integer({ min: 1, max: 3 }),
    key: fc.constantFrom(...KEYS),
    op: fc.constantFrom(...ops),
    n: fc.integer({ min: -5, max: 9 }),
    text: fc.constantFrom('x', 'y', '7', '12'),
    output: fc.constantFrom(...outputs),
  });
  return fc.array(one, { minLength: 2, maxLength: 8 }).map((rows) => {
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
    kind: fc.constantFrom<Action['kind']>('step', 'step', 'step', 'step', 'newOwner', 'crash'),
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
        : {}),
  }));
}

interface Owner {
  epoch: number;
  alive: boolean;
  position: number; // next offset to fetch
  watermark: number; // committed offset as this owner knows it
  phase: 'idle' | 'applied' | 'produced';
  batch: Rec[];
  pendingOut: Emission[];
}

/** Executes one history. Throws only on infrastructure errors. */
export async function runHistory(h: History, fence: FenceUnderTest): Promise<Trace> {
  const trace: Trace = { emitted: [], writes: new Map(), finalValues: new Map(), calls: [] };
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
        const res = await fence.applyKey(key, recs, o.epoch, o.watermark);
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

  await assign();
  for (const a of h.actions) {
    if (a.kind === 'newOwner') {
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
    if (r.op === 'set') next = r.arg;
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
  const out: string[] = [];
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
