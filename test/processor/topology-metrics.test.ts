/**
 * The topology processor's per-node metrics (docs/streams.md, "Metrics") on the real broker and Redis,
 * read from the registry's text exposition. A filter, then a tumbling-window count with grace, on
 * generated input over 3 partitions (out-of-order and late records, null keys): each node's records in
 * and out, the aggregation's late records and null-key drops must equal what the input itself gives,
 * computed here from the input by the filter's predicate and Kafka Streams' lateness rule (a window is
 * closed once its end is at or below the partition's stream time minus the grace), and agree with the
 * reference model. A groupBy through a repartition topic: every node's in and out equal the input's
 * count, and the repartition lag is reported under the node reading the repartition topic (at-least-once:
 * 0 once the group has committed every repartition record).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { RedfenceMetrics } from '../../src/metrics/index.js';
import type { ProcessingMode } from '../../src/processor/options.js';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import { type BuiltTopology, serdes, TimeWindows, topology } from '../../src/topology/index.js';
import type { ModelInput } from '../../src/topology/model.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { committedOffsets, kafka, pollUntil, readToEnd, waitCommitted } from '../helpers/kafka.js';
import { START_MS } from '../topology/scenarios.js';
import { assertOutputsEqualModel, type Case, PARTITIONS, prepare } from './topology-helpers.js';

const s = serdes.string();
const SEC = 1000;
const MIN = 60 * SEC;
const SIZE = 5 * MIN;
const GRACE = MIN;
const MIN_AMOUNT = 30;

/** Orders above MIN_AMOUNT counted per 5 minutes (1 minute of grace), the counts written out. */
function windowedCounts(ns: string): BuiltTopology {
  const t = topology({ applicationId: ns });
  t.stream<string, { amount: number }>(`${ns}-orders`, { key: s, name: 'orders' })
    .filter((_k, o) => o.amount > MIN_AMOUNT, { name: 'big' })
    .groupByKey()
    .windowedBy(TimeWindows.ofSizeAndGrace(SIZE, GRACE))
    .count({ name: 'big-counts' })
    .toStream({ name: 'updates' })
    .map((w, n) => [w.key, { start: w.start, n }] as const, { name: 'shape' })
    .to(`${ns}-out`, { key: s, name: 'out' });
  return t.build();
}

/** Orders re-keyed by their amount's bucket (a repartition), counted per bucket. */
function bucketCounts(ns: string): BuiltTopology {
  const t = topology({ applicationId: ns });
  t.stream<string, { amount: number }>(`${ns}-orders`, { key: s })
    .groupBy((_k, o) => `b${o.amount % 3}`, { name: 'by-bucket', key: s })
    .count({ name: 'bucket-counts' })
    .toStream()
    .to(`${ns}-out`, { key: s });
  return t.build();
}

const input = {
  keys: 6,
  records: 400,
  partitions: PARTITIONS,
  startMs: START_MS,
  spanMs: 30 * MIN,
  outOfOrderFraction: 0.15,
  lateFraction: 0.08,
  nullKeyFraction: 0.05,
  disorderMs: 30 * SEC,
  lateByMs: 8 * MIN,
};

const WINDOWED: Case = {
  name: 'a filter and a windowed count with grace',
  build: windowedCounts,
  outputs: (ns) => [`${ns}-out`],
  input,
};

const REPARTITIONED: Case = {
  name: 'a groupBy and a count',
  build: bucketCounts,
  outputs: (ns) => [`${ns}-out`],
  input: { ...input, records: 150, lateFraction: 0 },
};

/** The value of one sample line (exact labels, in the order the metrics write them), or undefined. */
function sample(text: string, name: string, labels: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** Each node's `[in, out]` as the registry has them. */
function flows(text: string, app: string, nodes: readonly string[]): Record<string, [number?, number?]> {
  const at = (node: string) => `application_id="${app}",topology_node="${node}"`;
  return Object.fromEntries(
    nodes.map((n) => [
      n,
      [
        sample(text, 'redfence_topology_records_in_total', at(n)),
        sample(text, 'redfence_topology_records_out_total', at(n)),
      ],
    ]),
  );
}

/**
 * What the windowed topology does with `inputs`, from the input alone: records past the filter, null
 * keys among them (dropped by the count), and late ones (their window closed: end <= the partition's
 * stream time - grace; null keys do not move stream time, as in Kafka Streams).
 */
function expected(inputs: readonly ModelInput[]): {
  all: number;
  big: number;
  nullKeys: number;
  late: number;
} {
  const streamTime = new Map<number, number>();
  let big = 0;
  let nullKeys = 0;
  let late = 0;
  for (const r of inputs) {
    const { amount } = JSON.parse(String(r.value)) as { amount: number };
    if (!(amount > MIN_AMOUNT)) continue;
    big++;
    if (r.key === null) {
      nullKeys++;
      continue;
    }
    const st = Math.max(streamTime.get(r.partition) ?? -1, r.timestamp);
    streamTime.set(r.partition, st);
    const start = Math.floor(r.timestamp / SIZE) * SIZE;
    if (start + SIZE <= st - GRACE) late++;
  }
  return { all: inputs.length, big, nullKeys, late };
}

function processor(
  built: BuiltTopology,
  redis: Redis,
  metrics: RedfenceMetrics,
  mode: ProcessingMode,
): TopologyProcessor {
  return new TopologyProcessor({
    topology: built,
    redis,
    metrics,
    mode,
    createTopics: true,
    kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 40 },
  });
}

