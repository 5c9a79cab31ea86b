/**
 * A topology's snapshot pass (src/processor/topology/snapshot.ts) against the real Redis, its key calls
 * made by the topology's own executor, the records it produces collected (the producer is a sink here:
 * the guarantee under test is what the pass reads from Redis, not the delivery). Writes are made while
 * the pass runs, between its SCAN and its reads (through the pacing hook the pass calls before each
 * page): a fence key written once is dirty in the first round and read whole in the second, its new
 * window included; a fence key written before every page never reads the same twice, so the partition
 * gets no new marker; without writes every key is produced and the partition marked. On a single Redis
 * and on Redis Cluster (one MULTI per fence key's slot; SCAN on every master).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Cluster, Redis } from 'ioredis';
import type { DeliveryProducer } from '../../src/kafka/producer.js';
import type { OutRecord } from '../../src/kafka/types.js';
import { decodeRecord, type SnapshotKey, type SnapshotMarker } from '../../src/processor/snapshot-codec.js';
import type { PassIO } from '../../src/processor/snapshotter.js';
import { topologyPass } from '../../src/processor/topology/snapshot.js';
import { silentLogger } from '../../src/runtime/logger.js';
import { serdes, TimeWindows, topology } from '../../src/topology/index.js';
import { TopologyExecutor } from '../../src/topology/run/executor.js';
import { cluster, standalone, uniqueName } from '../helpers/env.js';

const MIN = 60_000;
const T0 = 1_767_225_600_000;

for (const [target, connect] of [
  ['standalone', standalone],
  ['Redis Cluster', cluster],
] as const)
  describe(`topology snapshot pass: writes during the pass (${target})`, () => {
    let redis: Redis | Cluster;
    before(() => {
      redis = connect();
    });
    after(() => redis.disconnect());

    /** A one-minute tumbling count on partition 0 of its topic, with records of keys a, b, c applied. */
    async function setUp() {
      const ns = uniqueName('tsnap-pass');
      const topic = `${ns}-in`;
      const t = topology({ applicationId: ns });
      t.stream<string, number>(topic, { key: serdes.string() })
        .groupByKey()
        .windowedBy(TimeWindows.ofSizeWithNoGrace(MIN))
        .count({ name: 'c' })
        .toStream()
        .to(`${ns}-out`);
      const exec = new TopologyExecutor(t.build(), { redis });
      let next = 0;
      const write = (key: string, at: number) =>
        exec.runBatch({
          topic,
          partition: 0,
          epoch: 1,
          committedOffset: 0,
          records: [
            {
              topic,
              partition: 0,
              offset: next++,
              key: Buffer.from(key),
              value: Buffer.from('1'),
              timestamp: at,
            },
          ],
        });
      for (const [i, key] of ['a', 'b', 'c', 'a', 'b', 'c'].entries()) await write(key, T0 + i * 1000);
      const committed = next;
      const out: OutRecord[] = [];
      const marked: number[] = [];
      const pass = topologyPass({
        options: { topic: `${ns}-snapshot`, intervalMs: 1000, pageSize: 1, maxKeysPerSecond: 0 },
        redis,
        plan: () => exec.plan,
        storeFor: (tp) => exec.storeFor(tp),
        partitions: () => [
          {
            topic,
            partition: 0,
            epoch: 1,
            committed,
            delivered: committed,
            fenced: false,
            rewound: undefined,
          },
        ],
        streamTimeAt: () => '',
        marked: (_t, _p, offset) => marked.push(offset),
        log: silentLogger,
      });
      const run = (beforePage: () => Promise<void>) => {
        const io: PassIO = {
          producer: {
            produce: async (records: readonly OutRecord[]) => {
              out.push(...records);
            },
          } as unknown as DeliveryProducer,
          checkMark: async () => undefined,
          pace: beforePage,
          closed: () => false,
          produced: () => undefined,
        };
        return pass(io);
      };
      const produced = () => {
        const keys = new Map<string, SnapshotKey>();
        const markers: SnapshotMarker[] = [];
        for (const r of out) {
          const rec = decodeRecord(Buffer.from(r.key as string), r.value as Buffer);
          if (rec?.kind === 'key') keys.set(rec.key.redisKey, rec.key);
          if (rec?.kind === 'marker') markers.push(rec.marker);
        }
        return { keys, markers };
      };
      const fence = (key: string) => exec.store.keys.fence(key);
      return { run, write, produced, marked, fence, committed };
    }

    it('no write: every key produced with its windows, the partition marked at its commit', async () => {
      const s = await setUp();
      assert.deepEqual(await s.run(async () => undefined), { unmarked: 0 });
      const { keys, markers } = s.produced();
      assert.deepEqual([...keys.keys()].sort(), ['a', 'b', 'c'].map(s.fence).sort());
      for (const k of keys.values()) {
        assert.equal(k.slot?.length, 1, `${k.redisKey}: its one window`);
        assert.equal(k.slot?.[0]?.fields.find(([f]) => f === 'v')?.[1].toString(), '2');
      }
      assert.deepEqual(
        markers.map((m) => [m.partition, m.offset, m.keys]),
        [[0, s.committed, 3]],
      );
      assert.deepEqual(s.marked, [s.committed]);
    });

    it('a key written between the SCAN and its read: read again whole, its new window included', async () => {
      const s = await setUp();
      let once = false;
      const result = await s.run(async () => {
        if (once) return;
        once = true;
        await s.write('a', T0 + 2 * MIN); // a window the first SCAN could not see
      });
      assert.deepEqual(result, { unmarked: 0 });
      const a = s.produced().keys.get(s.fence('a'));
      assert.ok(a !== undefined, 'a produced');
      assert.equal(a.offset, s.committed, 'with the write made during the pass');
      assert.equal(a.slot?.length, 2, 'both of its windows');
      assert.equal(s.produced().markers.length, 1);
    });

    it('a key written before every page: never read the same twice, its partition keeps its last marker', async () => {
      const s = await setUp();
      let i = 0;
      const result = await s.run(async () => {
        await s.write('b', T0 + (3 + i++) * MIN);
      });
      assert.deepEqual(result, { unmarked: 1 });
      const { keys, markers } = s.produced();
      assert.equal(keys.has(s.fence('b')), false, 'b not produced');
      assert.ok(keys.has(s.fence('a')) && keys.has(s.fence('c')), 'the others produced');
      assert.deepEqual(markers, [], 'no marker');
      assert.deepEqual(s.marked, []);
    });
  });
