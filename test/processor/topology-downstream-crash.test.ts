/**
 * Crash points of the dead letters made downstream of an aggregation (fixtures/downstream-throws.ts: a
 * count whose updates go through a mapValues that throws on every even count of an `x` key), exactly-once,
 * on the real broker and Redis. Such a record's count is applied in Redis and its throw is a dead letter
 * marked `redfence-state-applied`; after a crash the record is replayed (REEMIT): its count must not move
 * again, and its dead letter must reach the dead-letter topic once, like its outputs.
 *
 * For after-redis-write and in-transaction: instance A (`redfence run` of the fixture with
 * REDFENCE_CRASH_AT=<point>, REDFENCE_CRASH_AFTER=3, one Kafka step per batch of at most 20 records)
 * SIGKILLs itself the 3rd time it reaches the point; every 20 consecutive offsets of each partition hold a
 * throw (asserted on the model), so the batch A applied and did not commit held one. Instance B takes over
 * once A's session expires and finishes. Then: B re-emitted (REEMIT > 0) and skipped nothing; both output
 * topics (read_committed) equal the reference model per key, in order; the dead-letter topic holds exactly
 * the model's failed records, each once, each marked state-applied, and more than A committed past.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { STATE_APPLIED } from '../../src/dead-letter/headers.js';
import { readDeadLetterHeaders } from '../../src/dead-letter/read-headers.js';
import { partitionFor } from '../../src/partitioner/index.js';
import type { CrashPoint } from '../../src/processor/crash-points.js';
import { type ModelInput, runModel } from '../../src/topology/model.js';
import { freePort, ProcessorChild, takesOverToTheEnd } from '../helpers/child.js';
import { KAFKA_BROKERS, REDIS_URL, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, endOffsets, produce, readToEnd } from '../helpers/kafka.js';
import { START_MS, seeded } from '../topology/scenarios.js';
import { downstreamThrows } from './fixtures/downstream-throws.js';
import { modelRows, perKey, topicRows } from './topology-helpers.js';

const POINTS: CrashPoint[] = ['after-redis-write', 'in-transaction'];
const PARTITIONS = 3;
const RECORDS = 360;
const BATCH = 20;
const CRASH_AFTER = 3;
const FIXTURE = 'test/processor/fixtures/downstream-throws.ts';
const KEYS = ['a', 'b', 'c', 'x1', 'x2', 'x3', 'x4', 'x5', 'x6', 'x7'];

/** The input: mostly `x` keys, each on the partition its key hashes to (offsets 0.. per partition). */
function input(topic: string): ModelInput[] {
  const rnd = seeded(91);
  const next = new Map<number, number>();
  const out: ModelInput[] = [];
  for (let i = 0; i < RECORDS; i++) {
    const key = KEYS[Math.floor(rnd() * KEYS.length)] as string;
    const partition = partitionFor(key, PARTITIONS);
    const offset = next.get(partition) ?? 0;
    next.set(partition, offset + 1);
    const value = Buffer.from(JSON.stringify({ amount: i }));
    out.push({ topic, partition, offset, key: Buffer.from(key), value, timestamp: START_MS + i * 1000 });
  }
  return out;
}

async function start(ns: string, instance: string, crash: Record<string, string>): Promise<ProcessorChild> {
  const port = await freePort();
  const args = [
    ...['--import', 'tsx', 'src/cli/bin.ts', 'run', FIXTURE],
    ...['--brokers', KAFKA_BROKERS, '--redis', REDIS_URL, '--mode', 'exactly-once'],
    ...['--instance', instance, '--metrics-port', String(port), '--session-timeout', '6000'],
    ...['--log', 'info'],
  ];
  return new ProcessorChild(instance, port, args, {
    ...process.env,
    DOWNSTREAM_NS: ns,
    REDFENCE_CRASH_AT: '',
    REDFENCE_CRASH_AFTER: '',
    REDFENCE_GROUP_COMMIT_RECORDS: '0',
    REDFENCE_MAX_BATCH_SIZE: String(BATCH),
    ...crash,
  });
}

