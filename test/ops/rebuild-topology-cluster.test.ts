/**
 * A topology's snapshots and rebuild on Redis Cluster (the shared test cluster: nothing is flushed, the
 * application's own keys are deleted on every master to stand for a lost store): a hopping-window count
 * with grace emitting final results runs exactly-once with snapshots over the first orders, an instance
 * without snapshots over a few more, the application's keys go, `rebuildTopology` restores them (one
 * hash slot per pipeline, the close indexes in their partitions' slots) and replays, a new instance runs
 * over the last orders: the outputs (read committed, to their end) equal the model's per key and window,
 * each final result once.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Cluster } from 'ioredis';
import { rebuildTopology } from '../../src/ops/rebuild-topology.js';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import { cluster, KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { kafka, pollUntil, waitCommitted } from '../helpers/kafka.js';
import { assertOutputsEqualModel, HOPPING_FINAL, prepare } from '../processor/topology-helpers.js';

/** Every key of the application on every master (its state, partition keys, layout marker, mark). */
async function deleteApplication(redis: Cluster, app: string): Promise<number> {
  let n = 0;
  for (const node of redis.nodes('master'))
    for (const pattern of [`rf:{${app}:*`, `rf:{${app}@*`, `rf:{${app}}:*`]) {
      let cursor = '0';
      do {
        const [next, names] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
        cursor = next;
        for (const k of names) n += await redis.del(k);
      } while (cursor !== '0');
    }
  return n;
}

describe('topology rebuild on Redis Cluster', { timeout: 180_000 }, () => {
  let redis: Cluster;
  before(() => {
    redis = cluster();
  });
  after(() => redis.disconnect());

  it('emit-final windows rebuilt across slots: each final result once', async () => {
    const ns = uniqueName('rbtc');
    const input = `${ns}-orders`;
    const prep = await prepare(HOPPING_FINAL, ns, 31);
    const run = async (snapshot: boolean, from: number, to: number) => {
      await prep.produce(from, to);
      const p = new TopologyProcessor({
        topology: prep.built,
        redis,
        mode: 'exactly-once',
        kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 40 },
        ...(snapshot ? { snapshot: { intervalMs: 200 } } : {}),
      });
      await p.start();
      try {
        await waitCommitted(p.groupId, input, 120_000);
        const at = p.snapshots()?.passes ?? 0;
        if (snapshot)
          await pollUntil(
            'two passes begun after the commits',
            () => (p.snapshots()?.passes ?? 0) >= at + 2,
            30_000,
          );
      } finally {
        await p.close();
      }
    };
    try {
      const first = Math.floor(prep.records / 2);
      await run(true, 0, first);
      await run(false, first, first + 10);
      assert.ok((await deleteApplication(redis, ns)) > 0, 'the application had keys');
      const report = await rebuildTopology({
        topology: prep.built,
        redis,
        client: { brokers: KAFKA_BROKERS.split(','), clientId: 'tsnap-rebuild' },
        group: ns,
        snapshotTopic: `${ns}-snapshot`,
        force: false,
        epochMargin: 1000,
        timeoutMs: 30_000,
      });
      assert.ok(report.keys > 0);
      assert.equal(
        report.partitions.reduce((n, p) => n + p.replayed, 0),
        10,
        'the orders after the snapshot replayed',
      );
      await run(true, first + 10, prep.records);
      assert.ok(
        prep.model.outputs.some((o) => o.topic === `${ns}-hop`),
        'final results in the model',
      );
      assert.equal(await assertOutputsEqualModel(HOPPING_FINAL, ns, prep.model), prep.model.outputs.length);
    } finally {
      await deleteApplication(redis, ns);
      await prep.cleanup();
      const admin = kafka.admin();
      await admin.connect();
      await admin.deleteTopics({ topics: [`${ns}-snapshot`] }).catch(() => undefined);
      await admin.disconnect();
    }
  });
});
