/**
 * A repartitioned topology on the real broker and Redis: groupBy (a new key per record), then a
 * windowed count in the sub-topology reading the repartition topic `<applicationId>-by-upper-repartition`
 * (created by the processor with the input's partition count). Generated input over 3 partitions (null
 * keys, out-of-order records; the grace is longer than the input's span, so no record is late and a
 * repartition partition's stream time, which interleaves records of several input partitions, decides
 * nothing). What the output topic holds (read_committed) must equal the reference model's outputs per
 * key, every input record and every repartition record committed once, each repartition record in the
 * partition murmur2 gives its key: in exactly-once and at-least-once mode, and with a close() half-way
 * and a new instance finishing (which purges the committed repartition records: the topic's log start
 * moves up to the group's committed offsets). Then `repartition({ numberOfPartitions: 2 })` of the same
 * 3-partition input: the topic created with 2 partitions, every record in it (null keys too, as Kafka
 * Streams writes them) and each keyed one in its key's murmur2 partition of 2, the outputs (a stateless
 * branch and a count per key) equal to the model's per key; and an existing topic with another count
 * refused (RF_TOPIC_PARTITIONS).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { RedfenceError } from '../../src/errors/index.js';
import { partitionFor } from '../../src/partitioner/index.js';
import type { ProcessingMode } from '../../src/processor/options.js';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import { type BuiltTopology, serdes, TimeWindows, topology } from '../../src/topology/index.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import {
  committedOffsets,
  createTopics,
  kafka,
  pollUntil,
  readToEnd,
  waitCommitted,
} from '../helpers/kafka.js';
import { assertOutputsEqualModel, type Case, PARTITIONS, prepare } from './topology-helpers.js';

const s = serdes.string();
const MIN = 60_000;
/** A purge interval no run reaches: the repartition topic keeps every record to be read. */
const HOUR = 60 * MIN;

/** Orders re-keyed by the upper-cased customer, counted per 5 minutes. */
function upperCounts(ns: string): BuiltTopology {
  const t = topology({ applicationId: ns });
  t.stream<string, { amount: number }>(`${ns}-orders`, { key: s })
    .groupBy((k) => (k === null ? null : k.toUpperCase()), { name: 'by-upper', key: s })
    .windowedBy(TimeWindows.ofSizeAndGrace(5 * MIN, 120 * MIN))
    .count({ name: 'upper-counts' })
    .toStream()
    .map((w, n) => [w.key, { start: w.start, end: w.end, n }] as const)
    .to(`${ns}-upper-counts`, { key: s });
  return t.build();
}

const REPARTITIONED: Case = {
  name: 'groupBy and a windowed count',
  build: upperCounts,
  outputs: (ns) => [`${ns}-upper-counts`],
  input: {
    keys: 8,
    records: 500,
    partitions: PARTITIONS,
    startMs: Date.UTC(2024, 0, 1),
    spanMs: 30 * MIN,
    outOfOrderFraction: 0.2,
    lateFraction: 0.05,
    nullKeyFraction: 0.03,
    disorderMs: 60_000,
    lateByMs: 8 * MIN,
  },
};

/** repartition() of the orders to 2 partitions: the amounts as they come (null keys too) and a count per customer. */
function toTwo(ns: string): BuiltTopology {
  const t = topology({ applicationId: ns });
  const r = t
    .stream<string, { amount: number }>(`${ns}-orders`, { key: s })
    .repartition({ name: 'by-customer', numberOfPartitions: 2, key: s });
  r.mapValues((o) => o.amount).to(`${ns}-amounts`, { key: s });
  r.groupByKey().count({ name: 'per-customer' }).toStream().to(`${ns}-counts`, { key: s });
  return t.build();
}

const TO_TWO: Case = {
  name: 'repartition() to 2 partitions',
  build: toTwo,
  outputs: (ns) => [`${ns}-amounts`, `${ns}-counts`],
  input: { ...REPARTITIONED.input, records: 300 },
};

