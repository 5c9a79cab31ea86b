/**
 * A topology rebuild that cannot give the state back exactly leaves the application refusing to start.
 * A hopping-window count with emit final runs exactly-once with snapshots on the real broker and the
 * shared Redis; then a marker whose stream time is not the one committed at its offset is planted in
 * the snapshot topic (what a snapshot that does not match the commits would give), and the
 * application's keys are deleted (a lost store). The rebuild restores and replays, finds the replay
 * ending at another stream time than the group committed, and fails with RF_STATE_CORRUPT without the
 * layout marker and the snapshot mark: a topology processor started on what it left refuses to start
 * (RF_STATE_LAYOUT) instead of running on state its outputs do not match.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { RedfenceError } from '../../src/index.js';
import { rebuildTopology } from '../../src/ops/rebuild-topology.js';
import { encodeMarker } from '../../src/processor/snapshot-codec.js';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import { decodeStreamTime, encodeStreamTime } from '../../src/processor/topology/stream-time.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { kafka, pollUntil, produce, waitCommitted } from '../helpers/kafka.js';
import { committedWithMetadata, HOPPING_FINAL, prepare } from '../processor/topology-helpers.js';

/** Every key of the application (its state, partition keys, layout marker, mark). */
async function deleteApplication(redis: Redis, app: string): Promise<number> {
  let n = 0;
  for (const pattern of [`rf:{${app}:*`, `rf:{${app}@*`, `rf:{${app}}:*`]) {
    let cursor = '0';
    do {
      const [next, names] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      if (names.length > 0) n += await redis.del(...names);
    } while (cursor !== '0');
  }
  return n;
}

describe('a topology rebuild that cannot be exact', { timeout: 120_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  it('fails with RF_STATE_CORRUPT and leaves the application refusing to start', async () => {
    const ns = uniqueName('rbtx');
    const input = `${ns}-orders`;
    const snapshotTopic = `${ns}-snapshot`;
    const prep = await prepare(HOPPING_FINAL, ns, 41);
    const processor = () =>
      new TopologyProcessor({
        topology: prep.built,
        redis,
        mode: 'exactly-once',
        kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 40 },
        snapshot: { intervalMs: 200 },
      });
    try {
      await prep.produce(0, 150);
      const p = processor();
      await p.start();
      try {
        await waitCommitted(p.groupId, input, 60_000);
        const at = p.snapshots()?.passes ?? 0;
        await pollUntil(
          'two passes begun after the commits',
          () => (p.snapshots()?.passes ?? 0) >= at + 2,
          30_000,
        );
      } finally {
        await p.close();
      }
      // the planted marker: partition 0 at its committed offset, its stream time an hour later
      const c = (await committedWithMetadata(ns, input)).get(0);
      assert.ok(c !== undefined && c.offset > 0, 'partition 0 committed');
      const later = Object.fromEntries(
        Object.entries(decodeStreamTime(c.metadata, 'p0')).map(([node, k]) => [
          node,
          { ...k, stream: k.stream + 3_600_000 },
        ]),
      );
      const m = encodeMarker({
        topic: input,
        partition: 0,
        offset: c.offset,
        epoch: 1,
        keys: 0,
        at: Date.now(),
        streamTime: encodeStreamTime(later),
      });
      await produce(snapshotTopic, [{ key: m.key, value: m.value }]);
      assert.ok((await deleteApplication(redis, ns)) > 0, 'the application had keys');

      await assert.rejects(
        rebuildTopology({
          topology: prep.built,
          redis,
          client: { brokers: KAFKA_BROKERS.split(','), clientId: 'tsnap-rebuild' },
          group: ns,
          snapshotTopic,
          force: false,
          epochMargin: 1000,
          timeoutMs: 30_000,
        }),
        (e: unknown) =>
          RedfenceError.is(e, 'RF_STATE_CORRUPT') && /ends at another stream time/.test((e as Error).message),
      );
      assert.equal(await redis.exists(`rf:{${ns}}:layout`), 0, 'no layout marker');
      await assert.rejects(processor().start(), (e: unknown) => RedfenceError.is(e, 'RF_STATE_LAYOUT'));
    } finally {
      await deleteApplication(redis, ns);
      await prep.cleanup();
      const admin = kafka.admin();
      await admin.connect();
      await admin.deleteTopics({ topics: [snapshotTopic] }).catch(() => undefined);
      await admin.disconnect();
    }
  });
});
