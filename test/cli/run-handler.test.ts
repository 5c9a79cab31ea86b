/**
 * `redfence run` with a handler module (examples/order-webhook.ts) on the real broker and Redis: it
 * posts every order once to a local webhook, SIGTERM drains and commits (exit 0); flags of the other
 * kind of definition are refused (exit 2) before any connection.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { KAFKA_BROKERS, REDIS_URL, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, pollUntil, produce } from '../helpers/kafka.js';

const CLI = ['--import', 'tsx', 'src/cli/bin.ts', 'run', 'examples/order-webhook.ts'];

describe('redfence run <handler module>', { timeout: 120_000 }, () => {
  it('posts every order once, then drains and commits on SIGTERM', async (t) => {
    const ns = uniqueName('clih').replace(/-/g, '_');
    const topic = `${ns}-orders`;
    const group = `${ns}-g`;
    t.after(
      await createTopics([
        { topic, partitions: 3 },
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
    await produce(
      topic,
      Array.from({ length: N }, (_, i) => ({
        key: `c-${i % 17}`,
        value: JSON.stringify({ customer: `c-${i % 17}`, amount: i }),
      })),
    );
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
        '--log',
        'warn',
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
      ],
      {
        encoding: 'utf8',
        timeout: 30_000,
      },
    );
    assert.equal(p.status, 2);
    assert.match(p.stderr, /--concurrency applies to handlers, and the module exports a processor/);
  });
});
