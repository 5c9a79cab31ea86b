/**
 * How `redfence reconcile` shows its result: one line per anomaly (kind, Redis key, partition, fence,
 * detail), the keys it cannot judge, optional samples, a summary; or all of it as one JSON document.
 * Never a value: details say how a value differs, not what it is. Progress goes to a TTY only.
 */

import { ANOMALY_KINDS, type PartitionRange, type Reconciliation, type Verdict } from './reconcile.js';
import type { DeadCounts } from './reconcile-fold.js';
import type { RepairResult } from './reconcile-repair.js';

export interface ReportInput {
  readonly topic: string;
  readonly store: string;
  readonly group: string;
  readonly ranges: ReadonlyMap<number, PartitionRange>;
  readonly records: number;
  readonly dead: DeadCounts;
  readonly storedKeys: number;
  readonly result: Reconciliation;
  readonly samples: readonly Verdict[];
  readonly repair?: RepairResult;
}

export function countsByKind(r: Reconciliation): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const k of ANOMALY_KINDS) counts[k] = 0;
  for (const a of r.anomalies) counts[a.kind] = (counts[a.kind] ?? 0) + 1;
  return counts;
}

export function reportJson(i: ReportInput): string {
  return `${JSON.stringify(
    {
      topic: i.topic,
      store: i.store,
      group: i.group,
      partitions: [...i.ranges.values()],
      records: i.records,
      deadLettered: i.dead,
      storedKeys: i.storedKeys,
      anomalies: i.result.anomalies,
      counts: countsByKind(i.result),
      cannotJudge: i.result.cannotJudge,
      samples: i.samples,
      ...(i.repair === undefined ? {} : { repair: i.repair }),
      clean: i.result.anomalies.length === 0,
    },
    null,
    2,
  )}\n`;
}

export function reportText(i: ReportInput): string {
  const lines: string[] = [];
  for (const a of i.result.anomalies)
    lines.push(`${a.kind} ${a.key} partition=${a.partition} offset=${a.offset}: ${a.detail}`);
  for (const c of i.result.cannotJudge)
    lines.push(`cannot-judge ${c.key} partition=${c.partition}: ${c.reason}`);
  for (const s of i.samples)
    lines.push(
      `sample ${s.redisKey} partition=${s.partition} stored-offset=${s.storedOffset} expected-offset=${s.expectedOffset}: ${s.status}`,
    );
  for (const k of i.repair?.repaired ?? []) lines.push(`repaired ${k}`);
  for (const k of i.repair?.changed ?? [])
    lines.push(`not-repaired ${k}: written since it was read, left as it is`);
  for (const k of i.repair?.skipped ?? []) lines.push(`not-repaired ${k.key}: ${k.reason}`);
  const parts = [...i.ranges.values()]
    .map((r) => `${r.partition}:${r.start}..${r.end}@${r.committed}`)
    .join(' ');
  const counts = Object.entries(countsByKind(i.result))
    .filter(([, n]) => n > 0)
    .map(([k, n]) => `${k}=${n}`)
    .join(' ');
  const dead = Object.values(i.dead).reduce((a, b) => a + b, 0);
  lines.push(
    `reconciled ${i.topic} (store ${i.store}, group ${i.group}; partition:start..end@committed ${parts}): ${i.records} records (${dead} dead-lettered), ${i.storedKeys} stored keys, ${i.result.anomalies.length} anomalies${counts ? ` (${counts})` : ''}, ${i.result.cannotJudge.length} cannot be judged`,
  );
  return `${lines.join('\n')}\n`;
}

/** Up to `n` verdicts picked evenly over the judged keys (deterministic: the same run, the same keys). */
export function sample(verdicts: readonly Verdict[], n: number): Verdict[] {
  if (n <= 0 || verdicts.length === 0) return [];
  const sorted = [...verdicts].sort((a, b) =>
    a.redisKey < b.redisKey ? -1 : a.redisKey > b.redisKey ? 1 : 0,
  );
  if (n >= sorted.length) return sorted;
  const step = sorted.length / n;
  return Array.from({ length: n }, (_, k) => sorted[Math.floor(k * step)] as Verdict);
}

/** A progress line on a TTY, rewritten at most every 200 ms; silent elsewhere. */
export function progress(stream: NodeJS.WriteStream = process.stderr): {
  update(partition: number, at: number, range: PartitionRange): void;
  done(): void;
} {
  let last = 0;
  let shown = false;
  return {
    update(partition, at, range) {
      if (!stream.isTTY) return;
      const now = Date.now();
      if (now - last < 200) return;
      last = now;
      shown = true;
      const span = Math.max(1, range.end - range.start);
      const pct = Math.min(100, Math.floor(((at - range.start) * 100) / span));
      stream.write(`\rreading partition ${partition}: offset ${at} of ${range.end} (${pct}%)\u001b[K`);
    },
    done() {
      if (shown) stream.write('\r\u001b[K');
    },
  };
}
