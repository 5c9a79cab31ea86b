/**
 * The shipped Prometheus rules (ops/prometheus/redfence-rules.yml) pass `promtool check rules`, and each
 * alert fires on series recorded from a real processor's /metrics: `redfence run` works through a
 * backlog slowly (lag high, still processing), its Redis is SIGKILLed (outage, then stalled: lag and
 * nothing processed), Redis comes back and the backlog drains (no alert but dead letters), the input
 * topic grows a partition and customers' records move there (REBASE), then the partition's epoch is
 * raised behind its back, as a newer owner would (fenced). The recording is time-compressed: each
 * scrape, 250 ms apart, is one minute of promtool's input series, and the expectations are evaluated
 * at the scrapes where the test saw each situation.
 * One alert needs a situation a short run cannot make without disturbing the shared broker (commit
 * latency over a second): it is tested over written series, with REBASE there too.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { startRedisServer } from '../../src/harness/index.js';
import { killLeftovers, startProcessorChild } from '../helpers/child.js';
import { uniqueName } from '../helpers/env.js';
import { addPartitions, createTopics, pollUntil, produce } from '../helpers/kafka.js';
import { customerOrders } from '../helpers/outputs.js';

const ROOT = resolve(import.meta.dirname, '../..');
const RULES = join(ROOT, 'ops/prometheus/redfence-rules.yml');
const dir = mkdtempSync(join(tmpdir(), 'redfence-alerts-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const PROMTOOL = execFileSync('bash', [join(ROOT, 'scripts/promtool.sh')], { encoding: 'utf8' }).trim();

/** Runs `promtool test rules` on a unit-test file made of `tests`; returns its output (asserting success). */
function promtoolTest(name: string, tests: object[]): string {
  const file = join(dir, `${name}.yml`);
  // JSON is YAML: promtool reads it as it is
  writeFileSync(file, JSON.stringify({ rule_files: [RULES], evaluation_interval: '1m', tests }, null, 1));
  const r = spawnSync(PROMTOOL, ['test', 'rules', file], { encoding: 'utf8' });
  assert.equal(r.status, 0, `promtool test rules ${name}:\n${r.stdout}\n${r.stderr}`);
  return r.stdout;
}

/** The kept redfence_ series of one /metrics text, by their full name with labels. */
const KEPT =
  /^(redfence_(consumer_lag_records|verdicts_total|redis_outage|fenced_partitions_total|dlq_records_total))(\{[^}]*\})? (\S+)$/;
function parse(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = KEPT.exec(line);
    if (m === null) continue;
    const labels = (m[3] ?? '{}').slice(1, -1);
    const all = ['job="redfence"', 'instance="A"', ...(labels === '' ? [] : [labels])].join(',');
    out.set(`${m[1]}{${all}}`, Number(m[4]));
  }
  return out;
}

