/**
 * The Processing view's reading of the exposition format: label values with escapes, +Inf buckets,
 * families not asked for left out; quantiles as PromQL's histogram_quantile interpolates them, the +Inf
 * bucket answered with the highest finite bound, and no answer without observations or across a
 * restart (a bucket that went down); rates never negative across a counter reset.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { bucketDelta, bucketsOf, parseMetrics, quantile } from '../../src/console/prom-text.js';
import { figures, snapshotOf } from '../../src/console/scrape.js';

const TEXT = `# HELP redfence_verdicts_total Records processed, by fence verdict.
# TYPE redfence_verdicts_total counter
redfence_verdicts_total{topic="a \\"quoted\\" \\\\ topic",partition="0",verdict="APPLY"} 10
redfence_verdicts_total{topic="b",partition="1",verdict="APPLY"} 5
redfence_batch_records_bucket{le="10"} 2
redfence_batch_records_bucket{le="100"} 4
redfence_batch_records_bucket{le="+Inf"} 4
redfence_batch_records_sum 130
redfence_batch_records_count 4
other_metric 1
`;

describe('console: the metrics text', () => {
  it('reads samples with escaped labels and +Inf bounds, only the families asked for', () => {
    const s = parseMetrics(TEXT, (n) => n.startsWith('redfence_'));
    assert.equal(s.length, 7);
    assert.equal(s[0]?.labels.topic, 'a "quoted" \\ topic');
    assert.equal(s[0]?.value, 10);
    const b = bucketsOf(s, 'redfence_batch_records');
    assert.deepEqual(
      [...b],
      [
        [10, 2],
        [100, 4],
        [Number.POSITIVE_INFINITY, 4],
      ],
    );
  });

  it('quantiles interpolate within the bucket; +Inf answers the highest bound; none without data', () => {
    const b = new Map([
      [10, 2],
      [100, 4],
      [Number.POSITIVE_INFINITY, 4],
    ]);
    assert.equal(quantile(0.5, b), 10);
    assert.equal(quantile(0.75, b), 55);
    assert.equal(
      quantile(
        0.99,
        new Map([
          [1, 0],
          [Number.POSITIVE_INFINITY, 3],
        ]),
      ),
      1,
    );
    assert.equal(
      quantile(
        0.99,
        new Map([
          [1, 0],
          [Number.POSITIVE_INFINITY, 0],
        ]),
      ),
      null,
    );
    const restarted = bucketDelta(
      new Map([
        [1, 1],
        [Number.POSITIVE_INFINITY, 1],
      ]),
      b,
    );
    assert.equal(quantile(0.99, restarted), null);
  });

  it('rates between two scrapes, none across a counter reset', () => {
    const at = 1_000_000;
    const one = snapshotOf(
      parseMetrics(TEXT, () => true),
      at,
    );
    assert.equal(one.counters.get('APPLY'), 15);
    assert.equal(figures(one, undefined).seconds, null);
    assert.equal(figures(one, undefined).batchMean, 32.5);
    const more = TEXT.replace('verdict="APPLY"} 5', 'verdict="APPLY"} 25');
    const two = snapshotOf(
      parseMetrics(more, () => true),
      at + 2000,
    );
    const f = figures(two, one);
    assert.equal(f.seconds, 2);
    assert.equal(f.rates.get('APPLY'), 10);
    const reset = snapshotOf(
      parseMetrics('redfence_verdicts_total{verdict="APPLY"} 3\n', () => true),
      at + 4000,
    );
    assert.equal(figures(reset, two).rates.get('APPLY'), undefined);
  });
});
