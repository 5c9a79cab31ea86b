/**
 * Just enough of the Prometheus text exposition format for the console's Processing view: samples
 * (`name{label="v",...} value`) of the families asked for, and a quantile of a histogram's buckets
 * interpolated as PromQL's `histogram_quantile` does.
 *
 * ```ts
 * parseMetrics('redfence_verdicts_total{verdict="APPLY"} 25\n', (n) => n.startsWith('redfence_'));
 * // [{ name: 'redfence_verdicts_total', labels: { verdict: 'APPLY' }, value: 25 }]
 * ```
 */

export interface MetricSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

function number(s: string): number {
  if (s === '+Inf' || s === 'Inf') return Number.POSITIVE_INFINITY;
  if (s === '-Inf') return Number.NEGATIVE_INFINITY;
  return Number(s);
}

/** The samples of the exposition `text` whose metric name `keep` accepts (comments and bad lines skipped). */
export function parseMetrics(text: string, keep: (name: string) => boolean): MetricSample[] {
  const out: MetricSample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = LINE.exec(line);
    if (m === null || !keep(m[1] as string)) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(LABEL))
      labels[l[1] as string] = (l[2] as string).replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    const value = number(m[3] as string);
    if (!Number.isNaN(value)) out.push({ name: m[1] as string, labels, value });
  }
  return out;
}

/** Cumulative buckets of a histogram: upper bound (`le`) -> count, the +Inf bucket included. */
export type Buckets = Map<number, number>;

/** Sums the `<name>_bucket` samples over every other label into one set of buckets. */
export function bucketsOf(samples: readonly MetricSample[], name: string): Buckets {
  const out: Buckets = new Map();
  for (const s of samples) {
    if (s.name !== `${name}_bucket` || s.labels.le === undefined) continue;
    const le = number(s.labels.le);
    out.set(le, (out.get(le) ?? 0) + s.value);
  }
  return out;
}

/** `now - before`, bucket by bucket (the observations between two scrapes). */
export function bucketDelta(now: Buckets, before: Buckets | undefined): Buckets {
  if (before === undefined) return now;
  const out: Buckets = new Map();
  for (const [le, n] of now) out.set(le, n - (before.get(le) ?? 0));
  return out;
}

/**
 * The q-quantile of cumulative buckets, linear within the bucket that holds it (as PromQL's
 * `histogram_quantile`); the highest finite bound when it falls in the +Inf bucket; null without
 * observations (or with a bucket that went down: a restarted process).
 */
export function quantile(q: number, buckets: Buckets): number | null {
  const sorted = [...buckets].sort((a, b) => a[0] - b[0]);
  const total = sorted.at(-1)?.[1] ?? 0;
  if (!(total > 0) || sorted.some(([, n]) => n < 0)) return null;
  const rank = q * total;
  let lowerLe = 0;
  let lowerCount = 0;
  for (const [le, count] of sorted) {
    if (count >= rank) {
      if (le === Number.POSITIVE_INFINITY) return lowerLe;
      if (count === lowerCount) return le;
      return lowerLe + (le - lowerLe) * ((rank - lowerCount) / (count - lowerCount));
    }
    lowerLe = le;
    lowerCount = count;
  }
  return lowerLe;
}
