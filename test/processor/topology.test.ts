/**
 * The topology processor (src/processor/topology/) on the real broker and Redis: the fraud topology of
 * docs/streams.md, a hopping-window count with emit final and a sliding-window count and reduce, on
 * generated input over 3 partitions (out-of-order and late records, null keys), run to the input's end
 * offsets. What the output topics
 * hold (read_committed) must equal the reference model's outputs per topic and key, in order, and the
 * dead-letter topic one record per late record: in exactly-once mode each exactly once. Then the same
 * with a close() half-way and a new instance finishing from the committed offsets and the stream time in
 * their metadata, and with a second instance joining mid-run (a rebalance). An application whose
 * windows predate the layout marker is refused at start.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { RedfenceError } from '../../src/errors/index.js';
import { Fence } from '../../src/fence/index.js';
import { partitionFor } from '../../src/partitioner/index.js';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import { decodeStreamTime } from '../../src/processor/topology/stream-time.js';
import { TopologyExecutor } from '../../src/topology/run/executor.js';
import { standalone, uniqueName } from '../helpers/env.js';
import { pollUntil, produce as produceTo, waitCommitted } from '../helpers/kafka.js';
import { START_MS } from '../topology/scenarios.js';
import {
  assertOutputsEqualModel,
  type Case,
  committedWithMetadata,
  FRAUD,
  HOPPING_FINAL,
  PARTITIONS,
  prepare,
  processor,
  SLIDING,
} from './topology-helpers.js';

const ns = uniqueName;

describe('topology processor', { timeout: 600_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  const runs: [Case, 'exactly-once' | 'at-least-once', number][] = [
    [FRAUD, 'exactly-once', 11],
    [HOPPING_FINAL, 'exactly-once', 12],
    [FRAUD, 'at-least-once', 13],
    [SLIDING, 'exactly-once', 14],
  ];
  for (const [c, mode, seed] of runs) {
    it(`${c.name}, ${mode}: the output topics equal the model's outputs per key`, async () => {
      const name = ns('tp');
      const { built, model, records, produce, cleanup } = await prepare(c, name, seed);
      try {
        await produce(0, records);
        assert.ok(
          model.outputs.length > 0 && model.deadLetters.length > 0,
          'the input makes outputs and late records',
        );
        const p = processor(built, redis, mode);
        await p.start();
        try {
          await waitCommitted(p.groupId, `${name}-orders`, 120_000);
        } finally {
          await p.close();
        }
        assert.equal(p.counts().records, records, 'every input record committed once');
        const read = await assertOutputsEqualModel(c, name, model);
        console.log(
          'STATS',
          c.name,
          mode,
          records,
          model.outputs.length,
          model.deadLetters.length,
          model.dropped.length,
          p.counts(),
        );
        assert.equal(read, model.outputs.length);
        const committed = await committedWithMetadata(p.groupId, `${name}-orders`);
        for (const [partition, at] of committed) {
          const times = decodeStreamTime(at.metadata, `p${partition}`);
          assert.ok(Object.keys(times).length > 0, `partition ${partition}'s commit carries its stream time`);
        }
      } finally {
        await cleanup();
      }
    });
  }

  it('a close() half-way: a new instance finishes from the committed offsets and stream time', async () => {
    const c = HOPPING_FINAL;
    const name = ns('tpc');
    const { built, model, records, produce, cleanup } = await prepare(c, name, 21);
    try {
      // the first instance runs the first half to its end and closes; the second half comes after
      await produce(0, records / 2);
      const first = processor(built, redis, 'exactly-once', 20);
      await first.start();
      try {
        await waitCommitted(first.groupId, `${name}-orders`, 120_000);
      } finally {
        await first.close();
      }
      await produce(records / 2, records);
      const done = first.counts().records;
      const committed = await committedWithMetadata(first.groupId, `${name}-orders`);
      const sum = [...committed.values()].reduce((n, x) => n + Math.max(0, x.offset), 0);
      assert.equal(sum, done, 'what the first instance counted is what it committed');
      assert.ok(done > 0 && done < records, `the first instance stopped part way (${done} of ${records})`);
      const withTime = [...committed.values()].filter(
        (x) => x.offset > 0 && Object.keys(decodeStreamTime(x.metadata, 'p')).length > 0,
      );
      assert.ok(withTime.length > 0, 'the committed offsets carry stream time');

      const second = processor(built, redis, 'exactly-once', 20);
      await second.start();
      try {
        await waitCommitted(second.groupId, `${name}-orders`, 120_000);
      } finally {
        await second.close();
      }
      assert.equal(second.counts().records, records - done, 'the second instance resumed from the commits');
      await assertOutputsEqualModel(c, name, model);
    } finally {
      await cleanup();
    }
  });

  it('two instances sharing the partitions (a rebalance mid-run): outputs still equal the model', async () => {
    const c = FRAUD;
    const name = ns('tpr');
    const { built, model, records, produce, cleanup } = await prepare(c, name, 31);
    try {
      const a = processor(built, redis, 'exactly-once', 10);
      const b = processor(built, redis, 'exactly-once', 10);
      const third = Math.floor(records / 3);
      await produce(0, third);
      await a.start();
      try {
        // a alone runs the first third; b joins while the second third is written (the rebalance runs
        // beside a's batches), the last third is shared
        await waitCommitted(a.groupId, `${name}-orders`, 120_000);
        await Promise.all([b.start(), produce(third, 2 * third)]);
        await pollUntil('b owns partitions', () => b.assignment.length > 0, 120_000);
        await produce(2 * third, records);
        await waitCommitted(a.groupId, `${name}-orders`, 120_000);
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
      const ca = a.counts();
      const cb = b.counts();
      assert.ok(ca.records > 0 && cb.records > 0, `both committed records (${ca.records}, ${cb.records})`);
      assert.ok(ca.records < records, 'the first instance gave partitions away');
      assert.equal(ca.records + cb.records, records, 'every record committed once between them');
      await assertOutputsEqualModel(c, name, model);
    } finally {
      await cleanup();
    }
  });

  it('FENCE: a partition a newer owner wrote to is paused and never committed again', async () => {
    const c = FRAUD;
    const name = ns('tpf');
    const { built, cleanup } = await prepare(c, name, 41);
    const topic = `${name}-orders`;
    try {
      const order = (key: string) => ({
        key,
        value: JSON.stringify({ amount: 50 }),
        timestamp: String(START_MS),
      });
      const p0 = partitionFor('k-fenced', PARTITIONS);
      const other = ['k-a', 'k-b', 'k-c', 'k-d'].find((k) => partitionFor(k, PARTITIONS) !== p0) as string;
      await produceTo(topic, [order('k-fenced'), order(other)]);
      const p = processor(built, redis, 'exactly-once');
      await p.start();
      try {
        await waitCommitted(p.groupId, topic, 120_000);
        // a newer owner of partition p0: a higher epoch, and a write to k-fenced's key with it
        const epoch = await new Fence({ redis, store: built.applicationId, mode: 'strict' }).acquireEpoch(
          topic,
          p0,
        );
        const newer = new TopologyExecutor(built, { redis });
        const value = Buffer.from(JSON.stringify({ amount: 50 }));
        await newer.runBatch({
          topic,
          partition: p0,
          epoch,
          committedOffset: 1,
          records: [
            { topic, partition: p0, offset: 1, key: Buffer.from('k-fenced'), value, timestamp: START_MS },
          ],
        });
        await produceTo(topic, [order('k-fenced'), order(other)]);
        await pollUntil('the partition is fenced', () => p.counts().fencedPartitions === 1, 60_000);
        await pollUntil('the other partition is committed', async () => {
          const at = await committedWithMetadata(p.groupId, topic);
          return at.get(partitionFor(other, PARTITIONS))?.offset === 2;
        });
        assert.ok(
          !p.assignment.some((tp) => tp.partition === p0),
          'the fenced partition is not owned any more',
        );
      } finally {
        await p.close();
      }
      const at = await committedWithMetadata(p.groupId, topic);
      assert.equal(at.get(p0)?.offset, 1, 'the fenced batch was never committed');
    } finally {
      await cleanup();
    }
  });

  it('windows from before the layout marker: start() is RF_STATE_LAYOUT before any partition or topic', async () => {
    const app = ns('lay');
    const built = FRAUD.build(app);
    // an older version took partition 0 of the input: its windows kept their timestamp in a second key
    const epoch = new TopologyExecutor(built, { redis }).store.keys.epoch(`${app}-orders`, 0);
    await redis.incr(epoch);
    const p = processor(built, redis, 'at-least-once');
    await assert.rejects(p.start(), (e: unknown) => {
      assert.ok(RedfenceError.is(e, 'RF_STATE_LAYOUT'), String(e));
      assert.match((e as Error).message, new RegExp(`application ${app}: .*rebuild it from its input`));
      return true;
    });
    assert.equal(p.state, 'closed');
    assert.equal(await redis.get(epoch), '1', 'no partition epoch taken');
    assert.equal(await redis.exists(`rf:{${app}}:layout`), 0, 'no marker claimed');
    // a new application claims the marker at its start
    const fresh = ns('lay');
    const q = processor(FRAUD.build(fresh), redis, 'at-least-once');
    await assert.rejects(q.start(), { code: 'RF_TOPIC_MISSING' }); // after the layout check
    assert.deepEqual(await redis.hgetall(`rf:{${fresh}}:layout`), { l: '2' });
  });

  it('options are checked before any connection, naming the option', () => {
    const built = FRAUD.build('opts');
    const kafka = { brokers: ['127.0.0.1:1'] };
    const bad: [Record<string, unknown>, RegExp][] = [
      [{ topology: {}, redis, kafka }, /"topology"/],
      [{ topology: built, redis: {}, kafka }, /"redis"/],
      [{ topology: built, redis, kafka, mode: 'twice' }, /mode/],
      [{ topology: built, redis, kafka, deadLetterTopic: 'a b' }, /"deadLetterTopic"/],
      [{ topology: built, redis, kafka, retentionMs: -1 }, /retentionMs/],
      [{ topology: built, redis, kafka, ownerCache: {} }, /"ownerCache"/],
      [{ topology: built, redis, kafka, ownerCache: { maxBytes: 0 } }, /ownerCache\.maxBytes/],
      [{ topology: built, redis, kafka, nope: 1 }, /nope/],
    ];
    for (const [o, re] of bad)
      assert.throws(
        () => new TopologyProcessor(o as never),
        (e: unknown) => RedfenceError.is(e, 'RF_INVALID_OPTIONS') && re.test((e as Error).message),
      );
    const p = new TopologyProcessor({ topology: built, redis, kafka });
    assert.equal(p.groupId, 'opts', "the group id defaults to the topology's applicationId");
    assert.equal(p.state, 'idle');
  });
});
