/**
 * The RedfenceInputSkipped rule (ops/prometheus/redfence-rules.yml) with promtool over written series:
 * it fires on a partition's first skip (the counter's series appears at 1: no increase() to see) and on
 * a later skip of a partition that had one before, each for 15 minutes. The series a real
 * processor exports are test/processor/offset-resets.test.ts's.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, describe, it } from 'node:test';

const ROOT = resolve(import.meta.dirname, '../..');
const RULES = join(ROOT, 'ops/prometheus/redfence-rules.yml');

describe('RedfenceInputSkipped', { timeout: 120_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'redfence-skipped-alert-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('fires on a first skip and on a later one, for 15 minutes each, per partition and reason', () => {
    const promtool = execFileSync('bash', [join(ROOT, 'scripts/promtool.sh')], { encoding: 'utf8' }).trim();
    const series = (partition: string, reason: string) =>
      `redfence_input_offset_resets_total{job="redfence",instance="A",topic="orders",partition="${partition}",reason="${reason}"}`;
    const firing = (partition: string, reason: string) => ({
      exp_labels: {
        job: 'redfence',
        instance: 'A',
        topic: 'orders',
        partition,
        reason,
        severity: 'critical',
      },
      exp_annotations: {
        summary: `redfence: records of orders/${partition} were never processed (${reason})`,
        description:
          "The group's committed offset was outside the partition's log when it was assigned, and consumption went on from the log start. retention: records were deleted before they were processed (their count: redfence_input_records_skipped_total; raise the topic's retention above the longest stall). beyond_end: the topic was made again; its keys' state in Redis holds offsets of the old log. docs/operations.md, \"Records deleted before they were processed\".",
      },
    });
    const tests = [
      {
        interval: '1m',
        input_series: [
          // partition 0: first skip at minute 6, the series appears with it
          { series: series('0', 'retention'), values: '_x6 1x40' },
          // partition 1: a first skip at minute 0, another at minute 21
          { series: series('1', 'beyond_end'), values: '1x20 2x25' },
        ],
        alert_rule_test: [
          // both series are new: partition 1's first skip was at minute 0
          {
            eval_time: '7m',
            alertname: 'RedfenceInputSkipped',
            exp_alerts: [firing('0', 'retention'), firing('1', 'beyond_end')],
          },
          { eval_time: '18m', alertname: 'RedfenceInputSkipped', exp_alerts: [firing('0', 'retention')] },
          { eval_time: '25m', alertname: 'RedfenceInputSkipped', exp_alerts: [firing('1', 'beyond_end')] },
          { eval_time: '44m', alertname: 'RedfenceInputSkipped', exp_alerts: [] },
        ],
      },
    ];
    const file = join(dir, 'skipped.yml');
    // JSON is YAML: promtool reads it as it is
    writeFileSync(file, JSON.stringify({ rule_files: [RULES], evaluation_interval: '1m', tests }, null, 1));
    const r = spawnSync(promtool, ['test', 'rules', file], { encoding: 'utf8' });
    assert.equal(r.status, 0, `promtool test rules:\n${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /SUCCESS/);
  });
});
