/**
 * Snapshot and rebuild on the real broker and a private redis-server (started here, so FLUSHALL and a
 * restart without persistence touch no shared Redis). A processor with snapshots on runs over the
 * first orders and snapshots them; more orders come; Redis loses everything mid-run (FLUSHALL, or a
 * restart without persistence) while the processor goes on writing into the empty store; the
 * processor's snapshots must stop on their own (never overwriting the good snapshot), and a processor
 * started on the lost store must not start them. Then: rebuild
 * refuses the non-empty store without --force, rebuilds with it, a new processor handles the rest of
 * the orders, and every key is exact: `redfence reconcile` finds no anomaly (value, fence, epoch,
 * pending entries) and each total equals the fold of all the orders.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { RedisServer } from '../../src/harness/index.js';
import { Processor, type ProcessorDefinition } from '../../src/index.js';
import { KeySpace } from '../../src/keys/index.js';
import { runCli } from '../helpers/cli.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, kafka, pollUntil, produce } from '../helpers/kafka.js';
import { customerOrders } from '../helpers/outputs.js';

const PARTITIONS = 3;
const SRC = new URL('../../src/index.ts', import.meta.url).pathname;

const cli = runCli;

type Loss = 'flushall' | 'restart';

function variant(loss: Loss, kind: 'reduce' | 'operation') {
  describe(`rebuild after ${loss} (${kind} processor)`, { timeout: 120_000 }, () => {
    const ns = uniqueName(`snap-${loss}`);
    const store = ns.replace(/-/g, '_');
    const input = `${ns}-orders`;
    const output = `${ns}-totals`;
    const snapshotTopic = `${store}-snapshot`;
    const keys = new KeySpace({ store });
    const server = new RedisServer();
    let redis: Redis;
    let tmp = '';
    let module = '';
    let definition: ProcessorDefinition;
    let cleanup: () => Promise<void> = async () => undefined;
    const gen = customerOrders(1800, 90);

    const processor = (snapshot: boolean) =>
      new Processor({
        definition,
        redis,
        mode: 'exactly-once',
        kafka: { brokers: KAFKA_BROKERS.split(','), sessionTimeoutMs: 6000, maxBatchSize: 100 },
        ...(snapshot ? { snapshot: { intervalMs: 200, pageSize: 50 } } : {}),
      });

    before(async () => {
      await server.start();
      redis = new Redis(server.url, {
        enableAutoPipelining: true,
        maxRetriesPerRequest: 1,
        retryStrategy: (n) => Math.min(50 * n, 500),
      });
      redis.on('error', () => undefined);
      tmp = mkdtempSync(join(tmpdir(), 'rf-rebuild-'));
      module = join(tmp, 'totals.ts');
      const body =
        kind === 'reduce'
          ? `reduce: (s: { total: number; count: number } | null, o: { amount: number }) => ({ state: { total: (s?.total ?? 0) + o.amount, count: (s?.count ?? 0) + 1 } }),`
          : `operation: (o: { amount: number }) => ({ op: 'add' as const, by: o.amount }),`;
      writeFileSync(
        module,
        `import { defineProcessor } from ${JSON.stringify(SRC)};\nexport default defineProcessor({ input: ${JSON.stringify(input)}, output: ${JSON.stringify(output)}, store: ${JSON.stringify(store)}, ${body} });\n`,
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
      redis?.disconnect();
      await server.stop();
      await cleanup();
      const admin = kafka.admin();
      await admin.connect();
      await admin.deleteTopics({ topics: [snapshotTopic] }).catch(() => undefined);
      await admin.disconnect();
      rmSync(tmp, { recursive: true, force: true });
    });

    it('loses Redis mid-run, rebuilds, goes on: every key exact', async () => {
      // 1. snapshots of the first 600 orders
      await produce(input, gen.messages.slice(0, 600));
      const a = processor(true);
      await a.start();
      try {
        await pollUntil('the first orders committed', () => a.counts().records >= 600, 60_000);
        const passes = a.snapshots()?.passes ?? 0;
        await pollUntil(
          'a snapshot pass begun after the commits',
          () => (a.snapshots()?.passes ?? 0) >= passes + 2,
          30_000,
        );
        // 2. more orders; Redis loses everything while they are processed
        await produce(input, gen.messages.slice(600, 900));
        await pollUntil('some of the next orders committed', () => a.counts().records >= 900, 60_000);
        if (loss === 'flushall') await redis.flushall();
        else {
          await server.kill();
          await server.start();
        }
        await produce(input, gen.messages.slice(900, 1200));
        await pollUntil('the next orders committed', () => a.counts().records >= 1200, 60_000);
        await pollUntil('the snapshots stopped', () => a.snapshots()?.stopped !== undefined, 30_000);
      } finally {
        await a.close();
      }
      assert.ok((await redis.dbsize()) > 0, 'the processor wrote into the empty store');
      // a processor started on the lost store (no mark, a snapshot topic with records) keeps snapshots off
      const x = processor(true);
      await x.start();
      try {
        assert.match(String(x.snapshots()?.stopped), /no snapshot mark/);
      } finally {
        await x.close();
      }

      // 3. rebuild: refused while the store is not empty, then with --force
      const common = ['--brokers', KAFKA_BROKERS, '--redis', server.url];
      const size = await redis.dbsize();
      const dry = await cli(['rebuild', module, ...common, '--dry-run', '--json']);
      assert.equal(dry.code, 0, dry.err);
      const plan = JSON.parse(dry.out) as {
        dryRun: boolean;
        keys: number;
        partitions: Array<{ from: number; to: number }>;
      };
      assert.equal(plan.dryRun, true);
      assert.equal(plan.keys, 90);
      assert.equal(
        plan.partitions.reduce((n, p) => n + p.to, 0),
        1200,
        'the replay ends at the committed offsets',
      );
      assert.equal(await redis.dbsize(), size, 'a dry run writes nothing');
      const refused = await cli(['rebuild', module, ...common]);
      assert.equal(refused.code, 2, refused.err);
      assert.match(refused.err, /not empty.*--force/);
      const r = await cli(['rebuild', module, ...common, '--force', '--json']);
      assert.equal(r.code, 0, r.err);
      const report = JSON.parse(r.out) as {
        keys: number;
        cleared: number;
        partitions: Array<{
          partition: number;
          marker: number | null;
          from: number;
          to: number;
          replayed: number;
        }>;
      };
      assert.equal(report.keys, 90, 'every key came from the snapshot');
      assert.ok(report.cleared > 0);
      assert.equal(report.partitions.length, PARTITIONS);
      const replayed = report.partitions.reduce((n, p) => n + p.replayed, 0);
      const snapshotted = report.partitions.reduce((n, p) => n + p.from, 0);
      assert.ok(snapshotted >= 600, `the markers cover the first orders (${snapshotted})`);
      assert.equal(snapshotted + replayed, 1200, 'the replay covers everything after the snapshot');

      // 4. the rest of the orders through a new processor (snapshots on again)
      await produce(input, gen.messages.slice(1200));
      const c = processor(true);
      await c.start();
      try {
        await pollUntil('the last orders committed', () => c.counts().records >= 600, 60_000);
        await pollUntil('snapshots run again', () => (c.snapshots()?.passes ?? 0) >= 1, 30_000);
        assert.equal(c.snapshots()?.stopped, undefined);
      } finally {
        await c.close();
      }

      // 5. every key exact
      for (const [customer, amounts] of gen.amounts) {
        const v = await redis.hget(keys.state(customer), 'v');
        const total = amounts.reduce((x, y) => x + y, 0);
        if (kind === 'reduce')
          assert.deepEqual(JSON.parse(v ?? 'null'), { total, count: amounts.length }, customer);
        else assert.equal(v, String(total), customer);
      }
      const rec = await cli(['reconcile', module, ...common, '--json']);
      const found = JSON.parse(rec.out) as { anomalies: unknown[]; records: number };
      assert.deepEqual(found.anomalies, []);
      assert.equal(found.records, 1800);
      assert.equal(rec.code, 0, rec.err);
    });
  });
}

variant('flushall', 'reduce');
variant('restart', 'operation');
