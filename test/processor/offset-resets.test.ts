/**
 * Records deleted before the group processed them do not pass silently. On the real broker and Redis:
 * a group commits part of a topic, DeleteRecords moves one partition's log start past the committed
 * offset (as retention would) and another's exactly to it (as a topology's repartition purge does); a
 * processor started on the group logs the skip with its figures and counts it in
 * `redfence_input_records_skipped_total`, and only for that partition. A committed offset beyond a
 * partition's end is reported as `beyond_end`; a partition never committed is not reported whatever
 * its log start; a topology that purged its repartition topic up to its commits is not reported;
 * nothing deleted, nothing reported. A handler reports the same (the check is the
 * adapter's, which every runtime gives its report). The pure comparison and the check's bounds (a slow
 * or failing read) are tested on their own.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { RdKafka } from '@confluentinc/kafka-javascript';
import type { Redis } from 'ioredis';
import {
  createHandler,
  defineHandler,
  defineProcessor,
  Processor,
  RedfenceMetrics,
} from '../../src/index.js';
import { KafkaAdmin } from '../../src/kafka/admin.js';
import { checkAssigned, type OffsetReset, offsetResets } from '../../src/kafka/offset-resets.js';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import type { Logger } from '../../src/runtime/logger.js';
import { serdes, topology } from '../../src/topology/index.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import {
  committedOffsets,
  createTopics,
  endOffsets,
  kafka,
  pollUntil,
  produce,
  waitCommitted,
} from '../helpers/kafka.js';

const PARTITIONS = 3;

/** A logger keeping every warning with its fields. */
function capturing(): { logger: Logger; warnings: { fields: Record<string, unknown>; msg: string }[] } {
  const warnings: { fields: Record<string, unknown>; msg: string }[] = [];
  const none = () => undefined;
  return {
    warnings,
    logger: {
      debug: none,
      info: none,
      error: none,
      warn: (fields: object, msg?: string) =>
        warnings.push({ fields: fields as Record<string, unknown>, msg: msg ?? '' }),
    },
  };
}

/** Commits `offsets` for `group` as a consumer outside any subscription would, and waits to see them. */
async function commitAt(group: string, topic: string, offsets: Map<number, number>): Promise<void> {
  const c = new RdKafka.KafkaConsumer(
    { 'bootstrap.servers': KAFKA_BROKERS, 'group.id': group, 'enable.auto.commit': false, log_level: 0 },
    {},
  );
  await new Promise<void>((resolve, reject) => c.connect({}, (err) => (err ? reject(err) : resolve())));
  try {
    const tps = [...offsets].map(([partition, offset]) => ({ topic, partition, offset }));
    c.assign(tps);
    c.commitSync(tps);
  } finally {
    await new Promise<void>((resolve) => c.disconnect(() => resolve()));
  }
  await pollUntil(
    `group ${group} to hold its commits`,
    async () => {
      const held = await committedOffsets(group, topic);
      return [...offsets].every(([p, o]) => held.get(p) === o);
    },
    30_000,
  );
}

/** Low watermarks (log start offsets) of a topic. */
async function logStarts(admin: KafkaAdmin, topic: string): Promise<Map<number, number>> {
  return new Map([...(await admin.watermarks(topic))].map(([p, w]) => [p, w.low]));
}

/** The value of a counter's series with these labels (0 when it has none). */
async function counterValue(
  m: RedfenceMetrics,
  name: string,
  labels: Record<string, string>,
): Promise<number> {
  const metric = m.registry.getSingleMetric(name);
  if (metric === undefined) return 0;
  const { values } = await metric.get();
  const hit = values.find((v) => Object.entries(labels).every(([k, x]) => String(v.labels[k]) === x));
  return hit?.value ?? 0;
}