/** A processor that creates the repartition topic and purges it every `repartitionPurgeIntervalMs` (default 30 s). */
function processor(
  built: BuiltTopology,
  redis: Redis,
  mode: ProcessingMode,
  repartitionPurgeIntervalMs?: number,
): TopologyProcessor {
  return new TopologyProcessor({
    topology: built,
    redis,
    mode,
    createTopics: true,
    ...(repartitionPurgeIntervalMs === undefined ? {} : { repartitionPurgeIntervalMs }),
    kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 25 },
  });
}

/** Waits until the group has committed the input to its end, then every repartition record read back. */
async function waitDone(group: string, input: string, repartition: string): Promise<void> {
  await waitCommitted(group, input, 120_000);
  // the input's commits carried (exactly-once) or followed (at-least-once) the repartition records
  const rows = await readToEnd(repartition);
  const last = new Map<number, number>();
  for (const r of rows) last.set(r.partition, Math.max(last.get(r.partition) ?? -1, Number(r.offset)));
  await pollUntil(
    `group ${group} to commit ${repartition} past its last record`,
    async () => {
      const at = await committedOffsets(group, repartition).catch(() => new Map<number, number>());
      return [...last].every(([p, offset]) => (at.get(p) ?? -1) >= offset + 1);
    },
    120_000,
  );
}

/** The earliest offset each partition of `topic` still holds. */
async function lowWatermarks(topic: string): Promise<Map<number, number>> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const rows = await admin.fetchTopicOffsets(topic);
    return new Map(rows.map((r) => [r.partition, Number(r.low)]));
  } finally {
    await admin.disconnect();
  }
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