describe('downstream dead letters across crash points (exactly-once)', {
  timeout: 240_000,
  concurrency: 2,
}, () => {
  const redis = new Redis(REDIS_URL);
  after(() => redis.disconnect());

  for (const [i, point] of POINTS.entries())
    it(`SIGKILL ${point}: the replayed throws are dead letters once, their counts kept once; outputs equal the model`, async (t) => {
      const ns = uniqueName(`tdcrash-${i}`);
      const orders = `${ns}-orders`;
      const dlt = `${orders}.DLT`;
      const keep = { 'retention.ms': '-1' };
      t.after(
        await createTopics([
          { topic: orders, partitions: PARTITIONS, config: keep },
          { topic: `${ns}-counts`, partitions: PARTITIONS, config: keep },
          { topic: `${ns}-tens`, partitions: PARTITIONS, config: keep },
          { topic: dlt, partitions: 1, config: keep },
        ]),
      );
      const children: ProcessorChild[] = [];
      t.after(async () => {
        await Promise.all(children.map((c) => c.kill()));
        const keys = await redis.keys(`rf:{${ns}:*`);
        if (keys.length > 0) await redis.del(...keys);
      });
      const records = input(orders);
      const model = runModel(downstreamThrows(ns), records, { partitions: { [orders]: PARTITIONS } });
      const failed = model.failed.map((d) => `${d.source.partition}/${d.source.offset}`);
      assert.ok(
        model.failed.every((d) => d.stateApplied === true),
        'the model: every throw is downstream, state applied',
      );
      // every BATCH consecutive offsets of each partition hold a throw: so does the batch A crashes in
      for (let p = 0; p < PARTITIONS; p++) {
        const offsets = [
          -1,
          ...model.failed.filter((d) => d.source.partition === p).map((d) => d.source.offset),
        ];
        const end = records.filter((r) => r.partition === p).length;
        offsets.push(end);
        for (let j = 1; j < offsets.length; j++)
          assert.ok(
            (offsets[j] as number) - (offsets[j - 1] as number) <= BATCH,
            `partition ${p}: a throw in every ${BATCH} offsets (${offsets.join(',')})`,
          );
      }
      await produce(
        orders,
        records.map((r) => ({
          key: r.key?.toString() ?? null,
          value: r.value,
          partition: r.partition,
          timestamp: String(r.timestamp),
        })),
      );
      const ends = await endOffsets(orders);

      const a = await start(ns, 'A', { REDFENCE_CRASH_AT: point, REDFENCE_CRASH_AFTER: String(CRASH_AFTER) });
      children.push(a);
      assert.deepEqual(
        await a.waitExit(60_000),
        { code: null, signal: 'SIGKILL' },
        `A died by SIGKILL ${a.tail()}`,
      );
      const byA = await committedOffsets(ns, orders).catch(() => new Map<number, number>());
      const left = [...ends].filter(([p, end]) => (byA.get(p) ?? 0) < end);
      assert.ok(left.length > 0, 'A died with records left to process');

      const b = await start(ns, 'B', {});
      children.push(b);
      const v = await takesOverToTheEnd(b, ns, orders, ends);
      assert.ok(
        (v.get('REEMIT') ?? 0) > 0,
        `B re-emitted A's applied, uncommitted batch (${v.get('REEMIT')})`,
      );
      assert.equal(v.get('SKIP') ?? 0, 0, 'B consumed nothing below the committed offsets');

      // the counts: kept once (a count applied twice would shift every later count of its key)
      const rows = await topicRows([`${ns}-counts`, `${ns}-tens`]);
      assert.deepEqual(perKey(rows), perKey(modelRows(model)), 'counts and tens equal the model per key');
      // the dead letters: the model's failed records, each once, marked state-applied
      const dead = await readToEnd(dlt);
      const got = dead.map((d) => {
        const h = readDeadLetterHeaders(d.headers);
        assert.equal(h.reason, 'processing-error');
        assert.equal(String(d.headers[STATE_APPLIED]), 'true');
        return `${h.originalPartition}/${h.originalOffset}`;
      });
      assert.deepEqual([...got].sort(), [...failed].sort(), 'one dead letter per throw');
      const afterA = model.failed.filter((d) => d.source.offset >= (byA.get(d.source.partition) ?? 0));
      assert.ok(afterA.length > 0, 'B made dead letters of records A had not committed');
      console.log(
        `[${point}] A committed ${[...byA.values()].join('/')}; B: REEMIT ${v.get('REEMIT')}; ${dead.length} dead letters, ${afterA.length} past A's commits`,
      );
    });
});