/** A topic of PARTITIONS partitions with about `n` keyed records (murmur2, so none is dead-lettered). */
async function keyedTopic(ns: string, n: number): Promise<{ input: string; cleanup: () => Promise<void> }> {
  const input = `${ns}-in`;
  const cleanup = await createTopics([
    { topic: input, partitions: PARTITIONS },
    { topic: `${ns}-out`, partitions: PARTITIONS },
    { topic: `${input}.DLT`, partitions: 1 },
  ]);
  await produce(
    input,
    Array.from({ length: n }, (_, i) => ({ key: `k-${i % 40}`, value: JSON.stringify({ n: 1 }) })),
  );
  return { input, cleanup };
}

function counting(ns: string, input: string, store: string) {
  return defineProcessor<{ n: number }, number>({
    input,
    output: `${ns}-out`,
    store,
    reduce: (s, r) => ({ state: (s ?? 0) + r.n }),
  });
}

describe('records lost to retention before they were processed', { timeout: 180_000 }, () => {
  let redis: Redis;
  let admin: KafkaAdmin;
  before(() => {
    redis = standalone();
    admin = new KafkaAdmin({ 'bootstrap.servers': KAFKA_BROKERS });
  });
  after(async () => {
    redis.disconnect();
    await admin.close();
  });

  it('are logged with their figures and counted; a log start at the committed offset is not a skip', async (t) => {
    const ns = uniqueName('skip');
    const { input, cleanup } = await keyedTopic(ns, 300);
    t.after(cleanup);
    const ends = await endOffsets(input);
    for (const p of [0, 1, 2]) assert.ok((ends.get(p) ?? 0) >= 20, `partition ${p} holds ${ends.get(p)}`);
    // the group processed half of every partition
    const group = `${ns}-group`;
    const committed = new Map([...ends].map(([p, end]) => [p, Math.floor(end / 2)]));
    await commitAt(group, input, committed);
    const c0 = committed.get(0) as number;
    const c1 = committed.get(1) as number;
    // the fault: partition 0 loses 7 records the group never processed; partition 1 loses exactly what
    // the group had processed (a repartition topic's purge); partition 2 keeps everything
    await admin.deleteRecords(input, [
      { partition: 0, offset: c0 + 7 },
      { partition: 1, offset: c1 },
    ]);
    const starts = await logStarts(admin, input);
    assert.deepEqual([...starts].sort(), [
      [0, c0 + 7],
      [1, c1],
      [2, 0],
    ]);

    const { logger, warnings } = capturing();
    const metrics = new RedfenceMetrics();
    const processor = new Processor({
      definition: counting(ns, input, `${ns}_s`.replace(/-/g, '_')),
      redis,
      groupId: group,
      kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000 },
      logger,
      metrics,
    });
    t.after(() => processor.close());
    await processor.start();
    // everything the log still holds past the commits is processed, the 7 deleted records are not
    const expected = [...ends].reduce(
      (a, [p, end]) => a + end - Math.max(committed.get(p) ?? 0, starts.get(p) ?? 0),
      0,
    );
    await pollUntil(
      'the processor to commit to the ends',
      async () => processor.counts().records >= expected,
      60_000,
    );
    await pollUntil(
      'the commits to reach the ends',
      async () => {
        const held = await committedOffsets(group, input);
        return [...ends].every(([p, end]) => held.get(p) === end);
      },
      30_000,
    );
    // closed before the topics go (hooks run in the order they were added)
    await processor.close();
    assert.equal(processor.counts().records, expected);

    const skips = warnings.filter((w) => w.fields.reason !== undefined);
    assert.deepEqual(
      skips.map((w) => w.fields),
      [
        {
          group,
          topic: input,
          partition: 0,
          reason: 'retention',
          committed: c0,
          logStart: c0 + 7,
          logEnd: ends.get(0),
          skipped: 7,
        },
      ],
    );
    assert.match(skips[0]?.msg ?? '', /deleted before they were processed/);
    const labels = { topic: input, partition: '0', reason: 'retention' };
    assert.equal(await counterValue(metrics, 'redfence_input_records_skipped_total', labels), 7);
    assert.equal(await counterValue(metrics, 'redfence_input_offset_resets_total', labels), 1);
    for (const partition of ['1', '2'])
      assert.equal(
        await counterValue(metrics, 'redfence_input_offset_resets_total', { topic: input, partition }),
        0,
        `partition ${partition}`,
      );
    assert.ok(!warnings.some((w) => /not compared/.test(w.msg)), 'the check was made');
  });

  it('a commit beyond the end is reported as beyond_end; a partition never committed is not reported', async (t) => {
    const ns = uniqueName('beyond');
    const { input, cleanup } = await keyedTopic(ns, 150);
    t.after(cleanup);
    const ends = await endOffsets(input);
    // partition 0's log starts past 0 but the group never committed it; partition 1's commit is past its
    // end (a topic deleted and made again); partition 2 is committed right at its end (caught up)
    await admin.deleteRecords(input, [{ partition: 0, offset: 5 }]);
    assert.equal((await logStarts(admin, input)).get(0), 5);
    const group = `${ns}-group`;
    const e1 = ends.get(1) as number;
    await commitAt(
      group,
      input,
      new Map([
        [1, e1 + 50],
        [2, ends.get(2) as number],
      ]),
    );

    const { logger, warnings } = capturing();
    const metrics = new RedfenceMetrics();
    const processor = new Processor({
      definition: counting(ns, input, `${ns}_s`.replace(/-/g, '_')),
      redis,
      groupId: group,
      kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000 },
      logger,
      metrics,
    });
    t.after(() => processor.close());
    await processor.start();
    await pollUntil(
      'the beyond_end warning',
      async () => warnings.some((w) => w.fields.reason !== undefined),
      30_000,
    );
    // partition 0 from its log start, partition 1 from its start again (librdkafka's reset)
    const expected = (ends.get(0) as number) - 5 + e1;
    await pollUntil(
      'the processor to reach the ends',
      async () => processor.counts().records >= expected,
      60_000,
    );
    await processor.close();
    const skips = warnings.filter((w) => w.fields.reason !== undefined);
    assert.deepEqual(
      skips.map((w) => w.fields),
      [
        {
          group,
          topic: input,
          partition: 1,
          reason: 'beyond_end',
          committed: e1 + 50,
          logStart: 0,
          logEnd: e1,
        },
      ],
    );
    assert.match(skips[0]?.msg ?? '', /beyond the end/);
    const labels = { topic: input, partition: '1', reason: 'beyond_end' };
    assert.equal(await counterValue(metrics, 'redfence_input_offset_resets_total', labels), 1);
    assert.equal(await counterValue(metrics, 'redfence_input_records_skipped_total', labels), 0);
    assert.equal(
      await counterValue(metrics, 'redfence_input_offset_resets_total', { topic: input, partition: '0' }),
      0,
    );
  });

  it("a handler reports them the same way (the check is the adapter's, shared by every runtime)", async (t) => {
    const ns = uniqueName('hskip');
    const input = `${ns}-in`;
    t.after(
      await createTopics([
        { topic: input, partitions: 1 },
        { topic: `${input}.DLT`, partitions: 1 },
      ]),
    );
    await produce(
      input,
      Array.from({ length: 40 }, (_, i) => ({ key: `k-${i}`, value: JSON.stringify({ i }), partition: 0 })),
    );
    const group = `${ns}-group`;
    await commitAt(group, input, new Map([[0, 10]]));
    await admin.deleteRecords(input, [{ partition: 0, offset: 25 }]);
    assert.equal((await logStarts(admin, input)).get(0), 25);
    const { logger, warnings } = capturing();
    const metrics = new RedfenceMetrics();
    const seen: number[] = [];
    const h = createHandler(
      defineHandler<{ i: number }>({
        input,
        name: 'skip',
        handle: async (r) => {
          seen.push(r.value.i);
        },
      }),
      {
        kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000 },
        groupId: group,
        logger,
        metrics,
      },
    );
    t.after(() => h.close());
    await h.start();
    await pollUntil('the handler to reach the end', async () => seen.length >= 15, 60_000);
    // closed before the topics go (hooks run in the order they were added)
    await h.close();
    assert.deepEqual(
      seen.sort((a, b) => a - b),
      Array.from({ length: 15 }, (_, i) => 25 + i),
    );
    const skips = warnings.filter((w) => w.fields.reason !== undefined).map((w) => w.fields);
    assert.deepEqual(skips, [
      {
        group,
        topic: input,
        partition: 0,
        reason: 'retention',
        committed: 10,
        logStart: 25,
        logEnd: 40,
        skipped: 15,
      },
    ]);
    const labels = { topic: input, partition: '0', reason: 'retention' };
    assert.equal(await counterValue(metrics, 'redfence_input_records_skipped_total', labels), 15);
  });

  it('a topology restarts on the repartition topic it purged itself (log start = committed offset) without a warning', async (t) => {
    const ns = uniqueName('tpurge');
    const input = `${ns}-orders`;
    const repartition = `${ns}-by-upper-repartition`;
    t.after(
      await createTopics([
        { topic: input, partitions: PARTITIONS },
        { topic: `${ns}-counts`, partitions: PARTITIONS },
        { topic: `${input}.DLT`, partitions: 1 },
      ]),
    );
    t.after(async () => {
      const a = kafka.admin();
      await a.connect();
      await a.deleteTopics({ topics: [repartition] }).catch(() => undefined);
      await a.disconnect();
    });
    const s = serdes.string();
    const b = topology({ applicationId: ns });
    b.stream<string, { amount: number }>(input, { key: s })
      .groupBy((k) => (k === null ? null : k.toUpperCase()), { name: 'by-upper', key: s })
      .count({ name: 'upper-counts' })
      .toStream()
      .to(`${ns}-counts`, { key: s });
    const built = b.build();
    const records = (from: number, to: number) =>
      Array.from({ length: to - from }, (_, i) => ({
        key: `c-${(from + i) % 12}`,
        value: JSON.stringify({ amount: 1 }),
      }));
    // every commit of a repartition partition purges it up to the committed offset
    const run = (logger?: Logger, metrics?: RedfenceMetrics) =>
      new TopologyProcessor({
        topology: built,
        redis,
        createTopics: true,
        repartitionPurgeIntervalMs: 0,
        kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 25 },
        ...(logger ? { logger } : {}),
        ...(metrics ? { metrics } : {}),
      });
    await produce(input, records(0, 150));
    const first = run();
    t.after(() => first.close());
    await first.start();
    await waitCommitted(first.groupId, input, 60_000);
    await pollUntil(
      'the repartition topic purged up to its commits',
      async () => {
        const [committed, starts] = [
          await committedOffsets(first.groupId, repartition),
          await logStarts(admin, repartition),
        ];
        return (
          committed.size === PARTITIONS && [...committed].every(([p, c]) => c > 0 && starts.get(p) === c)
        );
      },
      60_000,
    );
    await first.close();
    // the purge moved the log starts up to the committed offsets, and not past them
    const committed = await committedOffsets(first.groupId, repartition);
    assert.deepEqual(await logStarts(admin, repartition), committed);

    await produce(input, records(150, 210));
    const { logger, warnings } = capturing();
    const metrics = new RedfenceMetrics();
    const second = run(logger, metrics);
    t.after(() => second.close());
    await second.start();
    await waitCommitted(second.groupId, input, 60_000);
    await second.close();
    assert.ok(second.counts().records > 0, 'the second instance processed the new records');
    assert.deepEqual(
      warnings.filter((w) => w.fields.reason !== undefined || /not compared/.test(w.msg)),
      [],
    );
    assert.doesNotMatch(await metrics.metricsText(), /redfence_input_offset_resets_total\{/);
  });

  it('control: nothing deleted, nothing reported', async (t) => {
    const ns = uniqueName('kept');
    const { input, cleanup } = await keyedTopic(ns, 150);
    t.after(cleanup);
    const ends = await endOffsets(input);
    const group = `${ns}-group`;
    const committed = new Map([...ends].map(([p, end]) => [p, Math.floor(end / 2)]));
    await commitAt(group, input, committed);
    assert.deepEqual([...(await logStarts(admin, input)).values()], [0, 0, 0]);
    const { logger, warnings } = capturing();
    const metrics = new RedfenceMetrics();
    const processor = new Processor({
      definition: counting(ns, input, `${ns}_s`.replace(/-/g, '_')),
      redis,
      groupId: group,
      kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000 },
      logger,
      metrics,
    });
    t.after(() => processor.close());
    await processor.start();
    const expected = [...ends].reduce((a, [p, end]) => a + end - (committed.get(p) ?? 0), 0);
    await pollUntil(
      'the processor to reach the ends',
      async () => processor.counts().records >= expected,
      60_000,
    );
    await processor.close();
    assert.equal(processor.counts().records, expected);
    // (other warnings, such as Redis' AOF being off, are not this check's)
    assert.deepEqual(
      warnings.filter(
        (w) => w.fields.reason !== undefined || /log start|beyond the end|not compared/.test(w.msg),
      ),
      [],
    );
    const text = await metrics.metricsText();
    assert.doesNotMatch(text, /redfence_input_(offset_resets|records_skipped)_total\{/);
  });
});