describe('topology processor: repartition', { timeout: 600_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  for (const [mode, seed] of [
    ['exactly-once', 41],
    ['at-least-once', 42],
  ] as const) {
    it(`${mode}: the output topic equals the model's outputs per key, every record committed once`, async () => {
      const name = uniqueName('tprp');
      const repartition = `${name}-by-upper-repartition`;
      const { built, model, records, produce, cleanup } = await prepare(REPARTITIONED, name, seed);
      try {
        assert.deepEqual(built.repartitionTopics, [repartition]);
        await produce(0, records);
        const nullKeys = model.dropped.filter((d) => d.reason === 'null-key').length;
        assert.ok(model.outputs.length > 0 && nullKeys > 0, 'the input makes outputs and null keys');
        assert.equal(model.deadLetters.length, 0, 'no record is late');
        const p = processor(built, redis, mode, HOUR);
        await p.start();
        try {
          await waitDone(p.groupId, `${name}-orders`, repartition);
        } finally {
          await p.close();
        }
        const shuffled = records - nullKeys;
        assert.equal(
          p.counts().records,
          records + shuffled,
          'every input and repartition record committed once',
        );
        const rows = await readToEnd(repartition);
        assert.equal(rows.length, shuffled, 'each keyed input record is in the repartition topic once');
        for (const r of rows)
          assert.equal(r.partition, partitionFor(r.key ?? '', PARTITIONS), `${r.key} placed by murmur2`);
        const read = await assertOutputsEqualModel(REPARTITIONED, name, model);
        assert.equal(read, model.outputs.length);
      } finally {
        await deleteTopic(repartition);
        await cleanup();
      }
    });
  }

  it('without createTopics a missing repartition topic is RF_TOPIC_MISSING naming it and the fix', async () => {
    const name = uniqueName('tprm');
    const repartition = `${name}-by-upper-repartition`;
    const { built, cleanup } = await prepare(REPARTITIONED, name, 44);
    try {
      const p = new TopologyProcessor({
        topology: built,
        redis,
        kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000 },
      });
      await assert.rejects(
        p.start(),
        (err: unknown) =>
          RedfenceError.is(err, 'RF_TOPIC_MISSING') &&
          err.message.includes(repartition) &&
          err.message.includes(`--partitions ${PARTITIONS}`) &&
          err.message.includes('createTopics: true'),
      );
      await p.close();
    } finally {
      await cleanup();
    }
  });

  it('repartition({ numberOfPartitions: 2 }) of 3 partitions: a topic of 2, null keys passed, outputs equal the model per key', async () => {
    const name = uniqueName('tpr2');
    const repartition = `${name}-by-customer-repartition`;
    const { built, model, records, produce, cleanup } = await prepare(TO_TWO, name, 45);
    try {
      assert.deepEqual(built.repartitionTopics, [repartition]);
      await produce(0, records);
      const nullKeys = model.dropped.filter((d) => d.reason === 'null-key').length;
      assert.ok(nullKeys > 0, 'the input has null keys (the count drops them after the repartition)');
      assert.ok(
        model.outputs.some((o) => o.topic === `${name}-amounts` && o.key === null),
        'a null key passes the repartition',
      );
      const p = processor(built, redis, 'exactly-once', HOUR);
      await p.start();
      try {
        await waitDone(p.groupId, `${name}-orders`, repartition);
      } finally {
        await p.close();
      }
      assert.equal(p.counts().records, 2 * records, 'every input and repartition record committed once');
      assert.deepEqual(
        [...(await lowWatermarks(repartition)).keys()].sort(),
        [0, 1],
        'created with 2 partitions',
      );
      const rows = await readToEnd(repartition);
      assert.equal(
        rows.length,
        records,
        'every input record is in the repartition topic once, null keys too',
      );
      assert.equal(rows.filter((r) => r.key === null).length, nullKeys);
      for (const r of rows)
        if (r.key !== null)
          assert.equal(r.partition, partitionFor(r.key, 2), `${r.key} placed by murmur2 of 2`);
      const read = await assertOutputsEqualModel(TO_TWO, name, model);
      assert.equal(read, model.outputs.length);
    } finally {
      await deleteTopic(repartition);
      await cleanup();
    }
  });

  it('an existing repartition() topic with another count than numberOfPartitions is RF_TOPIC_PARTITIONS', async () => {
    const name = uniqueName('tprn');
    const repartition = `${name}-by-customer-repartition`;
    const { built, cleanup } = await prepare(TO_TWO, name, 46);
    const dropTopic = await createTopics([{ topic: repartition, partitions: 3 }]);
    try {
      const p = processor(built, redis, 'exactly-once');
      await assert.rejects(
        p.start(),
        (err: unknown) =>
          RedfenceError.is(err, 'RF_TOPIC_PARTITIONS') &&
          err.message.includes(`${repartition} has 3 partitions, but repartition() asks for 2`) &&
          err.details?.topic === repartition,
      );
      await p.close();
    } finally {
      await dropTopic();
      await cleanup();
    }
  });

  it('a close() half-way: a new instance finishes from the committed offsets of both topics', async () => {
    const name = uniqueName('tprc');
    const repartition = `${name}-by-upper-repartition`;
    const { built, model, records, produce, cleanup } = await prepare(REPARTITIONED, name, 43);
    try {
      const half = Math.floor(records / 2);
      await produce(0, half);
      const first = processor(built, redis, 'exactly-once', HOUR);
      await first.start();
      try {
        await waitDone(first.groupId, `${name}-orders`, repartition);
      } finally {
        await first.close();
      }
      await produce(half, records);
      const done = first.counts().records;
      assert.ok(done > 0, 'the first instance committed records');
      // the second instance purges after every commit: the repartition topic keeps nothing committed
      const second = processor(built, redis, 'exactly-once', 0);
      await second.start();
      try {
        await waitDone(second.groupId, `${name}-orders`, repartition);
        const committed = await committedOffsets(second.groupId, repartition);
        await pollUntil(
          'the committed repartition records to be purged',
          async () => {
            const low = await lowWatermarks(repartition);
            return [...committed].every(([partition, at]) => low.get(partition) === at);
          },
          60_000,
        );
        assert.ok(second.counts().purged > 0, 'the second instance purged');
        assert.equal(first.counts().purged, 0, 'the first instance waited its interval');
      } finally {
        await second.close();
      }
      const nullKeys = model.dropped.filter((d) => d.reason === 'null-key').length;
      assert.equal(done + second.counts().records, 2 * records - nullKeys, 'every record committed once');
      await assertOutputsEqualModel(REPARTITIONED, name, model);
    } finally {
      await deleteTopic(repartition);
      await cleanup();
    }
  });
});
