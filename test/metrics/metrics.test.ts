import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { register as globalRegistry, Registry } from 'prom-client';
import { RedfenceError } from '../../src/errors/index.js';
import { HealthState, RedfenceMetrics } from '../../src/metrics/index.js';

/** The sample lines of one metric name (exact name, then `{` or space). */
function samples(text: string, name: string): string[] {
  return text.split('\n').filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `));
}

describe('RedfenceMetrics', () => {
  it('counts verdicts with topic, partition and verdict labels', async () => {
    const m = new RedfenceMetrics();
    m.verdict('orders', 3, 'applied');
    m.verdict('orders', 3, 'applied', 4);
    m.verdict('orders', 3, 'duplicate', 2);
    const text = await m.metricsText();
    assert.match(text, /# TYPE redfence_verdicts_total counter/);
    assert.deepEqual(samples(text, 'redfence_verdicts_total').sort(), [
      'redfence_verdicts_total{topic="orders",partition="3",verdict="applied"} 5',
      'redfence_verdicts_total{topic="orders",partition="3",verdict="duplicate"} 2',
    ]);
  });

  it('observes histograms with the documented buckets', async () => {
    const m = new RedfenceMetrics();
    m.redisCommand('fence', 0.0003);
    m.redisCommand('fence', 2);
    m.batch(1);
    m.batch(7500);
    m.commit('exactly-once', 0.02);
    const text = await m.metricsText();
    assert.match(text, /# TYPE redfence_redis_command_duration_seconds histogram/);
    assert.ok(text.includes('redfence_redis_command_duration_seconds_bucket{le="0.0001",command="fence"} 0'));
    assert.ok(text.includes('redfence_redis_command_duration_seconds_bucket{le="0.0005",command="fence"} 1'));
    assert.ok(text.includes('redfence_redis_command_duration_seconds_bucket{le="1",command="fence"} 1'));
    assert.ok(text.includes('redfence_redis_command_duration_seconds_bucket{le="+Inf",command="fence"} 2'));
    assert.ok(text.includes('redfence_redis_command_duration_seconds_count{command="fence"} 2'));
    assert.ok(text.includes('redfence_redis_command_duration_seconds_sum{command="fence"} 2.0003'));
    assert.ok(text.includes('redfence_batch_records_bucket{le="1"} 1'));
    assert.ok(text.includes('redfence_batch_records_bucket{le="5000"} 1'));
    assert.ok(text.includes('redfence_batch_records_bucket{le="10000"} 2'));
    assert.ok(text.includes('redfence_batch_records_sum 7501'));
    assert.ok(text.includes('redfence_commit_duration_seconds_bucket{le="0.025",mode="exactly-once"} 1'));
    assert.ok(text.includes('redfence_commit_duration_seconds_count{mode="exactly-once"} 1'));
  });

  it('sets lag per partition and clears it on revocation', async () => {
    const m = new RedfenceMetrics();
    m.lag('orders', 0, 12);
    m.lag('orders', 1, 3);
    m.lag('orders', 0, 10);
    let text = await m.metricsText();
    assert.deepEqual(samples(text, 'redfence_consumer_lag_records').sort(), [
      'redfence_consumer_lag_records{topic="orders",partition="0"} 10',
      'redfence_consumer_lag_records{topic="orders",partition="1"} 3',
    ]);
    m.clearPartition('orders', 0);
    m.clearPartition('orders', 7); // never set: a no-op
    text = await m.metricsText();
    assert.deepEqual(samples(text, 'redfence_consumer_lag_records'), [
      'redfence_consumer_lag_records{topic="orders",partition="1"} 3',
    ]);
  });

  it('counts rebalances (all kinds start at 0), dead letters, gaps, fencing and outage', async () => {
    const m = new RedfenceMetrics();
    let text = await m.metricsText();
    assert.deepEqual(samples(text, 'redfence_rebalances_total').sort(), [
      'redfence_rebalances_total{kind="assign"} 0',
      'redfence_rebalances_total{kind="lost"} 0',
      'redfence_rebalances_total{kind="revoke"} 0',
    ]);
    assert.deepEqual(samples(text, 'redfence_redis_outage'), ['redfence_redis_outage 0']);

    m.rebalance('assign');
    m.rebalance('assign');
    m.rebalance('lost');
    m.deadLetter('poison');
    m.deadLetter('poison', 2);
    m.offsetGap('orders', 2, 5);
    m.redisOutage(true);
    m.fenced('orders', 2);
    text = await m.metricsText();
    assert.ok(text.includes('redfence_rebalances_total{kind="assign"} 2'));
    assert.ok(text.includes('redfence_rebalances_total{kind="lost"} 1'));
    assert.ok(text.includes('redfence_rebalances_total{kind="revoke"} 0'));
    assert.deepEqual(samples(text, 'redfence_dlq_records_total'), [
      'redfence_dlq_records_total{reason="poison"} 3',
    ]);
    assert.deepEqual(samples(text, 'redfence_offset_gaps_total'), [
      'redfence_offset_gaps_total{topic="orders",partition="2"} 5',
    ]);
    assert.deepEqual(samples(text, 'redfence_redis_outage'), ['redfence_redis_outage 1']);
    assert.deepEqual(samples(text, 'redfence_fenced_partitions_total'), [
      'redfence_fenced_partitions_total{topic="orders",partition="2"} 1',
    ]);
    m.redisOutage(false);
    assert.deepEqual(samples(await m.metricsText(), 'redfence_redis_outage'), ['redfence_redis_outage 0']);
  });

  it('counts per topology node (series at 0 from the start) and sums repartition lag per reading node', async () => {
    const m = new RedfenceMetrics({ labels: { env: 'test' } });
    m.topology({
      application: 'fraud',
      nodes: ['src', 'big', 'counts', 'rep-source'],
      windowed: ['counts'],
      repartition: new Map([['fraud-rep-repartition', 'rep-source']]),
    });
    let text = await m.metricsText();
    assert.deepEqual(samples(text, 'redfence_topology_records_in_total').sort(), [
      'redfence_topology_records_in_total{application_id="fraud",topology_node="big",env="test"} 0',
      'redfence_topology_records_in_total{application_id="fraud",topology_node="counts",env="test"} 0',
      'redfence_topology_records_in_total{application_id="fraud",topology_node="rep-source",env="test"} 0',
      'redfence_topology_records_in_total{application_id="fraud",topology_node="src",env="test"} 0',
    ]);
    assert.deepEqual(samples(text, 'redfence_topology_late_records_total'), [
      'redfence_topology_late_records_total{application_id="fraud",topology_node="counts",env="test"} 0',
    ]);
    assert.deepEqual(
      samples(text, 'redfence_topology_repartition_lag_records'),
      [],
      'no owned partition yet',
    );

    m.topologyNode('fraud', 'big', 10, 4);
    m.topologyNode('fraud', 'big', 5, 0);
    m.topologyLate('fraud', 'counts', 2);
    m.topologyDropped('fraud', 'counts', 'null-key', 3);
    m.ownerCache('fraud', 480, 20);
    m.ownerCache('fraud', 0, 5);
    m.lag('fraud-rep-repartition', 0, 7, { committed: 3, end: 10 });
    m.lag('fraud-rep-repartition', 1, 5, { committed: 15, end: 20 });
    m.lag('orders', 0, 100, { committed: 0, end: 100 }); // not a repartition topic
    text = await m.metricsText();
    assert.ok(
      text.includes(
        'redfence_topology_records_in_total{application_id="fraud",topology_node="big",env="test"} 15',
      ),
    );
    assert.ok(
      text.includes(
        'redfence_topology_records_out_total{application_id="fraud",topology_node="big",env="test"} 4',
      ),
    );
    assert.ok(
      text.includes(
        'redfence_topology_records_out_total{application_id="fraud",topology_node="src",env="test"} 0',
      ),
    );
    assert.deepEqual(samples(text, 'redfence_owner_cache_reads_total'), [
      'redfence_owner_cache_reads_total{store="fraud",result="hit",env="test"} 480',
      'redfence_owner_cache_reads_total{store="fraud",result="miss",env="test"} 25',
    ]);
    assert.deepEqual(samples(text, 'redfence_topology_late_records_total'), [
      'redfence_topology_late_records_total{application_id="fraud",topology_node="counts",env="test"} 2',
    ]);
    assert.deepEqual(samples(text, 'redfence_topology_dropped_records_total'), [
      'redfence_topology_dropped_records_total{application_id="fraud",topology_node="counts",reason="null-key",env="test"} 3',
    ]);
    assert.deepEqual(samples(text, 'redfence_topology_repartition_lag_records'), [
      'redfence_topology_repartition_lag_records{application_id="fraud",topology_node="rep-source",env="test"} 12',
    ]);
    m.clearPartition('fraud-rep-repartition', 0);
    assert.deepEqual(samples(await m.metricsText(), 'redfence_topology_repartition_lag_records'), [
      'redfence_topology_repartition_lag_records{application_id="fraud",topology_node="rep-source",env="test"} 5',
    ]);
    const invalidArgument = (err: unknown) => RedfenceError.is(err, 'RF_INVALID_ARGUMENT');
    assert.throws(() => m.topologyNode('fraud', '', 1, 1), invalidArgument);
    assert.throws(() => m.topologyNode('fraud', 'big', -1, 0), invalidArgument);
    assert.throws(() => m.topologyDropped('fraud', 'counts', 'other' as 'late', 1), invalidArgument);
    assert.throws(
      () => new RedfenceMetrics({ labels: { topology_node: 'x' } }),
      (err) => RedfenceError.is(err, 'RF_INVALID_OPTIONS'),
    );
    // `node` stays free for users (a host's name, say): the topology's label is `topology_node`
    assert.doesNotThrow(() => new RedfenceMetrics({ labels: { node: 'host-1' } }));
  });

  it('adds constant labels to its own metrics only, and honours the prefix', async () => {
    const registry = new Registry();
    const m = new RedfenceMetrics({ registry, prefix: 'app_rf_', labels: { app: 'billing' } });
    m.verdict('orders', 0, 'applied');
    m.lag('orders', 0, 4);
    m.clearPartition('orders', 0);
    assert.equal(m.registry, registry);
    const text = await registry.metrics();
    assert.ok(
      text.includes('app_rf_verdicts_total{topic="orders",partition="0",verdict="applied",app="billing"} 1'),
    );
    assert.ok(text.includes('app_rf_redis_outage{app="billing"} 0'));
    assert.deepEqual(samples(text, 'app_rf_consumer_lag_records'), []);
    assert.ok(!text.includes('redfence_'));
  });

  it('keeps separate registries independent and never touches the global registry', async () => {
    const globalBefore = await globalRegistry.metrics();
    const a = new RedfenceMetrics();
    const b = new RedfenceMetrics();
    assert.notEqual(a.registry, b.registry);
    assert.notEqual(a.registry, globalRegistry);
    a.verdict('orders', 0, 'applied', 3);
    b.verdict('orders', 0, 'applied', 1);
    assert.ok((await a.metricsText()).includes('verdict="applied"} 3'));
    assert.ok((await b.metricsText()).includes('verdict="applied"} 1'));
    assert.equal(await globalRegistry.metrics(), globalBefore);
    assert.equal(globalRegistry.getSingleMetric('redfence_verdicts_total'), undefined);
  });

  it('fails clearly when constructed twice on one registry with one prefix, registering nothing', async () => {
    const registry = new Registry();
    const first = new RedfenceMetrics({ registry });
    const before = registry.getMetricsAsArray().length;
    assert.throws(
      () => new RedfenceMetrics({ registry }),
      (err) =>
        RedfenceError.is(err, 'RF_INVALID_OPTIONS') &&
        /already has a metric named redfence_/.test(err.message),
    );
    assert.equal(registry.getMetricsAsArray().length, before);
    // A distinct prefix on the same registry is fine.
    const second = new RedfenceMetrics({ registry, prefix: 'other_' });
    first.batch(1);
    second.batch(2);
    const text = await registry.metrics();
    assert.ok(text.includes('redfence_batch_records_sum 1'));
    assert.ok(text.includes('other_batch_records_sum 2'));
  });

  it('rejects bad options and arguments with RedfenceError', () => {
    const invalidOptions = (err: unknown) => RedfenceError.is(err, 'RF_INVALID_OPTIONS');
    const invalidArgument = (err: unknown) => RedfenceError.is(err, 'RF_INVALID_ARGUMENT');
    assert.throws(() => new RedfenceMetrics({ prefix: '9bad' }), invalidOptions);
    assert.throws(() => new RedfenceMetrics({ labels: { topic: 'x' } }), invalidOptions);
    assert.throws(() => new RedfenceMetrics({ labels: { __x: 'x' } }), invalidOptions);
    assert.throws(() => new RedfenceMetrics({ labels: { 'a-b': 'x' } }), invalidOptions);
    assert.throws(() => new RedfenceMetrics({ registry: {} as Registry }), invalidOptions);
    const m = new RedfenceMetrics();
    assert.throws(() => m.verdict('t', -1, 'applied'), invalidArgument);
    assert.throws(() => m.verdict('t', 0, 'applied', -1), invalidArgument);
    assert.throws(() => m.redisCommand('get', Number.NaN), invalidArgument);
    assert.throws(() => m.commit('twice' as 'exactly-once', 1), invalidArgument);
    assert.throws(() => m.rebalance('other' as 'assign'), invalidArgument);
    assert.throws(() => m.offsetGap('t', 1.5, 1), invalidArgument);
  });
});

describe('HealthState', () => {
  it('is live while progress is recent, by an injected clock', () => {
    let now = 1_000;
    const h = new HealthState({ clock: () => now });
    assert.equal(h.live(undefined, 100), true); // construction counts as a first mark
    now = 1_100;
    assert.equal(h.live(undefined, 100), true);
    now = 1_101;
    assert.equal(h.live(undefined, 100), false);
    h.markProgress();
    assert.equal(h.live(undefined, 100), true);
    assert.equal(h.live(1_101 + 30_001), false); // default maxStallMs 30000
    assert.equal(h.live(0, 100), true); // clock went backwards
    assert.throws(
      () => h.live(now, 0),
      (err) => RedfenceError.is(err, 'RF_INVALID_ARGUMENT'),
    );
  });

  it('is ready only when all four parts are ok, and snapshots each part', () => {
    const h = new HealthState({ clock: () => 5 });
    assert.deepEqual(h.snapshot(), {
      ready: false,
      parts: { group: false, scripts: false, redis: false, kafka: false },
      lastProgressAt: 5,
    });
    h.setReady('group', true);
    h.setReady('scripts', true);
    h.setReady('redis', true);
    assert.equal(h.ready(), false);
    h.setReady('kafka', true);
    assert.equal(h.ready(), true);
    const snap = h.snapshot();
    assert.deepEqual(snap.parts, { group: true, scripts: true, redis: true, kafka: true });
    snap.parts.redis = false; // a copy
    assert.equal(h.ready(), true);
    h.setReady('redis', false);
    assert.equal(h.ready(), false);
    assert.throws(
      () => h.setReady('disk' as 'redis', true),
      (err) => RedfenceError.is(err, 'RF_INVALID_ARGUMENT'),
    );
  });
});
