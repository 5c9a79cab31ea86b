/**
 * Records deleted before the group processed them do not pass silently (a processor, on the real broker
 * and Redis). A group commits part of a topic, DeleteRecords moves one partition's log start past the
 * committed offset (as retention would) and another's exactly to it (as a topology's repartition purge
 * does): the processor started on the group logs the skip with its figures and counts it in
 * `redfence_input_records_skipped_total`, for that partition only, and processes what the log still
 * holds. A committed offset beyond a partition's end is reported as `beyond_end`; a partition never
 * committed is not reported whatever its log start; nothing deleted, nothing reported. A handler and a
 * topology: offset-resets-runtimes.test.ts; the check's rules without a broker:
 * test/kafka/offset-resets.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { defineProcessor, Processor, RedfenceMetrics } from '../../src/index.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, endOffsets, pollUntil, produce } from '../helpers/kafka.js';
import {
  capturing,
  checkWarnings,
  commitAt,
  counterValue,
  logStarts,
  suiteClients,
} from './offset-resets-helpers.js';

const PARTITIONS = 3;

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

/** A processor counting records per key on `group`, with a capturing logger and its own metrics. */
function watched(redis: Redis, ns: string, input: string, group: string) {
  const { logger, warnings } = capturing();
  const metrics = new RedfenceMetrics();
  const processor = new Processor({
    definition: defineProcessor<{ n: number }, number>({
      input,
      output: `${ns}-out`,
      store: `${ns}_s`.replace(/-/g, '_'),
      reduce: (s, r) => ({ state: (s ?? 0) + r.n }),
    }),
    redis,
    groupId: group,
    kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000 },
    logger,
    metrics,
  });
  return { processor, warnings, metrics };
}

describe('records lost to retention before a processor processed them', { timeout: 180_000 }, () => {
  const clients = suiteClients();

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
    await clients.admin().deleteRecords(input, [
      { partition: 0, offset: c0 + 7 },
      { partition: 1, offset: c1 },
    ]);
    const starts = await logStarts(clients.admin(), input);
    assert.deepEqual([...starts].sort(), [
      [0, c0 + 7],
      [1, c1],
      [2, 0],
    ]);

    const { processor, warnings, metrics } = watched(clients.redis(), ns, input, group);
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
    await clients.admin().deleteRecords(input, [{ partition: 0, offset: 5 }]);
    assert.equal((await logStarts(clients.admin(), input)).get(0), 5);
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

    const { processor, warnings, metrics } = watched(clients.redis(), ns, input, group);
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

  it('control: nothing deleted, nothing reported', async (t) => {
    const ns = uniqueName('kept');
    const { input, cleanup } = await keyedTopic(ns, 150);
    t.after(cleanup);
    const ends = await endOffsets(input);
    const group = `${ns}-group`;
    const committed = new Map([...ends].map(([p, end]) => [p, Math.floor(end / 2)]));
    await commitAt(group, input, committed);
    assert.deepEqual([...(await logStarts(clients.admin(), input)).values()], [0, 0, 0]);
    const { processor, warnings, metrics } = watched(clients.redis(), ns, input, group);
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
    assert.deepEqual(checkWarnings(warnings), []);
    const text = await metrics.metricsText();
    assert.doesNotMatch(text, /redfence_input_(offset_resets|records_skipped)_total\{/);
  });
});
