/** The chaos run's report as a plain-text table (also written to a file by dev/chaos-long). */

import { HANDLER_KINDS } from './handler-verdict.js';
import { type ChaosReport, describeFault } from './harness.js';
import { n, table } from './report-table.js';
import { topologySummary, topologyTables } from './report-topology.js';
import { FAULT_KINDS } from './schedule.js';
import { KINDS } from './verifier.js';

/** A user's processor: the records of both runs and the comparison, by check; then each difference. */
function moduleTables(r: ChaosReport, out: string[]): void {
  const o = r.options;
  const c = r.comparison;
  const a = c?.reference;
  const b = c?.faulted ?? r.snapshot;
  const both = (f: (s: NonNullable<typeof b>) => number | string) => `${a ? f(a) : '-'} / ${b ? f(b) : '-'}`;
  out.push(
    table('Records (reference / faulted)', [
      ['input records', both((s) => s.inputRecords)],
      [
        `outputs (${o.mode === 'exactly-once' ? 'read_committed' : 'read_uncommitted'})`,
        both((s) => s.outputRecords),
      ],
      ['  keys with outputs', both((s) => s.outputs.size)],
      ['dead letters', both((s) => s.deadLetterRecords)],
      ['state keys in Redis', both((s) => s.state.size)],
      ['committed / end offsets', both((s) => `${s.committed}/${s.endOffsets}`)],
    ]),
  );
  if (!c) return;
  const rows: Array<[string, string | number]> = [
    ['state keys compared', c.stateKeys],
    ['output keys compared', c.outputKeys],
  ];
  if (c.mode === 'at-least-once') {
    rows.push(['  duplicate outputs (allowed)', c.duplicateOutputs]);
    rows.push(['  duplicate dead letters (allowed)', c.duplicateDeadLetters]);
  }
  for (const check of ['input', 'state', 'output', 'dead-letter', 'offsets'] as const)
    rows.push([`differences: ${check}`, c.counts.get(check) ?? 0]);
  rows.push(['keys that differ', c.keysDiffering]);
  out.push(table('Compared with the fault-free run', rows));
}

/** A handler run: the far side's calls and effects, then the violations by kind. */
function handlerTables(r: ChaosReport, out: string[]): void {
  const h = r.handler;
  const x = (f: (s: NonNullable<typeof h>) => number | string) => (h ? f(h) : '-');
  out.push(
    table('Records and effects (far side)', [
      ['input records', x((s) => s.inputRecords)],
      ['keys', x((s) => s.keys)],
      ['calls', x((s) => s.calls)],
      ['  answered 503 (retried)', x((s) => s.failedCalls)],
      ['  outside handle', x((s) => s.unboundCalls)],
      ['effects (answered 200)', x((s) => s.effects)],
      ['records handled again after a return', x((s) => s.handledAgain)],
      ['records replayed (unmarked effects)', x((s) => `${s.replayedRecords} (${s.unmarkedEffects})`)],
      [
        'zombie effects after SIGSTOP (repeated)',
        x((s) => `${s.zombieEffects} (${s.zombieEffectsRepeated})`),
      ],
      ['dead letters', x((s) => s.deadLetters)],
      ['committed / end offsets', x((s) => `${s.committed} / ${s.endOffsets}`)],
    ]),
  );
}

/** The run's Redis in a report's first line: `Redis sentinel, --wait-replicas 1` (or `no WAIT`). */
function redisWords(o: ChaosReport['options']): string {
  return `Redis ${o.redisTopology}, ${o.waitReplicas === undefined ? 'no WAIT' : `--wait-replicas ${o.waitReplicas}`}`;
}

