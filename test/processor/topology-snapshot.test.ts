/**
 * A topology processor's snapshot passes on the real broker and Redis, exactly-once, with aggregations
 * in two sub-topologies (a windowed count, its updates re-keyed through a repartition topic into an
 * aggregate: two fence spaces) and the repartition topic purged after every commit. Once the input
 * and every repartition record are committed and two passes began after, the snapshot topic holds a
 * marker for each partition of both topics at the group's committed offset with the stream time of
 * that commit, and a key record for every fence key Redis holds in either space, equal to it: the
 * fence, the fence hash's fields, and each window key beside it with its fields. Then the store's mark
 * is deleted (Redis losing the store, seen by a running processor): the snapshots stop on their own;
 * more input goes through, and the repartition topic is purged no further than the last markers (a
 * rebuild replays it from there), while without the floor it would be purged to its committed offsets.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { KeySpace } from '../../src/keys/index.js';
import { decodeRecord, type SnapshotKey, type SnapshotMarker } from '../../src/processor/snapshot-codec.js';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import { scanSlots } from '../../src/processor/topology/snapshot-read.js';
import { decodeStreamTime } from '../../src/processor/topology/stream-time.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { kafka, pollUntil, readToEnd, waitCommitted } from '../helpers/kafka.js';
import {
  assertOutputsEqualModel,
  committedWithMetadata,
  PARTITIONS,
  prepare,
  TWO_STAGES,
  waitReadPast,
} from './topology-helpers.js';

async function lowWatermarks(topic: string): Promise<Map<number, number>> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    return new Map((await admin.fetchTopicOffsets(topic)).map((o) => [o.partition, Number(o.low)]));
  } finally {
    await admin.disconnect();
  }
}

describe('topology snapshot passes', { timeout: 240_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  it('captures both fence spaces, marks every partition at its commit, stops on a lost mark, floors the purge', async () => {
    const ns = uniqueName('tsnap');
    const input = `${ns}-orders`;
    const repartition = `${ns}-by-partition-repartition`;
    const snapshotTopic = `${ns}-snapshot`;
    const { built, model, records, produce, cleanup } = await prepare(TWO_STAGES, ns, 17);
    const p = new TopologyProcessor({
      topology: built,
      redis,
      mode: 'exactly-once',
      createTopics: true,
      repartitionPurgeIntervalMs: 0,
      snapshot: { intervalMs: 200, pageSize: 7 },
      kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 25 },
    });
    try {
      const half = Math.floor(records / 2);
      await produce(0, half);
      await p.start();
      await waitCommitted(p.groupId, input, 120_000);
      await waitReadPast(p.groupId, repartition);
      const passes = p.snapshots()?.passes ?? 0;
      await pollUntil(
        'two passes begun after the commits',
        () => (p.snapshots()?.passes ?? 0) >= passes + 2,
        30_000,
      );

      // the snapshot topic: the latest record per Kafka key
      const keys = new Map<string, SnapshotKey>();
      const markers = new Map<string, SnapshotMarker>();
      for (const r of await readToEnd(snapshotTopic)) {
        const rec = decodeRecord(
          r.key === null ? null : Buffer.from(r.key),
          r.value === null ? null : Buffer.from(r.value),
        );
        if (rec?.kind === 'key') keys.set(rec.key.redisKey, rec.key);
        if (rec?.kind === 'marker') markers.set(`${rec.marker.topic}/${rec.marker.partition}`, rec.marker);
      }
      for (const topic of [input, repartition]) {
        const commits = await committedWithMetadata(p.groupId, topic);
        for (let partition = 0; partition < PARTITIONS; partition++) {
          const m = markers.get(`${topic}/${partition}`);
          const c = commits.get(partition);
          assert.ok(m !== undefined, `a marker of ${topic}/${partition}`);
          // a partition that got no record has no commit (-1): its marker is at 0, no stream time yet
          const at = Math.max(0, c?.offset ?? -1);
          assert.equal(m.offset, at, `${topic}/${partition}: the marker at the committed offset`);
          assert.deepEqual(
            decodeStreamTime(m.streamTime ?? '', 'marker'),
            decodeStreamTime(c?.metadata ?? '', 'commit'),
            `${topic}/${partition}: the marker's stream time is the commit's`,
          );
        }
      }
      // every fence key of both spaces, equal to Redis (nothing runs now)
      let windows = 0;
      for (const space of [new KeySpace({ store: ns }), new KeySpace({ store: ns, space: repartition })]) {
        const slots = await scanSlots(redis, space, 100, () => false);
        assert.ok(slots.size > 0, `fence keys in ${space.store}${space.space ? `@${space.space}` : ''}`);
        for (const [fence, suffixes] of slots) {
          const k = keys.get(fence);
          assert.ok(k !== undefined, `a key record of ${fence}`);
          const h = await redis.hgetallBuffer(fence);
          assert.equal(String(k.offset), h.o?.toString(), `${fence}: its fence`);
          const fields = Object.entries(h).filter(
            ([f]) => !['p', 'o', 'e', 'v'].includes(f) && !f.startsWith('#'),
          );
          assert.deepEqual(new Map(k.fields), new Map(fields), `${fence}: its fields`);
          assert.deepEqual(
            k.slot?.map((s) => s.suffix).sort(),
            [...suffixes].sort(),
            `${fence}: the keys beside it`,
          );
          for (const s of k.slot ?? []) {
            windows++;
            assert.deepEqual(
              new Map(s.fields),
              new Map(Object.entries(await redis.hgetallBuffer(fence + s.suffix))),
            );
            assert.ok(s.expireAt > Date.now(), `${fence}${s.suffix}: its expiry`);
          }
        }
      }
      assert.ok(windows > 0, 'window keys captured');
      assert.equal(p.snapshots()?.stopped, undefined);

      // Redis loses the store's mark under the running processor: its snapshots stop
      await redis.del(new KeySpace({ store: ns }).snapshotMark(input));
      await pollUntil('the snapshots stopped', () => p.snapshots()?.stopped !== undefined, 30_000);
      assert.match(String(p.snapshots()?.stopped), /mark is gone/);
      const purgedBefore = p.counts().purged;
      await produce(half, records);
      await waitCommitted(p.groupId, input, 120_000);
      await waitReadPast(p.groupId, repartition);
      const commits = await committedWithMetadata(p.groupId, repartition);
      const low = await lowWatermarks(repartition);
      assert.ok(p.counts().purged > purgedBefore, 'the repartition topic was purged after the later commits');
      for (let partition = 0; partition < PARTITIONS; partition++) {
        const marker = markers.get(`${repartition}/${partition}`)?.offset ?? -1;
        const committed = commits.get(partition)?.offset ?? -1;
        if (committed < 0) continue; // no record of the re-keying lands there
        assert.ok(committed > marker, `${repartition}/${partition} went on past its marker`);
        assert.ok(
          (low.get(partition) ?? 0) <= marker,
          `${repartition}/${partition}: purged no further than its marker`,
        );
      }
      await p.close();
      assert.equal(await assertOutputsEqualModel(TWO_STAGES, ns, model), model.outputs.length);
    } finally {
      await p.destroy().catch(() => undefined);
      await cleanup();
      const admin = kafka.admin();
      await admin.connect();
      await admin.deleteTopics({ topics: [snapshotTopic, repartition] }).catch(() => undefined);
      await admin.disconnect();
    }
  });
});