/** Scrapes /metrics every 250 ms; each scrape is one minute of the recorded series. */
class Recorder {
  readonly scrapes: Map<string, number>[] = [];
  #timer: NodeJS.Timeout | undefined;
  constructor(readonly port: number) {}
  start(): void {
    const tick = async (): Promise<void> => {
      const res = await fetch(`http://127.0.0.1:${this.port}/metrics`).catch(() => undefined);
      this.scrapes.push(res?.ok ? parse(await res.text()) : new Map());
      this.#timer = setTimeout(() => void tick(), 250);
    };
    void tick();
  }
  stop(): void {
    clearTimeout(this.#timer);
  }
  /** The index of the latest scrape (the eval time in minutes of the situation it shows). */
  get now(): number {
    return this.scrapes.length - 1;
  }
  /** A series' values over the last n scrapes (NaN where absent). */
  last(series: string, n: number): number[] {
    return this.scrapes.slice(-n).map((s) => s.get(series) ?? Number.NaN);
  }
  names(prefix: string): string[] {
    const all = new Set<string>();
    for (const s of this.scrapes) for (const k of s.keys()) if (k.startsWith(prefix)) all.add(k);
    return [...all];
  }
  /** promtool input_series: one value per scrape, `_` where the series was absent. */
  inputSeries(): { series: string; values: string }[] {
    return this.names('redfence_').map((series) => ({
      series,
      values: this.scrapes.map((s) => (s.has(series) ? String(s.get(series)) : '_')).join(' '),
    }));
  }
}

const verdictSum = (r: Recorder, partition: number): number[] => {
  const names = r.names(`redfence_verdicts_total{`).filter((n) => n.includes(`partition="${partition}"`));
  return r.scrapes.slice(-16).map((s) => names.reduce((a, n) => a + (s.get(n) ?? 0), 0));
};

describe('alert rules', { timeout: 420_000 }, () => {
  after(() => killLeftovers());

  it('promtool check rules accepts the shipped rules', () => {
    const out = execFileSync(PROMTOOL, ['check', 'rules', RULES], { encoding: 'utf8' });
    assert.match(out, /SUCCESS: 8 rules found/);
  });

  it('the dashboard and the rules use only metrics redfence exports; every dashboard query parses', async () => {
    const { Registry } = await import('prom-client');
    const { RedfenceMetrics } = await import('../../src/metrics/index.js');
    const registry = new Registry();
    new RedfenceMetrics({ registry });
    const exported = new Set<string>();
    for (const m of await registry.getMetricsAsJSON()) {
      exported.add(m.name);
      if (String(m.type) === 'histogram')
        for (const s of ['_bucket', '_sum', '_count']) exported.add(m.name + s);
    }
    const dashboard = JSON.parse(readFileSync(join(ROOT, 'ops/grafana/redfence-dashboard.json'), 'utf8')) as {
      panels: { title: string; targets: { expr: string }[] }[];
    };
    const exprs = dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr));
    const used = new Set(
      [...exprs, readFileSync(RULES, 'utf8')].flatMap((text) => text.match(/\bredfence_[a-z_]+/g) ?? []),
    );
    assert.ok(used.size >= 8, `metrics used: ${[...used]}`);
    for (const name of used) assert.ok(exported.has(name), `${name} is used but not exported`);
    // the dashboard's queries, with Grafana's variables filled in, as recording rules: promtool parses them
    const file = join(dir, 'dashboard-rules.yml');
    const rules = exprs.map((expr, i) => ({
      record: `redfence:dashboard_${i}`,
      expr: expr.replaceAll('$__rate_interval', '5m').replaceAll('$job', '.*').replaceAll('$instance', '.*'),
    }));
    writeFileSync(file, JSON.stringify({ groups: [{ name: 'dashboard', rules }] }));
    const out = execFileSync(PROMTOOL, ['check', 'rules', file], { encoding: 'utf8' });
    assert.match(out, new RegExp(`SUCCESS: ${rules.length} rules found`));
  });

