/**
 * `redfence run` with a cache invalidation module (examples/quote-invalidation.ts) on the real broker
 * and Redis: every entry its events name is gone and every offset committed, SIGTERM exits 0; without
 * a Redis target it is refused (exit 2) before any connection.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { KitKeys } from '../../src/keys/kit.js';
import { Cache } from '../../src/kit/index.js';
import { KAFKA_BROKERS, REDIS_URL, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, pollUntil, produce } from '../helpers/kafka.js';

const CLI = ['--import', 'tsx', 'src/cli/bin.ts', 'run', 'examples/quote-invalidation.ts'];

describe('redfence run <invalidation module>', { timeout: 90_000 }, () => {
  it('invalidates every entry its events name, commits, and exits 0 on SIGTERM', async (t) => {
    const topic = uniqueName('cliinv');
    const group = `${topic}-g`;
    const cacheName = uniqueName('quotes');
    t.after(
      await createTopics([
        { topic, partitions: 2 },
        { topic: `${topic}.DLT`, partitions: 1 },
      ]),
    );
    const redis = new Redis(REDIS_URL);
    t.after(() => redis.disconnect());
    const cache = new Cache<number>({ redis, name: cacheName, ttlMs: 600_000 });
    t.after(() => cache.close());
    const N = 100;
    for (let i = 0; i < N; i++) await cache.get({ tenant: 'acme', id: `q${i}` }, () => i);
    const keys = new KitKeys('cache', cacheName);
    const left = async () => {
      let n = 0;
      for (let i = 0; i < N; i++)
        n += await redis.exists(keys.parts({ tenant: 'acme', id: `q${i}` }, 'v')[0] as string);
      return n;
    };
    assert.equal(await left(), N);
    await produce(
      topic,
      Array.from({ length: N }, (_, i) => ({
        key: `q${i}`,
        value: JSON.stringify({ tenantId: 'acme', quoteId: `q${i}` }),
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
        '--commit-interval',
        '100',
        '--log',
        'warn',
      ],
      {
        env: { ...process.env, QUOTE_EVENTS: topic, QUOTE_CACHE: cacheName },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr?.on('data', (c) => {
      stderr += c;
    });
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    t.after(() => child.kill('SIGKILL'));
    const committed = async () =>
      [...(await committedOffsets(group, topic)).values()].reduce((s, o) => s + Math.max(0, o), 0);
    await pollUntil('every event committed', async () => (await committed()) === N, 60_000, 50);
    assert.equal(await left(), 0, 'entries left after their events were committed');
    child.kill('SIGTERM');
    assert.equal(await exited, 0, stderr);
  });

  it('is refused without a Redis target, before any connection', () => {
    const r = spawnSync(process.execPath, [...CLI, '--brokers', '127.0.0.1:1'], {
      encoding: 'utf8',
      env: {
        ...process.env,
        REDFENCE_REDIS: '',
        REDIS_URL: '',
        REDFENCE_CLUSTER: '',
        REDFENCE_SENTINELS: '',
      },
      timeout: 30_000,
    });
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /invalidation module needs/);
  });
});
