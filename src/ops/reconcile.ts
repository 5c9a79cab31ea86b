/**
 * Reconciliation: each key's state and fence in Redis against what the input log says they must be
 * (reconcile-fold.ts recomputes that with the processor's own definition). Pure: the log and Redis are
 * read by reconcile-sources.ts. The kinds of anomaly are defined in docs/operations.md
 * ("Reconciliation"); each key gets its fence judged first, then (when the fence is sound) its value.
 * `reconcile` runs the steps: each stored key (`judgeStored`: epoch and pending entries, then the fence,
 * `judgeFence` or `judgeUnknown`, then the value, `judgeValue`), then the keys with no state
 * (`missingKeys`).
 */
import type { StoredState } from '../fence/types.js';
import { doubledValues, type ExpectedFold, type KeyHistory } from './reconcile-fold.js';

export const ANOMALY_KINDS = [
  'lost-write',
  'double-apply',
  'value-mismatch',
  'fence-regressed',
  'fence-invalid',
  'epoch-regressed',
  'unexpected-key',
  'stale-pending',
] as const;
export type AnomalyKind = (typeof ANOMALY_KINDS)[number];

export interface Anomaly {
  readonly kind: AnomalyKind;
  /** The Redis key of the state hash. */
  readonly key: string;
  readonly partition: number;
  /** The stored fence offset (-1: no state). */
  readonly offset: number;
  /** What was found and what was expected, without values. */
  readonly detail: string;
}

/** What was read of one partition: first readable offset, end offset, the group's committed offset. */
export interface PartitionRange {
  readonly partition: number;
  /** The first offset read: the log's earliest available offset, or later when asked to start later. */
  readonly start: number;
  /** The high watermark when reading began (the next offset to be written). */
  readonly end: number;
  /** The group's committed offset (next to consume); `start` when the group has none. */
  readonly committed: number;
}

export interface StoredKey {
  readonly redisKey: string;
  /** The key id part of the Redis key name. */
  readonly id: string;
  /** The state, or the reason it cannot be decoded. */
  readonly state: StoredState | { readonly corrupt: string };
}

export interface Verdict {
  readonly redisKey: string;
  readonly partition: number;
  readonly status: 'clean' | 'anomalous' | 'cannot-judge' | 'not-yet-applied';
  readonly storedOffset: number;
  readonly expectedOffset: number;
}

export interface Reconciliation {
  readonly anomalies: Anomaly[];
  /** Keys whose value depends on records before the first offset read (and nothing else was wrong). */
  readonly cannotJudge: Array<{ key: string; partition: number; reason: string }>;
  readonly verdicts: Verdict[];
}

/** Values of processors with float arithmetic are compared with this relative tolerance. */
const FLOAT_TOLERANCE = 1e-9;
/** Keys with more steps than this are not searched for a doubled record (the search is quadratic). */
export const MAX_DOUBLE_SEARCH = 2000;

function sameValue(a: string | null, b: string | null, numeric: boolean): boolean {
  if (a === b) return true;
  if (!numeric || a === null || b === null) return false;
  const x = Number(a);
  const y = Number(b);
  return (
    Number.isFinite(x) && Number.isFinite(y) && Math.abs(x - y) <= FLOAT_TOLERANCE * Math.max(1, Math.abs(x))
  );
}

/** The index of the last step with offset < `below`, or -1. */
function lastBelow(h: KeyHistory, below: number): number {
  let i = h.steps.length - 1;
  while (i >= 0 && (h.steps[i]?.offset ?? 0) >= below) i--;
  return i;
}

/** Records one anomaly of the key being judged. */
type Add = (kind: AnomalyKind, partition: number, offset: number, detail: string) => void;

/** What judging a key needs besides the key: the fold, how values compare, where cannot-judge keys go. */
interface Judging {
  readonly fold: ExpectedFold;
  readonly numeric: boolean;
  readonly cannotJudge: Reconciliation['cannotJudge'];
}

/** Whether the key's value and fence were judged, and the fence offset the fold says it should have. */
interface Judged {
  readonly judged: boolean;
  readonly expectedOffset: number;
}

const NOT_JUDGED: Judged = { judged: false, expectedOffset: -1 };
const JUDGED: Judged = { judged: true, expectedOffset: -1 };

