/**
 * The lag evaluator (pure): a window of samples of one partition (the group's committed offset, the
 * partition's end offset, when) -> offset lag, consume rate, ETA to zero, a status in Burrow's
 * vocabulary and the reasons for it. The rules, and where they differ from Burrow's, are in
 * docs/operations.md ("Lag status"). No I/O here: the sampler (lag-sampler.ts), the CLI and the
 * processor's `/status` feed it.
 */

/** Burrow's partition statuses. */
export type LagStatus = 'OK' | 'WARN' | 'STALL' | 'STOP' | 'REWIND' | 'ERR';

/** Why a status was given; more than one can hold. */
export type LagReason =
  | 'lag-zero' // some sample in the window had no lag (Burrow rule 1)
  | 'catching-up' // committed moved and the lag fell
  | 'lag-not-decreasing' // committed moved but the lag did not fall (Burrow rule 3): WARN
  | 'committed-stuck' // committed did not move while there was lag, the partition has an owner: STALL
  | 'no-owner' // committed did not move while there was lag, no member owns the partition: STOP
  | 'rewind' // committed moved backwards (a reset or a seek to an earlier offset)
  | 'slow' // seed 003: lag above the threshold and rate > 0
  | 'dead' // seed 003: lag > 0 and rate == 0
  | 'no-commit' // the group has no committed offset for the partition
  | 'unreadable'; // an offset could not be read

/** One observation of a partition. */
export interface LagSample {
  /** Milliseconds (any clock, the same for the whole window). */
  readonly at: number;
  /** The group's committed offset (the next record it will read); undefined: none committed. */
  readonly committed: number | undefined;
  /** The partition's end: the last stable offset (read_committed) or the high watermark. */
  readonly end: number | undefined;
  /** Whether a member of the group owns the partition now; undefined: unknown (treated as owned). */
  readonly owned?: boolean;
  /** Timestamp (ms since the epoch) of the record at `committed`, when read; undefined: not read. */
  readonly nextRecordTime?: number;
  /** Set when an offset could not be read. */
  readonly error?: string;
}

export interface LagRules {
  /** Seed 003's threshold: lag above it with rate > 0 is "slow" (WARN at least). Default 10000. */
  slowLag?: number;
}

export interface LagEvaluation {
  status: LagStatus;
  reasons: LagReason[];
  /** Offset lag at the last sample (end - committed, never below 0); null when unreadable. */
  lag: number | null;
  committed: number | null;
  end: number | null;
  /** Records per second the group committed over the window; null with fewer than two samples. */
  rate: number | null;
  /** Records per second the end moved over the window (the produce rate). */
  produceRate: number | null;
  /** Seconds until the lag is zero at the window's net rate; 0 with no lag; null: not falling. */
  etaSeconds: number | null;
  /** Seconds between `now` and the timestamp of the next unprocessed record; 0 with no lag. */
  timeLagSeconds: number | null;
  samples: number;
}

export const DEFAULT_SLOW_LAG = 10_000;

const lagOf = (s: LagSample): number | undefined =>
  s.committed === undefined || s.end === undefined ? undefined : Math.max(0, s.end - s.committed);

/**
 * Evaluates one partition's window (oldest first). `now` (ms, same clock as `nextRecordTime`) is used
 * for the time lag only.
 */
