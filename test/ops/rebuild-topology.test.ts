/**
 * Snapshots and rebuild of a topology on the real broker and a private redis-server (started here, so
 * FLUSHALL touches no shared Redis). A windowed count topology (5-minute tumbling windows emitting on
 * update, beside 1-minute hopping windows with grace emitting final results) runs exactly-once over
 * the first orders with snapshots on; a second instance, without snapshots, runs over more orders (so
 * the rebuild must replay them); Redis loses everything (FLUSHALL); a topology processor started on
 * the lost store leaves its snapshots off. `redfence rebuild <topology module>` restores the state
 * and replays to the committed offsets; a second rebuild is refused (the store is not empty); a new
 * instance runs over the last orders with snapshots on again. What the output topics hold (read
 * committed, to their end offsets) equals the reference model of every order per key and window: no
 * update or final result doubled or missing; the dead-letter topic one record per late order. The same
 * through a repartition topic (a windowed count, its updates re-keyed into an aggregate: two fence
 * spaces, the repartition topic purged after every commit while snapshots run): the rebuild replays both
 * topics from their markers, and the aggregate's outputs count each repartition record once. Bad
 * options are refused before any connection.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { RedisServer } from '../../src/harness/index.js';
import { RedfenceError, TopologyProcessor } from '../../src/index.js';
import { isBuiltTopology, loadRunnable } from '../../src/loader/load.js';
import { checkRebuildable, rebuildTopology } from '../../src/ops/rebuild-topology.js';
import { MemoryKafka } from '../../src/testing/index.js';
import { type BuiltTopology, topology } from '../../src/topology/index.js';
import { type ModelInput, runModel } from '../../src/topology/model.js';
import { runCli } from '../helpers/cli.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, kafka, pollUntil, produce, waitCommitted } from '../helpers/kafka.js';
import {
  assertOutputsEqualModel,
  type Case,
  PARTITIONS,
  prepare,
  TWO_STAGES,
  waitReadPast,
} from '../processor/topology-helpers.js';
import { generateInput, START_MS } from '../topology/scenarios.js';

const SRC = new URL('../../src/index.ts', import.meta.url).pathname;
const MIN = 60_000;

/** The topology module: its topics follow the test's namespace. */
function moduleText(ns: string): string {
  return `import { serdes, TimeWindows, topology } from ${JSON.stringify(SRC)};
const s = serdes.string();
const t = topology({ applicationId: ${JSON.stringify(ns)} });
const g = t.stream<string, { amount: number }>(${JSON.stringify(`${ns}-orders`)}, { key: s }).groupByKey();
g.windowedBy(TimeWindows.ofSizeWithNoGrace(${5 * MIN}))
  .count({ name: 'counts' })
  .toStream()
  .map((w, n) => [w.key, { start: w.start, n }] as const)
  .to(${JSON.stringify(`${ns}-counts`)}, { key: s });
g.windowedBy(TimeWindows.ofSizeAndGrace(${MIN}, 10_000).advanceBy(20_000))
  .emit('final')
  .count({ name: 'finals' })
  .toStream()
  .map((w, n) => [w.key, { start: w.start, end: w.end, n }] as const)
  .to(${JSON.stringify(`${ns}-finals`)}, { key: s });
export default t.build();
`;
}

