/**
 * `redfence run` with a handler module (examples/order-webhook.ts) on the real broker and Redis: it
 * posts every order once to a local webhook, SIGTERM drains and commits (exit 0), alone and with
 * --workers 2 (both workers in one group, each with partitions); flags of the other kind of definition
 * are refused (exit 2) before any connection.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it, type TestContext } from 'node:test';
import { Redis } from 'ioredis';
import pg from 'pg';
import { DATABASE_URL, KAFKA_BROKERS, REDIS_URL, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, pollUntil, produce } from '../helpers/kafka.js';

const CLI = ['--import', 'tsx', 'src/cli/bin.ts', 'run', 'examples/order-webhook.ts'];

/**
 * examples/order-webhook.ts run by the CLI on a fresh topic against a local webhook: every order is
 * posted (produced once `ready` says so of the log), then SIGTERM must drain and commit (exit 0), each
 * order posted once, committed to the end. Returns the CLI's JSON log lines.
 */
async function webhookRun(
  t: TestContext,
  partitions: number,
  extra: string[],
  ready?: (lines: LogLines) => boolean,
): Promise<LogLines> {
  const ns = uniqueName('clih').replace(/-/g, '_');
  const topic = `${ns}-orders`;
  const group = `${ns}-g`;
  t.after(
    await createTopics([
      { topic, partitions },
      { topic: `${topic}.DLT`, partitions: 1 },
    ]),
  );
  const redis = new Redis(REDIS_URL);
  t.after(async () => {
    const keys = await redis.keys(`rf:{${ns}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });
  const ids = new Map<string, number>();
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const id = String(req.headers['idempotency-key']);
      ids.set(id, (ids.get(id) ?? 0) + 1);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => new Promise<void>((r) => server.close(() => r())));
  const N = 300;
  const child = spawn(
    process.execPath,
    [
      ...CLI,
      '--brokers',
      KAFKA_BROKERS,
      '--redis',
      REDIS_URL,
      '--group',
      group,
      '--concurrency',
      '8',
      '--commit-interval',
      '100',
      '--attempt-timeout',
      '10000',
      ...extra,
    ],
    {
      env: {
        ...process.env,
        ORDERS_TOPIC: topic,
        WEBHOOK_NAME: ns,
        WEBHOOK_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/orders`,
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr?.on('data', (c) => {
    stderr += c;
  });
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  t.after(() => child.kill('SIGKILL'));
  if (ready) await pollUntil('the CLI ready for the orders', () => ready(logLines(stderr)), 60_000, 20);
  await produce(
    topic,
    Array.from({ length: N }, (_, i) => ({
      key: `c-${i % 17}`,
      value: JSON.stringify({ customer: `c-${i % 17}`, amount: i }),
    })),
  );
  await pollUntil('every order posted', () => ids.size === N, 60_000, 20);
  child.kill('SIGTERM');
  assert.equal(await exited, 0, stderr);
  assert.deepEqual(
    [...ids.values()].filter((n) => n !== 1),
    [],
    'each order posted once',
  );
  const committed = await committedOffsets(group, topic);
  assert.equal(
    [...committed.values()].reduce((s, o) => s + o, 0),
    N,
    'committed to the end',
  );
  return logLines(stderr);
}

type LogLines = Array<Record<string, unknown>>;
const logLines = (stderr: string): LogLines =>
  stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
const assigned = (lines: LogLines, worker: number) =>
  lines.some(
    (l) => l.worker === worker && l.msg === 'partitions assigned' && (l.partitions as unknown[]).length > 0,
  );

describe('redfence run <handler module>', { timeout: 120_000 }, () => {
  it('posts every order once, then drains and commits on SIGTERM', async (t) => {
    await webhookRun(t, 3, ['--log', 'warn']);
  });

  it('--workers 2: both workers take partitions of the one group; SIGTERM drains both (exit 0)', async (t) => {
    // the orders are produced once each worker holds partitions, so both post some
    const lines = await webhookRun(
      t,
      4,
      ['--workers', '2', '--session-timeout', '6000', '--log', 'info'],
      (l) => assigned(l, 0) && assigned(l, 1),
    );
    for (const w of [0, 1])
      assert.ok(
        lines.some((l) => l.worker === w && l.msg === 'handler closed'),
        `worker ${w} closed its handler`,
      );
    assert.ok(lines.some((l) => l.msg === 'all workers exited'));
  });

  it('--postgres: ctx.transaction writes one row per order; no Redis needed', async (t) => {
    const ns = uniqueName('clipg').replace(/-/g, '_');
    const topic = `${ns}-orders`;
    const group = `${ns}-g`;
    const rows = `redfence_handlers.${ns}_rows`;
    const processed = `redfence_handlers.${ns}_done`;
    t.after(
      await createTopics([
        { topic, partitions: 2 },
        { topic: `${topic}.DLT`, partitions: 1 },
      ]),
    );
    const pool = new pg.Pool({ connectionString: DATABASE_URL });
    // hooks run in the order they were added: the tables go, then the pool
    t.after(async () => {
      await pool.query(`DROP TABLE IF EXISTS ${rows}, ${processed}`);
      await pool.end();
    });
    await pool.query('CREATE SCHEMA IF NOT EXISTS redfence_handlers');
    await pool.query(`CREATE TABLE ${rows} (id text, customer text, amount int)`);
    await pool.query(
      `CREATE TABLE ${processed} (id text PRIMARY KEY, processed_at timestamptz NOT NULL DEFAULT now())`,
    );
    const N = 120;
    await produce(
      topic,
      Array.from({ length: N }, (_, i) => ({
        key: `c-${i % 7}`,
        value: JSON.stringify({ customer: `c-${i % 7}`, amount: i }),
      })),
    );
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'src/cli/bin.ts',
        'run',
        'examples/order-rows.ts',
        '--brokers',
        KAFKA_BROKERS,
        '--group',
        group,
        '--postgres-table',
        processed,
        '--commit-interval',
        '100',
        '--log',
        'warn',
      ],
      {
        // the URL through the environment (a password never on the command line)
        env: {
          ...process.env,
          ORDERS_TOPIC: topic,
          ORDERS_TABLE: rows,
          REDFENCE_POSTGRES_URL: DATABASE_URL,
          REDIS_URL: '',
        },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr?.on('data', (c) => {
      stderr += c;
    });
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    t.after(() => child.kill('SIGKILL'));
    const count = async () => Number((await pool.query(`SELECT count(*) AS n FROM ${rows}`)).rows[0].n);
    await pollUntil('every order written', async () => (await count()) === N, 60_000, 50);
    await pollUntil(
      'committed to the end',
      async () => [...(await committedOffsets(group, topic)).values()].reduce((s, o) => s + o, 0) === N,
      30_000,
      50,
    );
    child.kill('SIGTERM');
    assert.equal(await exited, 0, stderr);
    const { rows: r } = await pool.query(`SELECT count(*) AS n, count(DISTINCT id) AS d FROM ${rows}`);
    assert.deepEqual([Number(r[0].n), Number(r[0].d)], [N, N]);
  });

  it('refuses processor flags with a handler module before connecting (exit 2)', () => {
    const r = spawnSync(process.execPath, [...CLI, '--brokers', '127.0.0.1:1', '--mode', 'at-least-once'], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    assert.equal(r.status, 2);
    assert.match(r.stderr, /--mode applies to processors, and the module exports a handler/);
    const p = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        'src/cli/bin.ts',
        'run',
        'examples/customer-totals.ts',
        '--brokers',
        '127.0.0.1:1',
        '--concurrency',
        '4',
        '--attempt-timeout',
        '100',
      ],
      {
        encoding: 'utf8',
        timeout: 30_000,
      },
    );
    assert.equal(p.status, 2);
    assert.match(
      p.stderr,
      /--concurrency, --attempt-timeout apply to handlers, and the module exports a processor/,
    );
  });
});