async function deleteTopic(topic: string): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
  } finally {
    await admin.disconnect();
  }
}

describe('topology processor: per-node metrics', { timeout: 600_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  it('records in and out per node, late records and drops equal what the input gives', async () => {
    const name = uniqueName('tpm');
    const { built, model, records, inputs, produce, cleanup } = await prepare(WINDOWED, name, 61);
    try {
      const want = expected(inputs);
      assert.ok(
        want.late > 0 && want.nullKeys > 0 && want.big < want.all,
        'the input has late and null keys',
      );
      const updates = want.big - want.nullKeys - want.late;
      // the reference model agrees with the count from the input
      assert.equal(model.deadLetters.length, want.late, 'late records: the model and the input agree');
      assert.equal(model.outputs.length, updates, 'one update per counted record: the model agrees');
      assert.equal(model.dropped.filter((d) => d.reason === 'null-key').length, want.nullKeys);

      await produce(0, records);
      const metrics = new RedfenceMetrics({ registry: new Registry() });
      const p = processor(built, redis, metrics, 'exactly-once');
      const agg = built.nodes.find((n) => n.kind === 'aggregate')?.name as string;
      await p.start();
      try {
        await waitCommitted(p.groupId, `${name}-orders`, 120_000);
      } finally {
        await p.close(); // its drain: every committed batch's counts are in
      }
      assert.equal(p.counts().records, records, 'every input record committed once');
      await assertOutputsEqualModel(WINDOWED, name, model);

      const text = await metrics.metricsText();
      assert.deepEqual(flows(text, name, ['orders', 'big', agg, 'updates', 'shape', 'out']), {
        orders: [want.all, want.all],
        big: [want.all, want.big],
        [agg]: [want.big, updates],
        updates: [updates, updates],
        shape: [updates, updates],
        out: [updates, updates],
      });
      const at = `application_id="${name}",topology_node="${agg}"`;
      assert.equal(sample(text, 'redfence_topology_late_records_total', at), want.late, 'late records');
      assert.equal(
        sample(text, 'redfence_topology_dropped_records_total', `${at},reason="null-key"`),
        want.nullKeys,
        'null keys dropped by the count',
      );
      assert.equal(sample(text, 'redfence_dlq_records_total', 'reason="late"'), want.late);
      assert.ok(
        !text.includes('redfence_topology_repartition_lag_records{'),
        'no repartition topic: no repartition lag',
      );
    } finally {
      await cleanup();
    }
  });

  it('through a repartition, at-least-once: every node counts each record once; its lag is under the reading node', async () => {
    const name = uniqueName('tpmr');
    const repartition = `${name}-by-bucket-repartition`;
    const { built, model, records, produce, cleanup } = await prepare(REPARTITIONED, name, 62);
    try {
      assert.deepEqual(built.repartitionTopics, [repartition]);
      assert.equal(model.outputs.length, records, 'one count update per record');
      await produce(0, records);
      const metrics = new RedfenceMetrics({ registry: new Registry() });
      // at-least-once: no transaction markers behind the last repartition record, so an idle
      // partition's lag reads 0 (exactly-once: the last commit marker's offset reads 1)
      const p = processor(built, redis, metrics, 'at-least-once');
      const reader = built.nodes.find((n) => n.kind === 'source' && n.internal)?.name as string;
      await p.start();
      try {
        await waitCommitted(p.groupId, `${name}-orders`, 120_000);
        const rows = await readToEnd(repartition);
        assert.equal(rows.length, records, 'every record went through the repartition topic');
        const last = new Map<number, number>();
        for (const r of rows) last.set(r.partition, Math.max(last.get(r.partition) ?? -1, Number(r.offset)));
        await pollUntil(
          `group ${p.groupId} to commit ${repartition} past its last record`,
          async () => {
            const at = await committedOffsets(p.groupId, repartition).catch(() => new Map<number, number>());
            return [...last].every(([q, offset]) => (at.get(q) ?? -1) >= offset + 1);
          },
          120_000,
        );
        // the lag is read from each repartition partition's last commit: 0 once all are committed
        await pollUntil(
          'the repartition lag of the reading node is 0',
          async () =>
            sample(
              await metrics.metricsText(),
              'redfence_topology_repartition_lag_records',
              `application_id="${name}",topology_node="${reader}"`,
            ) === 0,
          60_000,
        );
      } finally {
        await p.close();
      }
      const text = await metrics.metricsText();
      const nodes = built.nodes.map((n) => n.name);
      assert.equal(nodes.length, 7, 'source, selectKey, repartition sink and source, count, toStream, sink');
      assert.deepEqual(
        flows(text, name, nodes),
        Object.fromEntries(nodes.map((n) => [n, [records, records]])),
        'each node: every record in and out once',
      );
    } finally {
      await cleanup();
      await deleteTopic(repartition);
    }
  });
});