describe('the assignment check on its own', () => {
  const tps = [0, 1, 2, 3, 4].map((partition) => ({ topic: 't', partition }));
  const marks = new Map([
    [
      't',
      new Map([
        [0, { low: 10, high: 20 }],
        [1, { low: 10, high: 20 }],
        [2, { low: 10, high: 20 }],
        [3, { low: 10, high: 20 }],
      ]),
    ],
  ]);
  const at = (pairs: [number, number][]) =>
    new Map(pairs.map(([p, offset]) => [`t/${p}`, { offset, metadata: '' }]));

  it('reports below the log start and above its end only; never a partition without a commit or watermarks', () => {
    const found = offsetResets(
      'g',
      tps,
      at([
        [0, 4],
        [1, 10],
        [2, 20],
        [3, 21],
        [4, 3],
      ]),
      marks,
    );
    assert.deepEqual(found, [
      {
        group: 'g',
        topic: 't',
        partition: 0,
        committed: 4,
        logStart: 10,
        logEnd: 20,
        reason: 'retention',
        skipped: 6,
      },
      {
        group: 'g',
        topic: 't',
        partition: 3,
        committed: 21,
        logStart: 10,
        logEnd: 20,
        reason: 'beyond_end',
        skipped: 0,
      },
    ]);
    assert.deepEqual(offsetResets('g', tps, at([[0, -1]]), marks), []);
  });

  it('a failing read, or one not answered by the deadline, is reported as failed and never rejects; one watermarks call per topic', async () => {
    const failed: string[][] = [];
    const resets: OffsetReset[] = [];
    const report = {
      reset: (r: OffsetReset) => resets.push(r),
      failed: (t: readonly string[]) => failed.push([...t]),
    };
    const calls: string[] = [];
    await checkAssigned(
      {
        group: 'g',
        committed: async () => at([[0, 1]]),
        watermarks: async (topic) => {
          calls.push(topic);
          return marks.get('t') ?? new Map();
        },
      },
      [...tps, { topic: 'u', partition: 0 }],
      report,
      new Promise(() => undefined),
    );
    assert.deepEqual(calls.sort(), ['t', 'u']);
    assert.equal(resets.length, 1);
    await checkAssigned(
      {
        group: 'g',
        committed: async () => Promise.reject(new Error('down')),
        watermarks: async () => new Map(),
      },
      tps,
      report,
      new Promise(() => undefined),
    );
    const started = Date.now();
    await checkAssigned(
      { group: 'g', committed: () => new Promise(() => undefined), watermarks: async () => new Map() },
      tps,
      report,
      new Promise((resolve) => setTimeout(resolve, 200)),
    );
    assert.ok(Date.now() - started < 1000, 'settled at its deadline');
    assert.deepEqual(failed, [['t'], ['t']]);
    assert.equal(resets.length, 1);
  });
});