export function evaluateLag(
  window: readonly LagSample[],
  rules: LagRules = {},
  now: number = Date.now(),
): LagEvaluation {
  const slowLag = rules.slowLag ?? DEFAULT_SLOW_LAG;
  const last = window.at(-1);
  const out: LagEvaluation = {
    status: 'ERR',
    reasons: [],
    lag: null,
    committed: last?.committed ?? null,
    end: last?.end ?? null,
    rate: null,
    produceRate: null,
    etaSeconds: null,
    timeLagSeconds: null,
    samples: window.length,
  };
  if (last === undefined || window.some((s) => s.error !== undefined || s.end === undefined)) {
    out.reasons.push('unreadable');
    return out;
  }
  // a partition that has never held a record (end 0) has nothing to commit: a group never commits
  // what it never read, so an empty partition of a healthy group counts as committed at 0
  const filled = window.map((s) => (s.committed === undefined && s.end === 0 ? { ...s, committed: 0 } : s));
  if (filled.some((s) => s.committed === undefined)) {
    out.reasons.push('no-commit');
    return out;
  }
  window = filled;
  const lags = window.map((s) => lagOf(s) as number);
  const lag = lags.at(-1) as number;
  out.lag = lag;
  const first = window[0] as LagSample;
  const span = (last.at - first.at) / 1000;
  if (window.length >= 2 && span > 0) {
    out.rate = ((last.committed as number) - (first.committed as number)) / span;
    out.produceRate = ((last.end as number) - (first.end as number)) / span;
  }
  out.timeLagSeconds =
    lag === 0
      ? 0
      : last.nextRecordTime === undefined
        ? null
        : Math.max(0, (now - last.nextRecordTime) / 1000);
  const net = out.rate === null || out.produceRate === null ? null : out.rate - out.produceRate;
  out.etaSeconds = lag === 0 ? 0 : net !== null && net > 0 ? lag / net : null;

  // Burrow's order: any zero lag, rewind, recent zero lag, stop, stall, not decreasing, else OK.
  let rewound = false;
  const offsets = window.map((s) => s.committed as number);
  for (let i = 1; i < offsets.length; i++)
    if ((offsets[i] as number) < (offsets[i - 1] as number)) rewound = true;
  const moved = (last.committed as number) !== (first.committed as number);
  if (rewound) {
    out.status = 'REWIND';
    out.reasons.push('rewind');
  } else if (lags.some((l) => l === 0)) {
    out.status = 'OK';
    out.reasons.push('lag-zero');
  } else if (window.length < 2) {
    // one sample with lag: movement unknown; only the seed's threshold can speak
    out.status = 'OK';
  } else if (!moved) {
    const owned = last.owned !== false;
    out.status = owned ? 'STALL' : 'STOP';
    out.reasons.push(owned ? 'committed-stuck' : 'no-owner');
  } else if (lag >= (lags[0] as number)) {
    out.status = 'WARN';
    out.reasons.push('lag-not-decreasing');
  } else {
    out.status = 'OK';
    out.reasons.push('catching-up');
  }
  // Seed 003, per partition: slow (lag above the threshold, still consuming) and dead (lag, rate 0).
  if (lag > 0 && out.rate === 0) out.reasons.push('dead');
  if (lag > slowLag && out.rate !== null && out.rate > 0) {
    out.reasons.push('slow');
    if (out.status === 'OK') out.status = 'WARN';
  }
  if (lag > slowLag && out.rate === null && out.status === 'OK') out.status = 'WARN';
  return out;
}

/**
 * The in-process window behind `/status`: the samples of each owned partition taken at its commits,
 * kept for `windowMs`. A view adds a sample at `now` (the last committed and end offsets known), so a
 * partition that has not committed for a whole window shows committed not moving (STALL with lag).
 */
const MIN_GAP_MS = 250;

export class LagWindow {
  readonly #windowMs: number;
  readonly #windows = new Map<string, LagSample[]>();

  constructor(windowMs = 60_000) {
    this.#windowMs = windowMs;
  }

  add(topic: string, partition: number, sample: LagSample): void {
    const key = `${topic}\u0000${partition}`;
    let w = this.#windows.get(key);
    if (w === undefined) {
      w = [];
      this.#windows.set(key, w);
    }
    // commits come many a second: one sample per MIN_GAP_MS is enough for the rates, and bounds memory
    const newest = w.at(-1);
    if (w.length >= 2 && newest !== undefined && sample.at - newest.at < MIN_GAP_MS) w[w.length - 1] = sample;
    else w.push(sample);
    // keep one sample older than the window as its baseline
    while (w.length > 2 && (w[1] as LagSample).at < sample.at - this.#windowMs) w.shift();
  }

  forget(topic: string, partition: number): void {
    this.#windows.delete(`${topic}\u0000${partition}`);
  }

  /** Each partition's window as of `now`: the baseline, the samples within the window, a sample at now. */
  view(now: number): { topic: string; partition: number; window: LagSample[] }[] {
    return [...this.#windows].map(([k, w]) => {
      const [topic, p] = k.split('\u0000') as [string, string];
      let from = 0;
      while (from < w.length - 1 && (w[from + 1] as LagSample).at < now - this.#windowMs) from++;
      const kept = w.slice(from);
      const newest = kept.at(-1) as LagSample;
      const window = newest.at < now ? [...kept, { ...newest, at: now }] : kept;
      return { topic, partition: Number(p), window };
    });
  }
}

/** The worst status first: what a group's summary shows. */
export const STATUS_ORDER: readonly LagStatus[] = ['ERR', 'STOP', 'STALL', 'REWIND', 'WARN', 'OK'];

export function worstStatus(statuses: readonly LagStatus[]): LagStatus {
  for (const s of STATUS_ORDER) if (statuses.includes(s)) return s;
  return 'OK';
}
