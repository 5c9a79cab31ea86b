/**
 * The assignment offset check is the Kafka adapter's, which every runtime gives its report: a handler
 * logs and counts records deleted before it handled them as a processor does, and a topology that
 * purged its repartition topic up to its commits (log start = committed offset, by construction)
 * restarts on it without a warning or a count. On the real broker and Redis.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createHandler, defineHandler, RedfenceMetrics } from '../../src/index.js';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import type { Logger } from '../../src/runtime/logger.js';
import { serdes, topology } from '../../src/topology/index.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import {
  committedOffsets,
  createTopics,
  kafka,
  pollUntil,
  produce,
  waitCommitted,
} from '../helpers/kafka.js';
import {
  capturing,
  checkWarnings,
  commitAt,
  counterValue,
  logStarts,
  suiteClients,
} from './offset-resets-helpers.js';

const PARTITIONS = 3;

describe('the assignment offset check in a handler and a topology', { timeout: 180_000 }, () => {
  const clients = suiteClients();

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
    await clients.admin().deleteRecords(input, [{ partition: 0, offset: 25 }]);
    assert.equal((await logStarts(clients.admin(), input)).get(0), 25);
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
        redis: clients.redis(),
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
          await logStarts(clients.admin(), repartition),
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
    assert.deepEqual(await logStarts(clients.admin(), repartition), committed);

    await produce(input, records(150, 210));
    const { logger, warnings } = capturing();
    const metrics = new RedfenceMetrics();
    const second = run(logger, metrics);
    t.after(() => second.close());
    await second.start();
    await waitCommitted(second.groupId, input, 60_000);
    await second.close();
    assert.ok(second.counts().records > 0, 'the second instance processed the new records');
    assert.deepEqual(checkWarnings(warnings), []);
    assert.doesNotMatch(await metrics.metricsText(), /redfence_input_offset_resets_total\{/);
  });
});
