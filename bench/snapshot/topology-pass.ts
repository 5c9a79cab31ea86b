/**
 * What a topology's snapshot pass reads and how long its restore takes, on Redis alone: a windowed
 * count (5-minute tumbling windows emitting updates beside 1-minute hopping windows with grace emitting
 * final results) applied by the topology's executor to BENCH_KEYS fence keys, two records each; one pass
 * (src/processor/topology/snapshot.ts) into a sink in place of the producer (Kafka's share is the
 * processor's, bench/snapshot/run.ts); then the records restored into an emptied Redis
 * (src/ops/rebuild-topology-steps.ts). Prints the pass's time, its keys/s, this process's CPU, the
 * record sizes and the restore's time. It flushes the Redis it is given: a private one only.
 *
 *   redis-server --port 16612 --save '' --appendonly no --daemonize yes
 *   BENCH_REDIS_URL=redis://127.0.0.1:16612 node --import tsx bench/snapshot/topology-pass.ts
 */
import { Redis } from 'ioredis';
import type { DeliveryProducer } from '../../src/kafka/producer.js';
import type { OutRecord } from '../../src/kafka/types.js';
import { restoreTopologyPartition } from '../../src/ops/rebuild-topology-steps.js';
import {
  decodeRecord,
  type SnapshotCloseIndex,
  type SnapshotKey,
} from '../../src/processor/snapshot-codec.js';
import type { PassIO } from '../../src/processor/snapshotter.js';
import { topologyPass } from '../../src/processor/topology/snapshot.js';
import { silentLogger } from '../../src/runtime/logger.js';
import { serdes, TimeWindows, topology } from '../../src/topology/index.js';
import { TopologyExecutor } from '../../src/topology/run/executor.js';

const url = process.env.BENCH_REDIS_URL;
if (url === undefined) throw new Error('BENCH_REDIS_URL: a private Redis (it is flushed)');
const KEYS = Number(process.env.BENCH_KEYS ?? 10_000);
const T0 = 1_767_225_600_000;
const topic = 'bench-in';

const redis = new Redis(url, { enableAutoPipelining: true });
await redis.flushall();
const t = topology({ applicationId: 'bench' });
const g = t.stream<string, number>(topic, { key: serdes.string() }).groupByKey();
g.windowedBy(TimeWindows.ofSizeWithNoGrace(300_000)).count({ name: 'updates' }).toStream().to('bench-u');
g.windowedBy(TimeWindows.ofSizeAndGrace(60_000, 10_000).advanceBy(20_000))
  .emit('final')
  .count({ name: 'finals' })
  .toStream()
  .to('bench-f');
const exec = new TopologyExecutor(t.build(), { redis });
let offset = 0;
for (let b = 0; b < KEYS * 2; b += 500) {
  const records = [];
  for (let i = b; i < Math.min(b + 500, KEYS * 2); i++)
    records.push({
      topic,
      partition: 0,
      offset: offset++,
      key: Buffer.from(`k${i % KEYS}`),
      value: Buffer.from('1'),
      timestamp: T0 + Math.floor(i / KEYS) * 30_000 + (i % 1000),
    });
  await exec.runBatch({ topic, partition: 0, epoch: 1, committedOffset: offset - records.length, records });
}
const redisKeys = await redis.dbsize();

const out: OutRecord[] = [];
const pass = topologyPass({
  options: { topic: 'bench-snapshot', intervalMs: 1000, pageSize: 200, maxKeysPerSecond: 0 },
  redis,
  plan: () => exec.plan,
  storeFor: (tp) => exec.storeFor(tp),
  partitions: () => [
    {
      topic,
      partition: 0,
      epoch: 1,
      committed: offset,
      delivered: offset,
      fenced: false,
      rewound: undefined,
    },
  ],
  streamTimeAt: () => '',
  marked: () => undefined,
  log: silentLogger,
});
const io: PassIO = {
  producer: {
    produce: async (records: readonly OutRecord[]) => {
      out.push(...records);
    },
  } as unknown as DeliveryProducer,
  checkMark: async () => undefined,
  pace: async () => undefined,
  closed: () => false,
  produced: () => undefined,
};
const cpu0 = process.cpuUsage();
const t0 = performance.now();
const result = await pass(io);
const passMs = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);

const keys: SnapshotKey[] = [];
const close: SnapshotCloseIndex[] = [];
let bytes = 0;
for (const r of out) {
  bytes += (r.value as Buffer).length;
  const rec = decodeRecord(Buffer.from(String(r.key)), r.value as Buffer);
  if (rec?.kind === 'key') keys.push(rec.key);
  if (rec?.kind === 'close') close.push(rec.close);
}
await redis.flushall();
const r0 = performance.now();
await restoreTopologyPartition(
  redis,
  'rf:{bench:bench-in:0}:epoch',
  (c) => exec.storeFor(c.topic).keys.closeIndex(c.topic, c.partition, c.store),
  {
    topic,
    partition: 0,
    partitionCount: 1,
    marker: offset,
    keys,
    close,
    from: offset,
    to: offset,
    timeFrom: '',
    timeTo: undefined,
    epoch: 1001,
  },
);
const restoreMs = performance.now() - r0;
console.log(
  JSON.stringify({
    fenceKeys: KEYS,
    redisKeys,
    unmarked: result === false ? null : result.unmarked,
    keyRecords: keys.length,
    closeParts: close.length,
    passMs: Math.round(passMs),
    keysPerSecond: Math.round(keys.length / (passMs / 1000)),
    processCpuMs: Math.round((cpu.user + cpu.system) / 1000),
    bytesPerRecord: Math.round(bytes / out.length),
    restoreMs: Math.round(restoreMs),
    redisKeysRestored: await redis.dbsize(),
  }),
);
redis.disconnect();