  it('lag, stall, Redis outage, dead letters and fencing fire on series recorded from a real run', async () => {
    const redis = await startRedisServer({ persistent: true });
    const ns = uniqueName('alerts');
    const n = { orders: `${ns}-orders`, totals: `${ns}-totals`, store: ns, group: `${ns}-g` };
    const drop = await createTopics([
      // one partition: the consumer's fetch queue would hand over one partition's backlog before the
      // other's, and this run needs a steady lag and rate on each partition it looks at
      { topic: n.orders, partitions: 1 },
      { topic: n.totals, partitions: 1 },
      { topic: `${n.orders}.DLT`, partitions: 1 },
    ]);
    const recorder = { current: undefined as Recorder | undefined };
    try {
      // a backlog with a poison record (an amount that is not an integer) every 100 records
      const orders = customerOrders(40_000, 500).messages.map((o, i) =>
        i % 100 === 50 ? { key: o.key, value: JSON.stringify({ customer: o.key, amount: 1.5 }) } : o,
      );
      await produce(n.orders, orders);
      const a = await startProcessorChild({
        ...n,
        mode: 'exactly-once',
        instance: 'A',
        redisUrl: redis.url,
        // small batches, each in its own transaction: the backlog takes a while
        env: {
          REDFENCE_MAX_BATCH_SIZE: '20',
          REDFENCE_GROUP_COMMIT_RECORDS: '0',
          REDFENCE_KAFKA_CONFIG: 'topic.metadata.refresh.interval.ms=1000',
        },
      });
      const r = new Recorder(a.metricsPort);
      recorder.current = r;
      r.start();
      const lag = (p: number) =>
        `redfence_consumer_lag_records{job="redfence",instance="A",topic="${n.orders}",partition="${p}"}`;
      const partitions = [0];

      // 1. slow: over 10,000 behind for 8 scrapes, and processing all along (dead
      // letters among what was processed lately)
      const deadLettered = () =>
        r.names('redfence_dlq_records_total{').every((d) => {
          const v = r.last(d, 4);
          return v.length === 4 && (v[3] ?? 0) > (v[0] ?? Number.POSITIVE_INFINITY);
        });
      await pollUntil(
        '> 10,000 behind for 8 scrapes while processing, dead letters lately',
        () =>
          r.names('redfence_dlq_records_total{').length > 0 &&
          deadLettered() &&
          partitions.every((p) => {
            const v = verdictSum(r, p);
            return (
              r.last(lag(p), 9).every((x) => x > 10_000) &&
              v.length >= 9 &&
              v.slice(-6).every((x, i) => x > (v.at(-9 + i) ?? Number.POSITIVE_INFINITY))
            );
          }),
        90_000,
      ).catch((err: Error) => {
        const seen = partitions.map(
          (p) => `p${p} lag ${r.last(lag(p), 9)} processed ${verdictSum(r, p).slice(-9)}`,
        );
        const dl = r.names('redfence_dlq_records_total{').map((d) => `${d} ${r.last(d, 4)}`);
        throw new Error(
          `${err.message}; ${r.scrapes.length} scrapes; ${seen.join('; ')}; ${dl.join('; ')} ${a.tail(8)}`,
        );
      });
      const slowAt = r.now;
      const dlq = r.names('redfence_dlq_records_total{');
      assert.ok(dlq.length > 0, 'dead letters were counted');

      // 2. Redis SIGKILLed: outage at once (the CLI's client fails a command after one reconnect, so the
      // guard pauses within a second; ioredis' default held commands for about 70 s), then stalled (lag
      // > 0, nothing processed for 12 scrapes)
      await redis.kill();
      await pollUntil(
        'the outage metric at 1',
        () => r.last('redfence_redis_outage{job="redfence",instance="A"}', 1)[0] === 1,
        10_000,
      );
      await pollUntil(
        'the outage seen for 14 scrapes with nothing processed in the last 12',
        () =>
          r.last('redfence_redis_outage{job="redfence",instance="A"}', 14).every((x) => x === 1) &&
          partitions.every((p) => {
            const v = verdictSum(r, p).slice(-12);
            return v.every((x) => x === v[0]) && (r.last(lag(p), 1)[0] ?? 0) > 0;
          }),
        60_000,
      ).catch((err: Error) => {
        const outage = r.last('redfence_redis_outage{job="redfence",instance="A"}', 14);
        throw new Error(
          `${err.message}; outage ${outage}; processed ${verdictSum(r, 0).slice(-12)} ${a.tail(8)}`,
        );
      });
      const outageAt = r.now;

      // 3. Redis back (its AOF kept every write): the backlog drains, lag 0 for 8 scrapes
      await redis.start();
      await pollUntil(
        'lag 0 for 8 scrapes',
        () => partitions.every((p) => r.last(lag(p), 8).every((x) => x === 0)),
        240_000,
      );
      const healthyAt = r.now;

      // 4. the input grows to two partitions (the consumer refreshes metadata every second): once the
      // new partition is owned (its REBASE series at 0), records of the same customers go there by
      // murmur2, and their keys' state was last written from partition 0: REBASE
      const rebase = `redfence_verdicts_total{job="redfence",instance="A",topic="${n.orders}",partition="1",verdict="REBASE"}`;
      await addPartitions(n.orders, 2);
      await pollUntil('partition 1 owned (its REBASE series at 0)', () => r.last(rebase, 1)[0] === 0, 60_000);
      await produce(n.orders, customerOrders(400, 50).messages);
      await pollUntil(
        'REBASE on partition 1, seen for 2 scrapes',
        () => r.last(rebase, 2).every((x) => x > 0),
        60_000,
      );
      const rebaseAt = r.now;

      // 5. a newer owner's epoch on partition 0: the next batch there is FENCEd
      const store = new Redis(redis.url);
      try {
        await store.incr(`rf:{${n.store}:${n.orders}:0}:epoch`);
      } finally {
        store.disconnect();
      }
      const fenced = `redfence_fenced_partitions_total{job="redfence",instance="A",topic="${n.orders}",partition="0"}`;
      const before = r.scrapes.length;
      await produce(n.orders, customerOrders(200, 50).messages);
      await pollUntil(
        'partition 0 fenced, seen for 2 scrapes',
        () => r.last(fenced, 2).every((x) => x >= 1),
        60_000,
      );
      assert.ok(r.scrapes.length > before);
      const fencedAt = r.now;
      r.stop();
      a.term();
      await a.waitExit(30_000).catch(() => a.kill());

      const byPartition = (summary: (p: number) => string, description: string, severity: string) =>
        partitions.map((p) => ({
          exp_labels: { job: 'redfence', instance: 'A', topic: n.orders, partition: String(p), severity },
          exp_annotations: { summary: summary(p), description },
        }));
      const slow = byPartition(
        (p) => `redfence: partition ${n.orders}/${p} is processed slower than it is written`,
        'More than 10,000 records behind the high watermark for 5 minutes while still processing. Add instances (up to the partition count), raise maxBatchSize, or look at redfence_redis_command_duration_seconds.',
        'warning',
      );
      const stalled = byPartition(
        (p) => `redfence: partition ${n.orders}/${p} has records waiting and none processed`,
        "Lag above 0 and no record processed for 10 minutes. Check redfence_redis_outage, the instance's /readyz and its log (a fatal error, a fenced partition, a paused consumer).",
        'critical',
      );
      const outage = [
        {
          exp_labels: { job: 'redfence', instance: 'A', severity: 'critical' },
          exp_annotations: {
            summary: 'redfence: Redis unreachable from A',
            description:
              'The processor paused consumption because Redis does not answer; nothing is skipped, it resumes when Redis is back.',
          },
        },
      ];
      const deadLetters = dlq.map((series) => {
        const reason = /reason="([^"]*)"/.exec(series)?.[1] ?? '';
        return {
          exp_labels: { job: 'redfence', instance: 'A', reason, severity: 'warning' },
          exp_annotations: {
            summary: `redfence: records sent to the dead-letter topic (${reason})`,
            description:
              'Records could not be processed and went to the dead-letter topic with their reason in the headers. Inspect them; nothing was lost.',
          },
        };
      });
      const fence = [
        {
          exp_labels: {
            job: 'redfence',
            instance: 'A',
            topic: n.orders,
            partition: '0',
            severity: 'warning',
          },
          exp_annotations: {
            summary: `redfence: A was fenced off partition ${n.orders}/0`,
            description:
              'A newer owner epoch holds the partition; this instance dropped its stale batch. Look for stalls longer than the session timeout (GC, CPU starvation, SIGSTOP).',
          },
        },
      ];
      const rebased = [
        {
          exp_labels: { job: 'redfence', instance: 'A', topic: n.orders, severity: 'warning' },
          exp_annotations: {
            summary: `redfence: keys of ${n.orders} moved between partitions (REBASE)`,
            description:
              'State written from one partition was updated from another. Expected once after adding partitions; otherwise a producer is not using the murmur2 partitioner.',
          },
        },
      ];
      const at = (t: number, alertname: string, exp_alerts: object[]) => ({
        eval_time: `${t}m`,
        alertname,
        exp_alerts,
      });
      promtoolTest('recorded', [
        {
          interval: '1m',
          input_series: r.inputSeries(),
          alert_rule_test: [
            at(slowAt, 'RedfenceLagHigh', slow),
            at(slowAt, 'RedfenceStalled', []),
            at(slowAt, 'RedfenceRedisOutage', []),
            at(slowAt, 'RedfenceDeadLetters', deadLetters),
            at(outageAt, 'RedfenceRedisOutage', outage),
            at(outageAt, 'RedfenceStalled', stalled),
            at(outageAt, 'RedfenceLagHigh', []),
            at(healthyAt, 'RedfenceLagHigh', []),
            at(healthyAt, 'RedfenceStalled', []),
            at(healthyAt, 'RedfenceRedisOutage', []),
            at(healthyAt, 'RedfenceFenced', []),
            at(healthyAt, 'RedfenceRebase', []),
            at(rebaseAt, 'RedfenceRebase', rebased),
            at(fencedAt, 'RedfenceFenced', fence),
          ],
        },
      ]);
    } finally {
      recorder.current?.stop();
      await redis.stop();
      await drop();
    }
  });

  it('slow commits and REBASE fire on written series', () => {
    const labels = 'job="redfence",instance="A"';
    // p99 of commits: 60 a minute, all in the (0.5 s, 2 s] bucket for 10 minutes, then all under 50 ms
    const bucket = (le: string, holdsSlowOnes: boolean) => ({
      series: `redfence_commit_duration_seconds_bucket{${labels},mode="exactly-once",le="${le}"}`,
      values: holdsSlowOnes ? '0+60x10 660+60x9' : '0x10 60+60x9',
    });
    const rebase = `redfence_verdicts_total{${labels},topic="orders",partition="3",verdict="REBASE"}`;
    promtoolTest('written', [
      {
        interval: '1m',
        input_series: [
          bucket('0.05', false),
          bucket('0.5', false),
          bucket('2', true),
          bucket('+Inf', true),
          { series: rebase, values: '0x5 12 12x30' },
        ],
        alert_rule_test: [
          {
            eval_time: '10m',
            alertname: 'RedfenceCommitSlow',
            exp_alerts: [
              {
                exp_labels: { job: 'redfence', instance: 'A', mode: 'exactly-once', severity: 'warning' },
                exp_annotations: {
                  summary: 'redfence: offset commits on A take over a second (p99, exactly-once)',
                  description:
                    'Commits or transactions are slow: broker load, an under-replicated __consumer_offsets or __transaction_state, or a network problem.',
                },
              },
            ],
          },
          { eval_time: '20m', alertname: 'RedfenceCommitSlow', exp_alerts: [] },
          {
            eval_time: '7m',
            alertname: 'RedfenceRebase',
            exp_alerts: [
              {
                exp_labels: { job: 'redfence', instance: 'A', topic: 'orders', severity: 'warning' },
                exp_annotations: {
                  summary: 'redfence: keys of orders moved between partitions (REBASE)',
                  description:
                    'State written from one partition was updated from another. Expected once after adding partitions; otherwise a producer is not using the murmur2 partitioner.',
                },
              },
            ],
          },
          { eval_time: '30m', alertname: 'RedfenceRebase', exp_alerts: [] },
        ],
      },
    ]);
  });
});
