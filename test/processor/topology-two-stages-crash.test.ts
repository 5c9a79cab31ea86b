/**
 * Crash points of a topology with aggregations in two sub-topologies (fixtures/two-stages.ts: a
 * windowed count, its updates re-keyed through a repartition topic into an aggregate, each stage in its
 * own fence space), exactly-once, on the real broker and Redis. For each point (after-redis-write,
 * in-transaction, after-commit): instance A (`redfence run` of the fixture with REDFENCE_CRASH_AT=<point>,
 * REDFENCE_CRASH_AFTER=50, one Kafka step per batch of at most 25 records, 900 orders) SIGKILLs itself the
 * 50th time it reaches the point, in the second stage by then, with commits of both topics behind it; instance B
 * takes over once A's session expires and finishes. Then both output topics (read_committed) equal the
 * reference model per key, in order, the repartition topic holds each update of the count once, and the
 * group committed the input and the repartition topic to their ends. The three points run at once.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import type { CrashPoint } from '../../src/processor/crash-points.js';
import { freePort, ProcessorChild } from '../helpers/child.js';
import { KAFKA_BROKERS, REDIS_URL, uniqueName } from '../helpers/env.js';
import { committedOffsets, endOffsets, kafka, pollUntil, readToEnd } from '../helpers/kafka.js';
import { assertOutputsEqualModel, prepare, TWO_STAGES } from './topology-helpers.js';

const POINTS: CrashPoint[] = ['after-redis-write', 'in-transaction', 'after-commit'];
/**
 * About 36 batches of the input and 30 of the repartition topic (the input's first, mostly): the 50th
 * crossing lands in the second stage with A's commits of both topics behind it and work left.
 */
const CRASH_AFTER = 50;
const CASE = { ...TWO_STAGES, input: { ...TWO_STAGES.input, records: 900 } };
const BATCH = 25;
const FIXTURE = 'test/processor/fixtures/two-stages.ts';

async function start(ns: string, instance: string, crash: Record<string, string>): Promise<ProcessorChild> {
  const port = await freePort();
  const args = [
    ...['--import', 'tsx', 'src/cli/bin.ts', 'run', FIXTURE, '--create-topics'],
    ...['--brokers', KAFKA_BROKERS, '--redis', REDIS_URL, '--mode', 'exactly-once'],
    ...['--instance', instance, '--metrics-port', String(port), '--session-timeout', '6000'],
    ...['--log', 'info'],
  ];
  return new ProcessorChild(instance, port, args, {
    ...process.env,
    TWO_STAGES_NS: ns,
    REDFENCE_CRASH_AT: '',
    REDFENCE_CRASH_AFTER: '',
    REDFENCE_GROUP_COMMIT_RECORDS: '0',
    REDFENCE_MAX_BATCH_SIZE: String(BATCH),
    ...crash,
  });
}

/** Every partition of the input committed by `group` at its end offset (written without transactions). */
async function inputCommitted(group: string, topic: string): Promise<boolean> {
  const ends = await endOffsets(topic);
  const at = await committedOffsets(group, topic).catch(() => new Map<number, number>());
  return [...ends].every(([p, end]) => end === 0 || (at.get(p) ?? -1) >= end);
}

/**
 * Every partition of the repartition topic committed past its last record (read_committed: its end
 * offset also counts the last transaction's marker, which is never a record to commit past).
 */
async function repartitionCommitted(group: string, topic: string): Promise<boolean> {
  const last = new Map<number, number>();
  for (const r of await readToEnd(topic))
    last.set(r.partition, Math.max(last.get(r.partition) ?? -1, Number(r.offset)));
  const at = await committedOffsets(group, topic).catch(() => new Map<number, number>());
  return [...last].every(([p, offset]) => (at.get(p) ?? -1) >= offset + 1);
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

describe('two-stage topology crash points (exactly-once)', { timeout: 300_000, concurrency: 3 }, () => {
  const redis = new Redis(REDIS_URL);
  after(() => redis.disconnect());

  for (const [i, point] of POINTS.entries())
    it(`SIGKILL ${point} (${CRASH_AFTER}th time); a second instance finishes: both stages equal the model`, async (t) => {
      const ns = uniqueName(`t2crash-${i}`);
      const input = `${ns}-orders`;
      const repartition = `${ns}-by-partition-repartition`;
      const { model, records, produce, cleanup } = await prepare(CASE, ns, 70 + i);
      const children: ProcessorChild[] = [];
      t.after(async () => {
        await Promise.all(children.map((c) => c.kill()));
        for (const pattern of [`rf:{${ns}:*`, `rf:{${ns}@*`]) {
          const keys = await redis.keys(pattern);
          if (keys.length > 0) await redis.del(...keys);
        }
        await deleteTopic(repartition);
        await cleanup();
      });
      await produce(0, records);
      const updates = model.outputs.filter((o) => o.topic === `${ns}-per-customer`).length;
      assert.ok(updates > 6 * BATCH, `more updates than six batches (${updates})`);

      const a = await start(ns, 'A', {
        REDFENCE_CRASH_AT: point,
        REDFENCE_CRASH_AFTER: String(CRASH_AFTER),
      });
      children.push(a);
      assert.deepEqual(
        await a.waitExit(90_000),
        { code: null, signal: 'SIGKILL' },
        `A died by SIGKILL ${a.tail()}`,
      );
      assert.equal(
        (await inputCommitted(ns, input)) && (await repartitionCommitted(ns, repartition)),
        false,
        'A died with records left to process',
      );
      const second = await committedOffsets(ns, repartition).catch(() => new Map<number, number>());
      assert.ok(
        [...second.values()].some((o) => o > 0),
        'A committed batches of the second stage before dying',
      );

      const b = await start(ns, 'B', {});
      children.push(b);
      await b.log.waitAssigned(60_000);
      await pollUntil(
        'B committed the input and the repartition topic to their ends',
        async () => {
          if (!b.alive) throw new Error(`B exited ${JSON.stringify(b.exit)}`);
          return (await inputCommitted(ns, input)) && (await repartitionCommitted(ns, repartition));
        },
        120_000,
      ).catch((err: Error) => {
        throw new Error(`${err.message} ${b.tail()}`);
      });
      const v = await b.verdicts();
      b.term();
      assert.deepEqual(await b.waitExit(20_000), { code: 0, signal: null }, `B exits 0 ${b.tail()}`);

      // the crashed batch was applied in Redis and not committed: B re-emits it (after the commit, at most
      // the next batch was, whose Redis step overlaps the committed one's Kafka step)
      if (point !== 'after-commit')
        assert.ok((v.get('REEMIT') ?? 0) > 0, `B re-emitted A's applied batch (${v.get('REEMIT')})`);
      assert.equal(v.get('SKIP') ?? 0, 0, 'B consumed nothing below the committed offsets');
      // read_committed: each update of the count in the repartition topic once, both outputs the model's
      const rows = await readToEnd(repartition);
      assert.equal(rows.length, updates, 'each update of the count is in the repartition topic once');
      const read = await assertOutputsEqualModel(CASE, ns, model);
      assert.equal(read, model.outputs.length);
    });
});