export function formatReport(r: ChaosReport): string {
  const v = r.verify;
  const o = r.options;
  const out: string[] = [];
  if (o.handler) {
    out.push(
      `redfence chaos --handler ${o.handler.module}: seed ${r.seed}, ${o.handler.records.length} records, ` +
        `${o.partitions} partitions, far side ${o.handler.latencyMs.join('-')} ms, ${o.handler.failureRate} failing; ` +
        `produced in ${r.produceSeconds.toFixed(1)} s, drained in ${r.drainSeconds.toFixed(1)} s, total ${r.totalSeconds.toFixed(1)} s`,
    );
    handlerTables(r, out);
  } else if (o.topology) {
    out.push(
      `redfence chaos ${o.topology.module} (topology): seed ${r.seed}, mode ${o.mode}, ${o.topology.records.length} records, ` +
        `${o.partitions} partitions, ${redisWords(o)}; produced in ${r.produceSeconds.toFixed(1)} s, drained in ${r.drainSeconds.toFixed(1)} s, ` +
        `total ${r.totalSeconds.toFixed(1)} s`,
    );
    topologyTables(r, out);
  } else if (o.processor) {
    out.push(
      `redfence chaos ${o.processor.module}: seed ${r.seed}, mode ${o.mode}, ${o.processor.records.length} records, ` +
        `${o.partitions} partitions, ${redisWords(o)}; reference run ${r.reference ? `${r.reference.totalSeconds.toFixed(1)} s` : '-'}; faulted run produced in ${r.produceSeconds.toFixed(1)} s, ` +
        `drained in ${r.drainSeconds.toFixed(1)} s, total ${r.totalSeconds.toFixed(1)} s`,
    );
    moduleTables(r, out);
  } else {
    out.push(
      `redfence chaos: seed ${r.seed}, mode ${o.mode}, ${o.records} records, ${o.customers} customers (zipf ${o.skew}), ` +
        `${o.partitions} partitions, ${redisWords(o)}; produced in ${r.produceSeconds.toFixed(1)} s, drained in ${r.drainSeconds.toFixed(1)} s, ` +
        `total ${r.totalSeconds.toFixed(1)} s`,
    );
    const produced = (k: string) => r.produced.get(k) ?? 0;
    out.push(
      table('Records', [
        ['input records', v?.inputRecords ?? '-'],
        ['  valid orders', v?.validRecords ?? '-'],
        ['  of them ~1 MB', produced('large')],
        ['  poison: undecodable', v?.poisonByReason.get('undecodable') ?? 0],
        ['  poison: null-key', v?.poisonByReason.get('null-key') ?? 0],
        ['  poison: wrong-partition', v?.poisonByReason.get('wrong-partition') ?? 0],
        ['  poison: processing-error (refused)', v?.poisonByReason.get('processing-error') ?? 0],
        ['customers with orders', v?.customers ?? '-'],
        [
          `outputs (${o.mode === 'exactly-once' ? 'read_committed' : 'read_uncommitted'})`,
          v?.outputRecords ?? '-',
        ],
        ['  duplicates', v?.duplicateOutputs ?? '-'],
        ...((o.repairs ?? 0) > 0
          ? [
              ['  folded on drifted state (repair faults)', v?.driftedOutputs ?? '-'] as [
                string,
                string | number,
              ],
            ]
          : []),
        ['dead letters', v?.deadLetters ?? '-'],
        ['  duplicates', v?.duplicateDeadLetters ?? '-'],
        ['state keys in Redis', v?.stateKeys ?? '-'],
        ['pending entries left', v?.pendingEntriesLeft ?? '-'],
        ['committed / end offsets', v ? `${v.committed} / ${v.endOffsets}` : '-'],
      ]),
    );
  }
  const byKind = new Map<string, { n: number; ok: number }>();
  for (const f of r.faults) {
    const k = f.fault.kind === 'crash' ? `crash ${f.fault.point}` : f.fault.kind;
    const e = byKind.get(k) ?? { n: 0, ok: 0 };
    e.n++;
    if (f.failure === undefined) e.ok++;
    byKind.set(k, e);
  }
  const faultRows: Array<[string, string]> = [];
  for (const kind of FAULT_KINDS) {
    for (const [k, e] of [...byKind].sort()) {
      if (k === kind || k.startsWith(`${kind} `)) faultRows.push([k, `${e.ok} of ${e.n}`]);
    }
  }
  faultRows.push(['scheduled, never ran', String(r.schedule.length - r.faults.length)]);
  faultRows.push(['instance exits not caused', String(r.unexpectedExits.length)]);
  out.push(table('Faults (as intended / injected)', faultRows));
  const verdictRows: Array<[string, number]> = [...r.verdicts].sort().map(([k, n]) => [k, n]);
  for (const [k, n] of [...r.deadLetterMetrics].sort()) verdictRows.push([`dead letters: ${k}`, n]);
  if (verdictRows.length > 0) out.push(table('Verdicts (scraped /metrics; lower bounds)', verdictRows));
  const counts = v?.violationCounts ?? new Map<string, number>();
  const violationRows: Array<[string, number]> = [
    'input',
    'output',
    'state',
    'dead-letter',
    'offsets',
    'verdicts',
  ].map((c) => [c, counts.get(c) ?? 0]);
  violationRows.push(['harness', r.harnessErrors.length]);
  if (o.handler) {
    const rows: Array<[string, number]> = HANDLER_KINDS.map((k) => [k, r.handler?.counts.get(k) ?? 0]);
    rows.push(['harness', r.harnessErrors.length]);
    out.push(table('Violations by kind', rows));
  } else if (!o.processor && !o.topology) out.push(table('Violations', violationRows));
  else out.push(table('Harness', [['harness errors', r.harnessErrors.length]]));
  if (v && v.violations.length > 0) {
    const kindRows: Array<[string, number]> = KINDS.filter((k) => v.kinds.has(k)).map((k) => [
      k,
      v.kinds.get(k) ?? 0,
    ]);
    kindRows.push(['applies beyond the orders', v.extraApplies]);
    kindRows.push(['orders never applied', v.missingApplies]);
    out.push(table('Violations by kind', kindRows));
  }
  for (const x of v?.violations ?? []) out.push(`  VIOLATION [${x.check}] ${x.message}`);
  for (const x of r.handler?.violations ?? []) out.push(`  VIOLATION [${x.kind}] ${x.message}`);
  for (const x of r.comparison?.differences ?? []) out.push(`  DIFFERENCE [${x.check}] ${x.message}`);
  for (const x of r.topology?.differences ?? []) out.push(`  DIFFERENCE [${x.check}] ${x.message}`);
  for (const e of r.harnessErrors) out.push(`  HARNESS ${e}`);
  for (const e of r.reference?.failures ?? []) out.push(`  REFERENCE ${e}`);
  // with the instance's last lines (log and output), as a harness error carries them
  for (const e of r.unexpectedExits) out.push(`  EXIT ${e}`);
  for (const f of r.faults)
    if (f.failure !== undefined)
      out.push(`  FAULT #${f.fault.index} ${describeFault(f.fault)}: ${f.failure}`);
  out.push(r.ok ? 'VERDICT: OK' : `VERDICT: FAILED (${r.failures.length} reasons)`);
  return out.join('\n');
}