describe('topology snapshots and rebuild', { timeout: 240_000 }, () => {
  const ns = uniqueName('rbt');
  const orders = `${ns}-orders`;
  const snapshotTopic = `${ns}-snapshot`;
  const server = new RedisServer({ port: 16612 }); // private: FLUSHALL touches no shared Redis
  let redis: Redis;
  let tmp = '';
  let module = '';
  let built: BuiltTopology;
  let cleanup: () => Promise<void> = async () => undefined;
  const keep = { 'retention.ms': '-1' };
  const the: Case = {
    name: 'windowed counts',
    build: () => built,
    outputs: () => [`${ns}-counts`, `${ns}-finals`],
    input: {
      keys: 12,
      records: 600,
      partitions: PARTITIONS,
      startMs: START_MS,
      spanMs: 30 * MIN,
      outOfOrderFraction: 0.15,
      lateFraction: 0.05,
      nullKeyFraction: 0.02,
      disorderMs: 15_000,
      lateByMs: 2 * MIN,
    },
  };
  let inputs: ModelInput[] = [];

  const processor = (snapshot: boolean) =>
    new TopologyProcessor({
      topology: built,
      redis,
      mode: 'exactly-once',
      kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 40 },
      ...(snapshot ? { snapshot: { intervalMs: 200, pageSize: 20 } } : {}),
    });
  const write = (from: number, to: number) =>
    produce(
      orders,
      inputs.slice(from, to).map((r) => ({
        key: r.key?.toString() ?? null,
        value: r.value,
        partition: r.partition,
        timestamp: String(r.timestamp),
      })),
    );

  before(async () => {
    await server.start();
    redis = new Redis(server.url, { maxRetriesPerRequest: 1, retryStrategy: (n) => Math.min(50 * n, 500) });
    redis.on('error', () => undefined);
    tmp = mkdtempSync(join(tmpdir(), 'tsnap-rebuild-'));
    module = join(tmp, 'counts.ts');
    writeFileSync(module, moduleText(ns));
    const loaded = await loadRunnable(module);
    assert.ok(isBuiltTopology(loaded));
    built = loaded;
    cleanup = await createTopics([
      { topic: orders, partitions: PARTITIONS, config: keep },
      ...the.outputs(ns).map((topic) => ({ topic, partitions: PARTITIONS, config: keep })),
      { topic: `${orders}.DLT`, partitions: 1, config: keep },
    ]);
    const next = new Map<number, number>();
    inputs = generateInput(7, the.input).map((r) => {
      const offset = next.get(r.partition) ?? 0;
      next.set(r.partition, offset + 1);
      return {
        topic: orders,
        partition: r.partition,
        offset,
        key: r.key === null ? null : Buffer.from(r.key),
        value: Buffer.from(JSON.stringify({ amount: r.amount })),
        timestamp: r.timestamp,
      };
    });
  });
  after(async () => {
    redis?.disconnect();
    await server.stop();
    await cleanup();
    const admin = kafka.admin();
    await admin.connect();
    await admin.deleteTopics({ topics: [snapshotTopic] }).catch(() => undefined);
    await admin.disconnect();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('snapshots, loses Redis, rebuilds, runs on: every update and final result once', async () => {
    // 1. the first orders, snapshotted
    await write(0, 300);
    const a = processor(true);
    await a.start();
    try {
      await waitCommitted(a.groupId, orders, 60_000);
      const passes = a.snapshots()?.passes ?? 0;
      await pollUntil(
        'two passes begun after the commits',
        () => (a.snapshots()?.passes ?? 0) >= passes + 2,
        30_000,
      );
      assert.equal(a.snapshots()?.stopped, undefined);
      assert.ok((a.snapshots()?.keys ?? 0) > 0, 'key records produced');
    } finally {
      await a.close();
    }
    // 2. a few more orders (half a minute of event time), no snapshot of them: the rebuild replays them;
    // the windows open after them hold orders of both parts, so what Redis is given back decides the
    // updates and final results of the last part
    await write(300, 310);
    const b = processor(false);
    await b.start();
    try {
      await waitCommitted(b.groupId, orders, 60_000);
    } finally {
      await b.close();
    }
    // 3. Redis loses the state; a processor started on the lost store keeps its snapshots off
    await redis.flushall();
    const lost = processor(true);
    await lost.start();
    try {
      assert.match(String(lost.snapshots()?.stopped), /no snapshot mark/);
    } finally {
      await lost.close();
    }

    // 4. rebuild (a dry run first: it writes nothing)
    const common = ['--brokers', KAFKA_BROKERS, '--redis', server.url];
    const size = await redis.dbsize();
    const dry = await runCli(['rebuild', module, ...common, '--dry-run', '--json']);
    assert.equal(dry.code, 0, dry.err);
    assert.equal(await redis.dbsize(), size, 'a dry run writes nothing');
    const r = await runCli(['rebuild', module, ...common, '--json']);
    assert.equal(r.code, 0, r.err);
    const report = JSON.parse(r.out) as {
      keys: number;
      partitions: Array<{ topic: string; marker: number | null; from: number; to: number; replayed: number }>;
    };
    assert.ok(report.keys > 0, 'fence keys from the snapshot');
    assert.equal(report.partitions.length, PARTITIONS);
    const from = report.partitions.reduce((n, p) => n + p.from, 0);
    const replayed = report.partitions.reduce((n, p) => n + p.replayed, 0);
    assert.ok(
      report.partitions.every((p) => p.marker === p.from),
      'each partition replays from its marker',
    );
    assert.equal(from, 300, 'the markers are at the first orders');
    assert.equal(replayed, 10, 'the replay covers every order after the snapshot');
    const again = await runCli(['rebuild', module, ...common]);
    assert.equal(again.code, 2, again.err);
    assert.match(again.err, /has state in Redis.*--force/);

    // 5. the last orders through a new instance, snapshots on again
    await write(310, inputs.length);
    const c = processor(true);
    await c.start();
    try {
      await waitCommitted(c.groupId, orders, 60_000);
      await pollUntil('snapshots run again', () => (c.snapshots()?.passes ?? 0) >= 1, 30_000);
      assert.equal(c.snapshots()?.stopped, undefined);
    } finally {
      await c.close();
    }

    // 6. every update and every final result once, per key and window, as the model gives them
    const model = runModel(built, inputs, { partitions: { [orders]: PARTITIONS } });
    assert.ok(
      model.outputs.some((o) => o.topic === `${ns}-finals`),
      'final results in the model',
    );
    const read = await assertOutputsEqualModel(the, ns, model);
    assert.equal(read, model.outputs.length);
  });

  it('through a repartition: both fence spaces rebuilt, each repartition record counted once', async () => {
    const name = uniqueName('rbt2');
    const input = `${name}-orders`;
    const repartition = `${name}-by-partition-repartition`;
    const prep = await prepare(TWO_STAGES, name, 23);
    const stages = (snapshot: boolean) =>
      new TopologyProcessor({
        topology: prep.built,
        redis,
        mode: 'exactly-once',
        createTopics: true,
        // with snapshots, purged after every commit (no further than the markers); without, never
        repartitionPurgeIntervalMs: snapshot ? 0 : 3_600_000,
        kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 25 },
        ...(snapshot ? { snapshot: { intervalMs: 200, pageSize: 20 } } : {}),
      });
    const runPart = async (snapshot: boolean, from: number, to: number, passes: number) => {
      await prep.produce(from, to);
      const p = stages(snapshot);
      await p.start();
      try {
        await waitCommitted(p.groupId, input, 120_000);
        await waitReadPast(p.groupId, repartition);
        const at = p.snapshots()?.passes ?? 0;
        if (snapshot)
          await pollUntil(
            'passes begun after the commits',
            () => (p.snapshots()?.passes ?? 0) >= at + passes,
            30_000,
          );
      } finally {
        await p.close();
      }
    };
    try {
      const first = Math.floor(prep.records * 0.6);
      await runPart(true, 0, first, 2);
      await runPart(false, first, first + 10, 0);
      await redis.flushall();
      const report = await rebuildTopology({
        topology: prep.built,
        redis,
        client: { brokers: KAFKA_BROKERS.split(','), clientId: 'tsnap-rebuild' },
        group: prep.built.applicationId,
        snapshotTopic: `${name}-snapshot`,
        force: false,
        epochMargin: 1000,
        timeoutMs: 30_000,
      });
      const topics = new Set(report.partitions.map((p) => p.topic));
      assert.deepEqual([...topics].sort(), [input, repartition].sort(), 'both stateful topics rebuilt');
      const replayed = (t: string) =>
        report.partitions.filter((p) => p.topic === t).reduce((n, p) => n + p.replayed, 0);
      assert.equal(replayed(input), 10, 'the orders after the snapshot replayed');
      assert.ok(replayed(repartition) > 0, 'the repartition records after the snapshot replayed');
      await runPart(true, first + 10, prep.records, 1);
      assert.equal(await assertOutputsEqualModel(TWO_STAGES, name, prep.model), prep.model.outputs.length);
    } finally {
      await prep.cleanup();
      const admin = kafka.admin();
      await admin.connect();
      await admin.deleteTopics({ topics: [`${name}-snapshot`, repartition] }).catch(() => undefined);
      await admin.disconnect();
    }
  });

  it('refuses bad snapshot and rebuild options before any connection', async () => {
    const nowhereRedis = new Redis({ lazyConnect: true, port: 1 });
    const bad = (options: object, path: RegExp) =>
      assert.throws(
        () =>
          new TopologyProcessor({
            topology: built,
            redis: nowhereRedis,
            kafka: { brokers: ['127.0.0.1:1'] },
            ...options,
          } as never),
        (e: unknown) => RedfenceError.is(e, 'RF_INVALID_OPTIONS') && path.test((e as Error).message),
      );
    bad({ snapshot: { intervalMs: 5 } }, /snapshot\.intervalMs/);
    bad({ snapshot: { topic: 'a b' } }, /snapshot\.topic/);
    bad({ snapshot: { every: 1 } }, /snapshot/);
    bad(
      { snapshot: {}, kafka: new MemoryKafka().port({ groupId: 'g' }) },
      /needs the "kafka" option as connection settings/,
    );
    assert.equal(nowhereRedis.status, 'wait', 'never connected');
    const nowhere = ['--brokers', '127.0.0.1:1', '--redis', 'redis://127.0.0.1:1'];
    const cli = (args: string[]) =>
      spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/bin.ts', ...args, ...nowhere], {
        encoding: 'utf8',
        timeout: 60_000,
      });
    for (const [args, why] of [
      [['run', module, '--snapshot-interval', '50'], /--snapshot-interval must be an integer >= 100/],
      [
        ['run', module, '--snapshot-topic', 'x'],
        /--snapshot-topic applies to snapshots; add --snapshot-interval/,
      ],
      [['rebuild', module, '--fencing', 'strict'], /--fencing applies to processors/],
      [['rebuild', module, '--epoch-margin', '0'], /--epoch-margin/],
    ] as const) {
      const r = cli([...args]);
      assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, why);
    }
    // a topology whose windows a rebuild cannot give back exactly: refused, naming the node
    const sessions = join(tmp, 'sessions.ts');
    writeFileSync(
      sessions,
      `import { SessionWindows, topology } from ${JSON.stringify(SRC)};
const t = topology({ applicationId: 'tsnap-sessions' });
t.stream('tsnap-in').groupByKey().windowedBy(SessionWindows.ofInactivityGapWithNoGrace(1000)).count({ name: 'per-session' }).toStream().to('tsnap-out');
export default t.build();
`,
    );
    const pattern = topology({ applicationId: 'tsnap-pattern' });
    pattern
      .stream(/tsnap-in-.*/, { name: 'by-pattern' })
      .groupByKey()
      .count({ name: 'n' })
      .toStream()
      .to('tsnap-out');
    assert.throws(
      () => checkRebuildable(pattern.build()),
      (e: unknown) =>
        RedfenceError.is(e, 'RF_TOPOLOGY_UNSUPPORTED') &&
        (e as RedfenceError).details?.node === 'by-pattern' &&
        /reads a pattern/.test((e as Error).message),
    );
    const s = cli(['rebuild', sessions]);
    assert.equal(s.status, 2, s.stderr);
    assert.match(
      s.stderr,
      /topology node .*session windows cannot be rebuilt exactly.*\[RF_TOPOLOGY_UNSUPPORTED\]/,
    );
  });
});
