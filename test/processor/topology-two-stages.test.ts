/**
 * Aggregations in two sub-topologies on the real broker and Redis, exactly-once: a 5-minute count per
 * customer (late records dead-lettered), its updates re-keyed by the customer's input partition
 * (`k<p>`: keys the first aggregation has too, so each key is in both fence spaces) through
 * `<applicationId>-by-partition-repartition`, and an aggregate of them per new key (their number and
 * sum). Each new key gets the updates of one input partition, in that partition's order, whatever the
 * interleaving of the tasks: so its outputs are the model's, record for record. What the output topics
 * hold (read_committed) must equal the model's per key, every input and repartition record committed
 * once, each repartition record in its key's murmur2 partition; the second store read back by name with
 * TopologyState, stamped with the repartition topic's partition and offset of its key's last record;
 * the aggregate's keys folded from owner-local state (the default) after their first batch.
 * Then the same with a close() half-way and a new instance finishing from the committed offsets (and
 * stream times) of both topics.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { RedfenceMetrics } from '../../src/metrics/index.js';
import { partitionFor } from '../../src/partitioner/index.js';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import type { BuiltTopology } from '../../src/topology/index.js';
import { TopologyState } from '../../src/topology/state/state.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import {
  committedOffsets,
  kafka,
  pollUntil,
  type ReadRecord,
  readToEnd,
  waitCommitted,
} from '../helpers/kafka.js';
import type { Stats } from './fixtures/two-stages.js';
import { assertOutputsEqualModel, PARTITIONS, prepare, TWO_STAGES } from './topology-helpers.js';

const MIN = 60_000;

async function deleteTopic(topic: string): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
  } finally {
    await admin.disconnect();
  }
}

function processor(built: BuiltTopology, redis: Redis, metrics?: RedfenceMetrics): TopologyProcessor {
  return new TopologyProcessor({
    topology: built,
    redis,
    ...(metrics === undefined ? {} : { metrics }),
    mode: 'exactly-once',
    createTopics: true,
    repartitionPurgeIntervalMs: 60 * MIN,
    kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 25 },
  });
}

/**
 * Starts `p`, waits until its group committed the input to its end and then every repartition record,
 * closes it; returns the repartition topic's records.
 */
async function runToEnd(p: TopologyProcessor, input: string, repartition: string): Promise<ReadRecord[]> {
  await p.start();
  try {
    await waitCommitted(p.groupId, input, 120_000);
    // the input's transactions carried the repartition records: every one read back and committed
    const written = await readToEnd(repartition);
    const last = new Map<number, number>();
    for (const r of written) last.set(r.partition, Math.max(last.get(r.partition) ?? -1, Number(r.offset)));
    await pollUntil(
      `group ${p.groupId} to commit ${repartition} past its last record`,
      async () => {
        const at = await committedOffsets(p.groupId, repartition).catch(() => new Map<number, number>());
        return [...last].every(([partition, offset]) => (at.get(partition) ?? -1) >= offset + 1);
      },
      120_000,
    );
    return written;
  } finally {
    await p.close();
  }
}

describe('topology processor: aggregations in two sub-topologies', { timeout: 600_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  it('exactly-once: both aggregations equal the model per key, every record committed once, the second store readable', async () => {
    const name = uniqueName('tp2s');
    const repartition = `${name}-by-partition-repartition`;
    const { built, model, records, produce, cleanup } = await prepare(TWO_STAGES, name, 61);
    try {
      assert.deepEqual(built.repartitionTopics, [repartition]);
      await produce(0, records);
      const updates = model.outputs.filter((o) => o.topic === `${name}-per-customer`).length;
      const stats = model.outputs.filter((o) => o.topic === `${name}-stats`);
      assert.ok(updates > 0 && stats.length === updates, 'every update of the count is aggregated again');
      assert.ok(model.deadLetters.length > 0, 'some records are late for the count');
      const metrics = new RedfenceMetrics();
      const p = processor(built, redis, metrics);
      const rows = await runToEnd(p, `${name}-orders`, repartition);
      // the aggregate's three keys were folded from owner-local state after their first batch
      const cached = /redfence_owner_cache_reads_total\{[^}]*result="hit"[^}]*\} (\d+)/.exec(
        await metrics.metricsText(),
      );
      assert.ok(Number(cached?.[1] ?? 0) > 0, 'some keys were folded from owner-local state');
      assert.equal(rows.length, updates, 'each update of the count is in the repartition topic once');
      for (const r of rows)
        assert.equal(r.partition, partitionFor(r.key ?? '', PARTITIONS), `${r.key} placed by murmur2`);
      assert.equal(
        p.counts().records,
        records + updates,
        'every input and repartition record committed once',
      );
      const read = await assertOutputsEqualModel(TWO_STAGES, name, model);
      assert.equal(read, model.outputs.length);

      // the second store by its name: each key's last aggregate, stamped with its last repartition record
      const state = new TopologyState(built, { redis });
      assert.deepEqual(
        state.stores.map((x) => [x.name, x.topic, x.space]),
        [
          ['per-customer', `${name}-orders`, null],
          ['update-stats', repartition, repartition],
        ],
      );
      const store = state.keyValueStore<string, Stats>('update-stats');
      const keys = [...new Set(stats.map((o) => o.key?.toString() ?? ''))];
      assert.ok(keys.length > 1);
      for (const key of keys) {
        const want = stats.filter((o) => o.key?.toString() === key).at(-1);
        const lastRow = rows.filter((r) => r.key === key).at(-1);
        const got = await store.get(key);
        assert.deepEqual(got.value, JSON.parse(want?.value?.toString() ?? 'null'), `update-stats ${key}`);
        assert.equal(got.timestamp, want?.timestamp);
        assert.deepEqual(
          got.stamp && { topic: got.stamp.topic, partition: got.stamp.partition, offset: got.stamp.offset },
          { topic: repartition, partition: lastRow?.partition, offset: Number(lastRow?.offset) },
          `the stamp of ${key}`,
        );
      }
    } finally {
      await deleteTopic(repartition);
      await cleanup();
    }
  });
  it('a close() half-way: a new instance finishes both aggregations from the committed offsets of both topics', async () => {
    const name = uniqueName('tp2c');
    const repartition = `${name}-by-partition-repartition`;
    const { built, model, records, produce, cleanup } = await prepare(TWO_STAGES, name, 62);
    try {
      const half = Math.floor(records / 2);
      await produce(0, half);
      const first = processor(built, redis);
      const before = (await runToEnd(first, `${name}-orders`, repartition)).length;
      assert.ok(before > 0 && first.counts().records > half, 'the first instance ran both sub-topologies');
      await produce(half, records);
      const second = processor(built, redis);
      const rows = await runToEnd(second, `${name}-orders`, repartition);
      const updates = model.outputs.filter((o) => o.topic === `${name}-per-customer`).length;
      assert.equal(rows.length, updates, 'each update of the count is in the repartition topic once');
      assert.equal(
        first.counts().records + second.counts().records,
        records + updates,
        'every input and repartition record committed once, across both instances',
      );
      // the stream time of the count came back with the committed offsets: its late records too
      await assertOutputsEqualModel(TWO_STAGES, name, model);
    } finally {
      await deleteTopic(repartition);
      await cleanup();
    }
  });
});