/** One line per fault: when, what, on whom, outcome. */
export function formatFaults(r: ChaosReport): string {
  return r.faults
    .map(
      (f) =>
        `  #${String(f.fault.index).padStart(3)} ${(f.startedAt / 1000).toFixed(1).padStart(7)}s ` +
        `${describeFault(f.fault).padEnd(26)} ${(f.target ?? '-').padEnd(12)} ${f.outcome} (${f.tookMs} ms)`,
    )
    .join('\n');
}

/** Faults by kind (crash by point): how many ran, and how many did what they are meant to. */
function faultCounts(r: ChaosReport): Array<{ kind: string; scheduled: number; ran: number; ok: number }> {
  const rows = new Map<string, { kind: string; scheduled: number; ran: number; ok: number }>();
  const kindOf = (f: ChaosReport['schedule'][number]) => (f.kind === 'crash' ? `crash ${f.point}` : f.kind);
  const row = (k: string) => {
    const e = rows.get(k) ?? { kind: k, scheduled: 0, ran: 0, ok: 0 };
    rows.set(k, e);
    return e;
  };
  for (const f of r.schedule) row(kindOf(f)).scheduled++;
  for (const f of r.faults) {
    const e = row(kindOf(f.fault));
    e.ran++;
    if (f.failure === undefined) e.ok++;
  }
  const order = (k: string) => FAULT_KINDS.findIndex((x) => k === x || k.startsWith(`${x} `));
  return [...rows.values()].sort((a, b) => order(a.kind) - order(b.kind) || a.kind.localeCompare(b.kind));
}

/** A user's processor: the summary's rows on input, outputs, state and the comparison. */
function moduleSummary(r: ChaosReport): string[] {
  const c = r.comparison;
  const f = c?.faulted ?? r.snapshot;
  const diffs = c ? [...c.counts].filter(([, x]) => x > 0) : [];
  return [
    `| module | \`${r.options.processor?.module}\`, ${n(r.options.processor?.records.length)} records, ${r.options.partitions} partitions; reference run ${r.reference ? `${n(Math.round(r.reference.totalSeconds))} s` : '-'} |`,
    `| outputs (${r.options.mode === 'exactly-once' ? 'read_committed' : 'read_uncommitted'}) | ${n(f?.outputRecords)} (reference ${n(c?.reference.outputRecords)})${c && c.mode === 'at-least-once' ? `, ${n(c.duplicateOutputs)} duplicates` : ''} |`,
    `| dead letters | ${n(f?.deadLetterRecords)} (reference ${n(c?.reference.deadLetterRecords)}) |`,
    `| state | ${n(f?.state.size)} keys (reference ${n(c?.reference.state.size)}); committed / end offsets ${f ? `${n(f.committed)} / ${n(f.endOffsets)}` : '-'} |`,
    `| differences from the fault-free run | ${c ? (diffs.length === 0 ? '0' : `${diffs.map(([k, x]) => `${k} ${n(x)}`).join(', ')}; ${n(c.keysDiffering)} keys`) : 'not compared'} |`,
  ];
}

