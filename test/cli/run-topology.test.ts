/**
 * `redfence run examples/fraud.ts` (a module whose default export is a built topology) on the real broker
 * and Redis: the CLI runs it as a TopologyProcessor; the alerts topic (read_committed) equals the reference
 * model's outputs per key and the dead-letter topic holds one record per late order; SIGTERM drains and
 * commits (exit 0). Flags a topology does not take are refused (exit 2) before any connection.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import type { BuiltTopology } from '../../src/index.js';
import { runModel } from '../../src/topology/model.js';
import { KAFKA_BROKERS, REDIS_URL, uniqueName } from '../helpers/env.js';
import { createTopics, produce, readToEnd, waitCommitted } from '../helpers/kafka.js';
import { generateInput, START_MS } from '../topology/scenarios.js';

const CLI = ['--import', 'tsx', 'src/cli/bin.ts', 'run', 'examples/fraud.ts'];
const PARTITIONS = 3;

describe('redfence run <topology module>', { timeout: 180_000 }, () => {
  it('runs examples/fraud.ts: the alerts equal the model per key; SIGTERM drains and commits', async (t) => {
    const ns = uniqueName('clit');
    const env = {
      ORDERS_TOPIC: `${ns}-orders`,
      ALERTS_TOPIC: `${ns}-alerts`,
      FRAUD_APP: ns,
      FRAUD_MIN_AMOUNT: '60',
      FRAUD_MIN_COUNT: '2',
    };
    const keep = { 'retention.ms': '-1' };
    t.after(
      await createTopics([
        { topic: env.ORDERS_TOPIC, partitions: PARTITIONS, config: keep },
        { topic: env.ALERTS_TOPIC, partitions: PARTITIONS, config: keep },
        { topic: `${env.ORDERS_TOPIC}.DLT`, partitions: 1, config: keep },
      ]),
    );
    const redis = new Redis(REDIS_URL);
    t.after(async () => {
      const keys = await redis.keys(`rf:{${ns}:*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    });
    // the example's topology, built as the CLI builds it (its environment set first)
    Object.assign(process.env, env);
    const built = (await import('../../examples/fraud.js')).default as BuiltTopology;
    const input = generateInput(5, {
      keys: 5,
      records: 400,
      partitions: PARTITIONS,
      startMs: START_MS,
      spanMs: 30 * 60_000,
      outOfOrderFraction: 0.15,
      lateFraction: 0.05,
      nullKeyFraction: 0.03,
      disorderMs: 40_000,
      lateByMs: 8 * 60_000,
    });
    const next = new Map<number, number>();
    const records = input.map((r) => {
      const offset = next.get(r.partition) ?? 0;
      next.set(r.partition, offset + 1);
      const key = r.key === null ? null : Buffer.from(r.key);
      const value = Buffer.from(JSON.stringify({ amount: r.amount }));
      return { topic: env.ORDERS_TOPIC, partition: r.partition, offset, key, value, timestamp: r.timestamp };
    });
    const model = runModel(built, records, { partitions: { [env.ORDERS_TOPIC]: PARTITIONS } });
    assert.ok(model.outputs.length > 0 && model.deadLetters.length > 0, 'alerts and late orders');
    await produce(
      env.ORDERS_TOPIC,
      records.map((r) => ({
        key: r.key?.toString() ?? null,
        value: r.value,
        partition: r.partition,
        timestamp: String(r.timestamp),
      })),
    );
    const child = spawn(
      process.execPath,
      [...CLI, '--brokers', KAFKA_BROKERS, '--redis', REDIS_URL, '--max-batch-size', '50', '--log', 'warn'],
      { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr?.on('data', (c) => {
      stderr += c;
    });
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    t.after(() => child.kill('SIGKILL'));
    // the group is the applicationId
    await waitCommitted(ns, env.ORDERS_TOPIC, 120_000);
    child.kill('SIGTERM');
    assert.equal(await exited, 0, stderr);

    const perKey = (rows: { key: string | null; value: string | null; ts: string }[]) => {
      const m = new Map<string, string[]>();
      for (const r of rows) m.set(r.key ?? '-', [...(m.get(r.key ?? '-') ?? []), `${r.value} @${r.ts}`]);
      return m;
    };
    const alerts = await readToEnd(env.ALERTS_TOPIC);
    assert.deepEqual(
      perKey(alerts.map((r) => ({ key: r.key, value: r.value, ts: r.timestamp }))),
      perKey(
        model.outputs.map((o) => ({
          key: o.key?.toString() ?? null,
          value: o.value?.toString() ?? null,
          ts: String(o.timestamp),
        })),
      ),
      'alerts per key',
    );
    const dead = await readToEnd(`${env.ORDERS_TOPIC}.DLT`);
    assert.equal(dead.length, model.deadLetters.length, 'one dead letter per late order');
  });

  it('refuses flags a topology does not take, before any connection (exit 2)', () => {
    for (const flags of [
      ['--sweep-every', '3'],
      ['--concurrency', '4'],
      ['--workers', '2'],
    ]) {
      const r = spawnSync(
        process.execPath,
        [...CLI, '--brokers', '127.0.0.1:1', '--redis', 'redis://127.0.0.1:1', ...flags],
        {
          encoding: 'utf8',
          timeout: 60_000,
        },
      );
      assert.equal(r.status, 2, `${flags.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, new RegExp(flags[0] as string));
    }
  });
});