/** The writer epoch against its partition's counter; pending entries below the committed offset. */
function judgeEpochAndPending(
  st: StoredState,
  range: PartitionRange | undefined,
  pEpoch: number | undefined,
  add: Add,
): void {
  if (pEpoch !== undefined && st.epoch > pEpoch)
    add(
      'epoch-regressed',
      st.partition,
      st.offset,
      `writer epoch ${st.epoch} is above the partition's epoch ${pEpoch}`,
    );
  if (range !== undefined) {
    const stale = st.pending.filter((p) => p.offset < range.committed).map((p) => p.offset);
    if (stale.length > 0 && st.partition === range.partition)
      add(
        'stale-pending',
        st.partition,
        st.offset,
        `${stale.length} pending entr${stale.length === 1 ? 'y' : 'ies'} below the committed offset ${range.committed} (lowest ${Math.min(...stale)})`,
      );
  }
}

/** A stored key no record of the log read has: unexpected, or cannot be judged. */
function judgeUnknown(
  j: Judging,
  redisKey: string,
  st: StoredState,
  range: PartitionRange,
  add: Add,
): Judged {
  if (st.partition !== range.partition) return NOT_JUDGED;
  if (st.offset < range.start) {
    j.cannotJudge.push({
      key: redisKey,
      partition: st.partition,
      reason: `fence offset ${st.offset} is before the first offset read (${range.start}) and no later record has this key`,
    });
    return NOT_JUDGED;
  }
  add(
    'unexpected-key',
    st.partition,
    st.offset,
    `no record of the log (offsets ${range.start}..${range.end - 1}) has this key`,
  );
  return JUDGED;
}

/** A stored key with records in the log: its fence first, then (when the fence is sound) its value. */
async function judgeFence(
  j: Judging,
  redisKey: string,
  st: StoredState,
  h: KeyHistory,
  range: PartitionRange,
  add: Add,
): Promise<Judged> {
  const committedIdx = lastBelow(h, range.committed);
  const lastCommitted = h.steps[committedIdx]?.offset ?? -1;
  const at = h.steps.findIndex((x) => x.offset === st.offset);
  if (st.partition !== h.partition)
    add(
      'fence-invalid',
      st.partition,
      st.offset,
      `fence partition ${st.partition}, but the key's records are on ${h.partition}`,
    );
  else if (st.offset < lastCommitted)
    add(
      'fence-regressed',
      st.partition,
      st.offset,
      `fence offset ${st.offset} is below offset ${lastCommitted}, the key's last record under the committed offset ${range.committed}`,
    );
  else if (st.offset >= range.end)
    add(
      'fence-invalid',
      st.partition,
      st.offset,
      `fence offset ${st.offset} is beyond the end of the log (${range.end})`,
    );
  else if (at < 0 && st.offset >= range.start)
    add(
      'fence-invalid',
      st.partition,
      st.offset,
      `fence offset ${st.offset} is no applied record of this key`,
    );
  else if (at < 0 || range.start > 0) {
    j.cannotJudge.push({
      key: redisKey,
      partition: h.partition,
      reason: `the key's value depends on records before offset ${range.start}, which the log no longer holds (or were not read)`,
    });
    return NOT_JUDGED;
  } else {
    await judgeValue(j, st, h, at, add);
    return { judged: true, expectedOffset: st.offset };
  }
  return JUDGED;
}

/** The value against the fold up to the fence (step `at`): lost write, double apply or mismatch. */
async function judgeValue(j: Judging, st: StoredState, h: KeyHistory, at: number, add: Add): Promise<void> {
  const { numeric } = j;
  const want = h.steps[at]?.value ?? null;
  const got = st.value === null ? null : st.value.toString('utf8');
  if (sameValue(got, want, numeric)) return;
  const earlier = h.steps.slice(0, at).findIndex((x) => sameValue(got, x.value, numeric));
  if (earlier >= 0) {
    add(
      'lost-write',
      st.partition,
      st.offset,
      `the value is the one after offset ${h.steps[earlier]?.offset}: ${at - earlier} later record(s) up to the fence are missing from it`,
    );
    return;
  }
  const doubled = at < MAX_DOUBLE_SEARCH ? await doubledValues(j.fold.definition, h, at) : [];
  const twice = doubled.find((d) => sameValue(got, d.value, numeric));
  if (twice !== undefined)
    add(
      'double-apply',
      st.partition,
      st.offset,
      `the value is the fold up to the fence with the record at offset ${twice.offset} applied twice`,
    );
  else
    add(
      'value-mismatch',
      st.partition,
      st.offset,
      `the value differs from the fold up to the fence offset ${st.offset}`,
    );
}