/** A handler run: the summary's rows on records, effects and violations. */
function handlerSummary(r: ChaosReport): string[] {
  const h = r.handler;
  return [
    `| handler | \`${r.options.handler?.module}\`, ${n(r.options.handler?.records.length)} records, ${r.options.partitions} partitions |`,
    `| far side | ${n(h?.calls)} calls, ${n(h?.failedCalls)} answered 503, ${n(h?.effects)} effects; ${n(h?.handledAgain)} records handled again after a return, ${n(h?.replayedRecords)} records replayed (${n(h?.unmarkedEffects)} unmarked effects); zombie effects after SIGSTOP ${n(h?.zombieEffects)} |`,
    `| dead letters | ${n(h?.deadLetters)}; committed / end offsets ${h ? `${n(h.committed)} / ${n(h.endOffsets)}` : '-'} |`,
    `| violations | ${h ? HANDLER_KINDS.map((k) => `${k} ${n(h.counts.get(k) ?? 0)}`).join(', ') : 'not judged'} |`,
  ];
}

/**
 * A markdown block for docs/chaos.md's list of long runs: date, command, duration, faults by kind and
 * outcome, records, violations, verdict.
 */
export function formatSummary(r: ChaosReport, command: string): string {
  const v = r.verify;
  const o = r.options;
  const poison = v ? v.inputRecords - v.validRecords : undefined;
  const reasons = v
    ? [...v.poisonByReason]
        .sort()
        .map(([k, x]) => `${k} ${n(x)}`)
        .join(', ')
    : '';
  const lines = [
    `### ${r.startedAt.slice(0, 10)}: ${o.mode}, seed ${r.seed}: ${r.ok ? 'OK' : 'FAILED'}`,
    '',
    `\`${command}\``,
    '',
    '| | |',
    '| --- | --- |',
    `| duration | ${n(Math.round(r.totalSeconds))} s (produced in ${n(Math.round(r.produceSeconds))} s, drained in ${r.drainSeconds.toFixed(1)} s) |`,
    ...(o.handler
      ? handlerSummary(r)
      : o.topology
        ? topologySummary(r)
        : o.processor
          ? moduleSummary(r)
          : [
              `| input | ${n(v?.inputRecords)} records: ${n(v?.validRecords)} valid orders (${n(r.produced.get('large') ?? 0)} of ~1 MB), ${n(poison)} poison (${reasons}); ${n(o.customers)} customers, ${o.partitions} partitions |`,
              `| outputs (${o.mode === 'exactly-once' ? 'read_committed' : 'read_uncommitted'}) | ${n(v?.outputRecords)}, ${n(v?.duplicateOutputs)} duplicates${(o.repairs ?? 0) > 0 ? `, ${n(v?.driftedOutputs)} folded on drifted state` : ''} |`,
              `| dead letters | ${n(v?.deadLetters)}, ${n(v?.duplicateDeadLetters)} duplicates |`,
              `| state | ${n(v?.stateKeys)} keys; committed / end offsets ${v ? `${n(v.committed)} / ${n(v.endOffsets)}` : '-'} |`,
            ]),
    `| Redis | ${redisWords(o).slice('Redis '.length)} |`,
    ...(o.processor || o.handler || o.topology
      ? []
      : [
          `| violations | ${v ? n(v.violations.length) : 'not verified'}${v && v.violations.length > 0 ? ` (${[...v.violationCounts].map(([k, x]) => `${k} ${x}`).join(', ')})` : ''} |`,
        ]),
    ...(v && v.violations.length > 0
      ? [
          `| by kind | ${KINDS.filter((k) => v.kinds.has(k))
            .map((k) => `${k} ${n(v.kinds.get(k))}`)
            .join(
              ', ',
            )}; ${n(v.extraApplies)} applies beyond the orders, ${n(v.missingApplies)} orders never applied |`,
        ]
      : []),
    `| instance exits no fault caused | ${r.unexpectedExits.length} |`,
    '',
    '| fault | scheduled | ran | as expected |',
    '| --- | ---: | ---: | ---: |',
    ...faultCounts(r).map((e) => `| ${e.kind} | ${e.scheduled} | ${e.ran} | ${e.ok} |`),
  ];
  if (r.failures.length > 0) lines.push('', 'Failed because:', ...r.failures.map((f) => `- ${f}`));
  return lines.join('\n');
}
