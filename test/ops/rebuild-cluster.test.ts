/**
 * Snapshot and rebuild on Redis Cluster (the shared test cluster: nothing is flushed, the store's own
 * keys are deleted to stand for a lost store). A processor with snapshots on handles the first orders;
 * one without snapshots handles more (so the committed offsets move past the last snapshot); the store
 * goes; `redfence rebuild --cluster` restores it (cluster fencing, one hash slot per pipeline) and
 * replays; a new processor handles the rest; `redfence reconcile --cluster` finds nothing and every
 * total is the fold of all the orders. The snapshots are paced (`maxKeysPerSecond`): a pass takes as
 * long as its rate says.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Cluster } from 'ioredis';
import { Processor, type ProcessorDefinition } from '../../src/index.js';
import { KeySpace } from '../../src/keys/index.js';
import { runCli } from '../helpers/cli.js';
import { cluster, KAFKA_BROKERS, REDIS_CLUSTER_NODES, uniqueName } from '../helpers/env.js';
import { createTopics, kafka, pollUntil, produce } from '../helpers/kafka.js';
import { customerOrders } from '../helpers/outputs.js';

const PARTITIONS = 3;
const SRC = new URL('../../src/index.ts', import.meta.url).pathname;

const cli = runCli;

describe('rebuild on Redis Cluster', { timeout: 120_000 }, () => {
  const ns = uniqueName('snapc');
  const store = ns.replace(/-/g, '_');
  const input = `${ns}-orders`;
  const output = `${ns}-totals`;
  const keys = new KeySpace({ store });
  const seeds = REDIS_CLUSTER_NODES.map((n) => `${n.host}:${n.port}`).join(',');
  let redis: Cluster;
  let tmp = '';
  let module = '';
  let definition: ProcessorDefinition;
  let cleanup: () => Promise<void> = async () => undefined;
  const gen = customerOrders(900, 60);

  /** Every key of the store on every master (state, epochs, pending indexes, the mark). */
  const storeKeys = async () => {
    const found: string[] = [];
    for (const node of redis.nodes('master')) found.push(...(await node.keys(`rf:{${store}:*`)));
    return found;
  };
  const processor = (snapshot: boolean) =>
    new Processor({
      definition,
      redis,
      mode: 'exactly-once',
      kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 100 },
      // paced: 10 keys a page, at most 30 keys/s, so a pass over the 60 keys takes at least (60 - its last page) / 30 s
      ...(snapshot ? { snapshot: { intervalMs: 200, pageSize: 10, maxKeysPerSecond: 30 } } : {}),
    });

  before(async () => {
    redis = cluster();
    await redis.ping();
    tmp = mkdtempSync(join(tmpdir(), 'rf-rebuild-cluster-'));
    module = join(tmp, 'totals.ts');
    writeFileSync(
      module,
      `import { defineProcessor } from ${JSON.stringify(SRC)};\nexport default defineProcessor({ input: ${JSON.stringify(input)}, output: ${JSON.stringify(output)}, store: ${JSON.stringify(store)}, reduce: (s: { total: number } | null, o: { amount: number }) => ({ state: { total: (s?.total ?? 0) + o.amount } }) });\n`,
    );
    const { loadDefinition } = await import('../../src/loader/load.js');
    definition = (await loadDefinition(module)) as ProcessorDefinition;
    cleanup = await createTopics([
      { topic: input, partitions: PARTITIONS },
      { topic: output, partitions: PARTITIONS },
      { topic: `${input}.DLT`, partitions: 1 },
    ]);
  });
  after(async () => {
    const names = await storeKeys();
    for (const k of names) await redis.del(k);
    redis.disconnect();
    await cleanup();
    const admin = kafka.admin();
    await admin.connect();
    await admin.deleteTopics({ topics: [`${store}-snapshot`] }).catch(() => undefined);
    await admin.disconnect();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('restores a lost store from the snapshot topic and the log: every key exact', async () => {
    await produce(input, gen.messages.slice(0, 300));
    const a = processor(true);
    await a.start();
    try {
      await pollUntil('the first orders committed', () => a.counts().records >= 300, 60_000);
      const passes = a.snapshots()?.passes ?? 0;
      await pollUntil('a pass after the commits', () => (a.snapshots()?.passes ?? 0) >= passes + 2, 30_000);
      const ms = a.snapshots()?.lastPassMs ?? 0;
      assert.ok(ms >= 1000, `the pass kept to maxKeysPerSecond (${ms} ms for 60 keys at 30/s)`);
    } finally {
      await a.close();
    }
    await produce(input, gen.messages.slice(300, 600));
    const b = processor(false);
    await b.start();
    try {
      await pollUntil('the next orders committed', () => b.counts().records >= 300, 60_000);
    } finally {
      await b.close();
    }
    for (const k of await storeKeys()) await redis.del(k);

    const common = ['--brokers', KAFKA_BROKERS, '--cluster', seeds];
    const r = await cli(['rebuild', module, ...common, '--json']);
    assert.equal(r.code, 0, r.err);
    const report = JSON.parse(r.out) as {
      keys: number;
      partitions: Array<{ from: number; replayed: number }>;
    };
    assert.equal(report.keys, 60);
    const from = report.partitions.reduce((n, p) => n + p.from, 0);
    const replayed = report.partitions.reduce((n, p) => n + p.replayed, 0);
    assert.ok(from >= 300 && from < 600, `replay starts at the snapshot (${from})`);
    assert.equal(from + replayed, 600);

    await produce(input, gen.messages.slice(600));
    const c = processor(true);
    await c.start();
    try {
      await pollUntil('the last orders committed', () => c.counts().records >= 300, 60_000);
    } finally {
      await c.close();
    }
    for (const [customer, amounts] of gen.amounts) {
      const v = await redis.hget(keys.state(customer), 'v');
      assert.deepEqual(JSON.parse(v ?? 'null'), { total: amounts.reduce((x, y) => x + y, 0) }, customer);
    }
    const rec = await cli(['reconcile', module, ...common, '--json']);
    assert.deepEqual((JSON.parse(rec.out) as { anomalies: unknown[] }).anomalies, []);
    assert.equal(rec.code, 0, rec.err);
  });
});