/** One stored key: its anomalies (in the order found) and its verdict. */
async function judgeStored(
  j: Judging,
  s: StoredKey,
  ranges: ReadonlyMap<number, PartitionRange>,
  partitionEpochs: ReadonlyMap<number, number>,
): Promise<{ found: Anomaly[]; verdict: Verdict }> {
  const h = j.fold.keys.get(s.id);
  const found: Anomaly[] = [];
  const add: Add = (kind, partition, offset, detail) =>
    found.push({ kind, key: s.redisKey, partition, offset, detail });
  if ('corrupt' in s.state) {
    add('value-mismatch', h?.partition ?? -1, -1, `the state hash cannot be read: ${s.state.corrupt}`);
    return {
      found,
      verdict: {
        redisKey: s.redisKey,
        partition: -1,
        status: 'anomalous',
        storedOffset: -1,
        expectedOffset: -1,
      },
    };
  }
  const st = s.state;
  const range = ranges.get(h?.partition ?? st.partition);
  judgeEpochAndPending(st, range, partitionEpochs.get(st.partition), add);
  // a partition not read (--partitions): nothing to judge the key by
  const { judged, expectedOffset } =
    range === undefined
      ? NOT_JUDGED
      : h === undefined
        ? judgeUnknown(j, s.redisKey, st, range, add)
        : await judgeFence(j, s.redisKey, st, h, range, add);
  const status = found.length > 0 ? 'anomalous' : judged ? 'clean' : 'cannot-judge';
  return {
    found,
    verdict: {
      redisKey: s.redisKey,
      partition: st.partition,
      status,
      storedOffset: st.offset,
      expectedOffset,
    },
  };
}

/** Keys the log says must have state but Redis has none for: lost writes, or not yet applied. */
function missingKeys(
  fold: ExpectedFold,
  ranges: ReadonlyMap<number, PartitionRange>,
  seen: ReadonlySet<string>,
  anomalies: Anomaly[],
  verdicts: Verdict[],
): void {
  const redisKeyOf = (id: string) => `${fold.keySpace.state('x').slice(0, -2)}${id}}`;
  for (const [id, h] of fold.keys) {
    if (seen.has(id)) continue;
    const range = ranges.get(h.partition);
    if (range === undefined) continue;
    const idx = lastBelow(h, range.committed);
    const redisKey = redisKeyOf(id);
    if (idx >= 0) {
      const off = h.steps[idx]?.offset ?? -1;
      anomalies.push({
        kind: 'lost-write',
        key: redisKey,
        partition: h.partition,
        offset: -1,
        detail: `no state, but ${idx + 1} record(s) of this key are under the committed offset ${range.committed} (last ${off})`,
      });
      verdicts.push({
        redisKey,
        partition: h.partition,
        status: 'anomalous',
        storedOffset: -1,
        expectedOffset: off,
      });
    } else
      verdicts.push({
        redisKey,
        partition: h.partition,
        status: 'not-yet-applied',
        storedOffset: -1,
        expectedOffset: -1,
      });
  }
}

export async function reconcile(
  fold: ExpectedFold,
  ranges: ReadonlyMap<number, PartitionRange>,
  stored: readonly StoredKey[],
  partitionEpochs: ReadonlyMap<number, number>,
): Promise<Reconciliation> {
  const anomalies: Anomaly[] = [];
  const verdicts: Verdict[] = [];
  const j: Judging = { fold, numeric: fold.definition.operation !== undefined, cannotJudge: [] };
  const seen = new Set<string>();
  for (const s of stored) {
    seen.add(s.id);
    const { found, verdict } = await judgeStored(j, s, ranges, partitionEpochs);
    anomalies.push(...found);
    verdicts.push(verdict);
  }
  missingKeys(fold, ranges, seen, anomalies, verdicts);
  return { anomalies, cannotJudge: j.cannotJudge, verdicts };
}
