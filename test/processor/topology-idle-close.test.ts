/**
 * The wall-clock close of idle partitions (`idleCloseMs`; docs/streams.md, "Closing the windows of an
 * idle partition") on the real broker and Redis, with a 1-second tumbling count with emit('final')
 * (fixtures/idle-close.ts):
 * - bad values of the option, and the option on a topology without a windowed aggregation, are refused
 *   with RF_INVALID_OPTIONS naming it, before any connection; `redfence run --idle-close` likewise, and
 *   refused for a module that exports no topology;
 * - in each mode: a few records per key in two windows on every partition, then nothing more. Without
 *   ticks the last window of each key never closes (the model of the records alone has only the first
 *   windows' results). The processor produces ticks into the idle partitions (their header is read back
 *   from the events topic, null key, a wall-clock timestamp), reads them, and every key's every window's
 *   final count appears in the counts topic (read_committed, to its end offsets) exactly once, equal to
 *   what the records give and to the model of the events topic as read back, ticks included. No tick is
 *   a dead letter; the source node counted the records alone (ticks walk no node); the ticks metric
 *   counted those produced and consumed; once every window was closed no further tick was made.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { RedfenceError } from '../../src/errors/index.js';
import { RedfenceMetrics } from '../../src/metrics/index.js';
import { resolveTopologyOptions } from '../../src/processor/topology/options.js';
import { TopologyProcessor } from '../../src/processor/topology/processor.js';
import { serdes, topology } from '../../src/topology/index.js';
import { runModel } from '../../src/topology/model.js';
import { runCli } from '../helpers/cli.js';
import { KAFKA_BROKERS, standalone, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, pollUntil, produce, readToEnd } from '../helpers/kafka.js';
import { idleCount } from './fixtures/idle-close.js';
import {
  eventsAsInput,
  expectedFinals,
  finalsOf,
  IDLE_PARTITIONS,
  idleEvents,
  idleMessages,
} from './idle-close-helpers.js';

const FIXTURE = 'test/processor/fixtures/idle-close.ts';

describe('idleCloseMs: checked before any connection', () => {
  it('refuses values out of bounds and a topology with no windowed aggregation, naming the option', () => {
    const redis = { config: () => undefined } as never;
    const base = { topology: idleCount('ic'), redis, kafka: { brokers: ['127.0.0.1:1'] } };
    assert.equal(resolveTopologyOptions(base).idleCloseMs, undefined);
    assert.equal(resolveTopologyOptions({ ...base, idleCloseMs: 100 }).idleCloseMs, 100);
    for (const bad of [0, 99, 1.5, '500', 86_400_001, -1])
      assert.throws(
        () => new TopologyProcessor({ ...base, idleCloseMs: bad as never }),
        (e: unknown) =>
          RedfenceError.is(e, 'RF_INVALID_OPTIONS') && /"idleCloseMs" must be an integer/.test(String(e)),
        `idleCloseMs ${String(bad)}`,
      );
    const t = topology({ applicationId: 'plain' });
    t.stream<string, number>('in', { key: serdes.string() }).groupByKey().count().toStream().to('out');
    assert.throws(
      () => new TopologyProcessor({ ...base, topology: t.build(), idleCloseMs: 500 }),
      (e: unknown) =>
        RedfenceError.is(e, 'RF_INVALID_OPTIONS') &&
        /"idleCloseMs": topology plain has no windowed aggregation/.test(String(e)),
    );
  });

  it('redfence run --idle-close: bounds checked, and refused for a module that exports no topology', async () => {
    const at = ['--brokers', '127.0.0.1:1', '--redis', 'redis://127.0.0.1:1'];
    const low = await runCli(['run', FIXTURE, '--idle-close', '50', ...at]);
    assert.equal(low.code, 2, low.err);
    assert.match(low.err, /--idle-close/);
    const processor = await runCli(['run', 'examples/customer-totals.ts', '--idle-close', '500', ...at]);
    assert.equal(processor.code, 2, processor.err);
    assert.match(processor.err, /--idle-close applies to topologies, and the module exports a processor/);
  });
});

describe('idleCloseMs: idle partitions get ticks and their windows close', { timeout: 180_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  for (const mode of ['exactly-once', 'at-least-once'] as const)
    it(`${mode}: every window's final result, exactly once, with no record after the last`, async (t) => {
      const ns = uniqueName('idle');
      const events = `${ns}-events`;
      const counts = `${ns}-counts`;
      const keep = { 'retention.ms': '-1' };
      t.after(
        await createTopics([
          { topic: events, partitions: IDLE_PARTITIONS, config: keep },
          { topic: counts, partitions: IDLE_PARTITIONS, config: keep },
          { topic: `${events}.DLT`, partitions: 1, config: keep },
        ]),
      );
      t.after(async () => {
        const keys = await redis.keys(`rf:{${ns}*`);
        if (keys.length > 0) await redis.del(...keys);
      });
      const startedAt = Date.now();
      const sent = idleEvents(Math.floor((startedAt - 5000) / 1000) * 1000);
      await produce(events, idleMessages(sent));
      const want = expectedFinals(sent);
      const built = idleCount(ns);
      // the records alone never close each key's last window
      const alone = runModel(built, (await eventsAsInput(events)).input);
      assert.ok(alone.outputs.length < want.size, `without ticks ${alone.outputs.length} of ${want.size}`);

      const metrics = new RedfenceMetrics({ registry: new Registry() });
      const p = new TopologyProcessor({
        topology: built,
        redis,
        mode,
        metrics,
        idleCloseMs: 300,
        kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000 },
      });
      await p.start();
      let closed = false;
      t.after(() => (closed ? undefined : p.close()));
      await pollUntil('every final result in the counts topic', async () => {
        return (await readToEnd(counts)).length >= want.size;
      });
      // the ticks read and committed: the group's offsets are past each partition's last tick
      await pollUntil('the ticks committed', async () => {
        const { ticks } = await eventsAsInput(events);
        const at = await committedOffsets(ns, events);
        return (
          ticks.length > 0 &&
          ticks.every((r) => (at.get(r.partition) ?? -1) > Number(r.offset)) &&
          p.counts().ticksConsumed >= ticks.length
        );
      });
      const text = await metrics.metricsText();
      const c = p.counts();
      closed = true;
      await p.close();

      const { input, ticks } = await eventsAsInput(events);
      const tickPartitions = new Set(ticks.map((r) => r.partition));
      assert.equal(tickPartitions.size, IDLE_PARTITIONS, 'each idle partition got a tick');
      for (const r of ticks) {
        assert.equal(r.key, null);
        assert.equal(r.value ?? '', '');
        assert.ok(Number(r.timestamp) >= startedAt, 'a tick carries the wall clock');
      }
      // one tick per partition closed everything (its records are seconds behind the wall clock)
      assert.equal(ticks.length, IDLE_PARTITIONS, 'no tick once every window was closed');
      assert.equal(c.ticksProduced, ticks.length);
      assert.equal(c.ticksConsumed, ticks.length);

      const rows = await readToEnd(counts);
      assert.deepEqual(finalsOf(rows), want, "every key's every window once, with its count");
      for (const r of rows) assert.equal(r.headers['redfence-tick'], undefined, 'a final result is no tick');
      const model = runModel(built, input);
      assert.deepEqual(
        rows.map((r) => `${r.key} ${r.value} @${r.timestamp}`).sort(),
        model.outputs.map((o) => `${o.key} ${o.value} @${o.timestamp}`).sort(),
        'the outputs are the model of the events topic, ticks included',
      );
      assert.equal((await readToEnd(`${events}.DLT`)).length, 0, 'no dead letter');
      const source = built.nodes[0]?.name as string;
      assert.match(
        text,
        new RegExp(
          `redfence_topology_records_in_total\\{application_id="${ns}",topology_node="${source}"\\} ${sent.length}\\n`,
        ),
        'the source counted the records, not the ticks',
      );
      assert.match(
        text,
        new RegExp(
          `redfence_topology_ticks_total\\{application_id="${ns}",event="produced"\\} ${ticks.length}\\n`,
        ),
      );
      assert.match(
        text,
        new RegExp(
          `redfence_topology_ticks_total\\{application_id="${ns}",event="consumed"\\} ${ticks.length}\\n`,
        ),
      );
    });
});
