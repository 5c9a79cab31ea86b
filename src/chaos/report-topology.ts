/**
 * A topology run's part of the chaos report (src/chaos/report.ts): the table comparing the run with the
 * model, and the summary's rows.
 */
import { n, table } from './report-table.js';
import type { ChaosReport } from './run-options.js';
import { TOPOLOGY_CHECKS } from './topology-verdict.js';

/** A topology run: the records the run and the model have, then the differences by check. */
export function topologyTables(r: ChaosReport, out: string[]): void {
  const t = r.topology;
  const x = (f: (s: NonNullable<typeof t>) => number | string) => (t ? f(t) : '-');
  const rows: Array<[string, string | number]> = [
    ['input records (read back)', x((s) => s.inputRecords)],
    ...((t?.inputTopics.size ?? 0) > 1
      ? [['  per input topic', x((s) => [...s.inputTopics.values()].join(' / '))] as [string, string]]
      : []),
    ...(r.options.inputPartitions !== undefined
      ? [
          ['  partitions per input topic', x((s) => [...s.inputPartitions.values()].join(' / '))] as [
            string,
            string,
          ],
        ]
      : []),
    ...(r.lateTopic ? lateRows(r.lateTopic, t) : []),
    [
      `outputs (${r.options.mode === 'exactly-once' ? 'read_committed' : 'read_uncommitted'}) / model`,
      x((s) => `${s.outputRecords} / ${s.modelOutputs}`),
    ],
    ['output keys compared', x((s) => s.keys)],
    [
      '  of them from several tasks',
      x((s) =>
        r.options.mode === 'exactly-once'
          ? `${s.keysUnordered} (${s.keysAmbiguous} ambiguous: as multisets)`
          : `${s.keysUnordered} (as multisets)`,
      ),
    ],
  ];
  if ((r.options.topology?.built.repartitionTopics.length ?? 0) > 0) {
    rows.push([
      `repartition records (${r.options.mode === 'exactly-once' ? 'read_committed' : 'read_uncommitted'}, read live) / model`,
      x((s) => `${s.repartitionRecords} / ${s.modelRepartitionRecords}`),
    ]);
    if (r.options.mode === 'at-least-once')
      rows.push(['  repeated repartition records (allowed)', x((s) => s.repartitionDuplicates)]);
    rows.push(['  partitions compared as multisets (ambiguous)', x((s) => s.repartitionAmbiguous)]);
    rows.push(['  repartition records purged during the run', x((s) => s.repartitionPurged)]);
  }
  if (r.options.mode === 'at-least-once') {
    rows.push([
      '  duplicate outputs in replays (allowed)',
      x((s) => `${s.duplicateOutputs} (${s.replays} replays)`),
    ]);
    rows.push(['  duplicate dead letters (allowed)', x((s) => s.duplicateDeadLetters)]);
  }
  if (r.options.idleCloseMs !== undefined) {
    rows.push(['ticks read back (--idle-close)', x((s) => s.ticks)]);
    rows.push(['  made after the drain (left out)', x((s) => s.ticksUnread)]);
    rows.push(['  results the model writes on taking them', x((s) => s.tickOutputs)]);
  }
  rows.push(['dead letters / model', x((s) => `${s.deadLetterRecords} / ${s.modelDeadLetters}`)]);
  rows.push(['committed / end offsets', x((s) => `${s.committed} / ${s.endOffsets}`)]);
  for (const check of TOPOLOGY_CHECKS)
    rows.push([`differences: ${check}`, x((s) => s.counts.get(check) ?? 0)]);
  rows.push(['output keys that differ', x((s) => s.keysDiffering)]);
  out.push(
    table(
      'Compared with the model (runModel per task over the input and repartition topics read back)',
      rows,
    ),
  );
}

/** A topology run: the summary's rows on input, outputs and the differences from the model. */
export function topologySummary(r: ChaosReport): string[] {
  const t = r.topology;
  const diffs = t ? [...t.counts].filter(([, x]) => x > 0) : [];
  return [
    `| topology | \`${r.options.topology?.module}\`, ${n(r.options.topology?.records.length)} records, ${r.options.partitions} partitions${shape(r)} |`,
    `| outputs (${r.options.mode === 'exactly-once' ? 'read_committed' : 'read_uncommitted'}) | ${n(t?.outputRecords)} (model ${n(t?.modelOutputs)})${t && r.options.mode === 'at-least-once' ? `, ${n(t.duplicateOutputs)} in replays` : ''}; ${n(t?.keys)} keys |`,
    `| dead letters | ${n(t?.deadLetterRecords)} (model ${n(t?.modelDeadLetters)}); committed / end offsets ${t ? `${n(t.committed)} / ${n(t.endOffsets)}` : '-'} |`,
    ...((r.options.topology?.built.repartitionTopics.length ?? 0) > 0
      ? [
          `| repartition records | ${n(t?.repartitionRecords)} (model ${n(t?.modelRepartitionRecords)})${t && r.options.mode === 'at-least-once' ? `, ${n(t.repartitionDuplicates)} repeated` : ''}; ${n(t?.repartitionPurged)} purged during the run |`,
        ]
      : []),
    ...(t && t.ticks > 0
      ? [
          `| ticks (--idle-close) | ${n(t.ticks)} read back (${n(t.ticksUnread)} after the drain, left out); ${n(t.tickOutputs)} results the model writes on taking them |`,
        ]
      : []),
    `| differences from the model | ${t ? (diffs.length === 0 ? '0' : `${diffs.map(([k, x]) => `${k} ${n(x)}`).join(', ')}; ${n(t.keysDiffering)} keys`) : 'not judged'} |`,
  ];
}

/** Seconds since the run started, or '-'. */
const at = (s: number | undefined) => (s === undefined ? '-' : `${s.toFixed(1)} s`);

/** The late topic's rows: what it held, when it was made (after the first start), who read it. */
function lateRows(
  late: NonNullable<ChaosReport['lateTopic']>,
  t: ChaosReport['topology'],
): Array<[string, string]> {
  return [
    [
      `late topic ${late.name} (${late.partitions} partitions)`,
      `${n(t?.inputTopics.get(late.topic))} records, ${n(t?.modelOutputsByInput.get(late.topic))} model outputs of its tasks`,
    ],
    [
      '  first start / made / read by every instance',
      `${at(late.firstStartedAt)} / ${at(late.createdAt)} / ${at(late.pickedUpAt)}`,
    ],
    ['  instances restarted / resolved it', `${late.restarted} / ${late.resolvedBy.length}`],
  ];
}

/** The summary's words on input topics with their own counts and a late topic. */
function shape(r: ChaosReport): string {
  const counts = Object.entries(r.options.inputPartitions ?? {}).map(([topic, c]) => `${topic} ${c}`);
  const late = r.lateTopic;
  return (
    (counts.length > 0 ? ` (${counts.join(', ')})` : '') +
    (late
      ? `; ${late.name} made at ${at(late.createdAt)} (first instance started at ${at(late.firstStartedAt)}), ${late.restarted} instances restarted to read it`
      : '')
  );
}
