/**
 * A single-node Redis client pointed at a read-only replica (127.0.0.1:16380, a replica of 16379) or
 * at a Redis Cluster node (17001): the processor, the handler, the invalidation consumer and the CLI
 * (`redfence run`; `redfence inspect`, which only reads, on a Cluster node only) refuse it at start-up
 * with RF_REDIS_WRONG_KIND naming the node and the fix (`--cluster`; the primary or `--sentinels`), the
 * CLI with exit 2, before any record.
 * Before, the processor failed in ~1.2 s with the raw `READONLY You can't write against a read only
 * replica` or `MOVED 15029 127.0.0.1:17003` (exit 1, no code, nothing said "use --cluster").
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { checkRedisKind } from '../../src/fence/redis-kind.js';
import { createHandler, defineHandler, defineProcessor, Processor, RedfenceError } from '../../src/index.js';
import { createInvalidation, defineInvalidation } from '../../src/kit/index.js';
import { cluster, KAFKA_BROKERS, REDIS_CLUSTER_NODES, REDIS_URL, uniqueName } from '../helpers/env.js';
import { createTopics } from '../helpers/kafka.js';

const REPLICA = process.env.REDIS_REPLICA_URL || 'redis://127.0.0.1:16380';
const NODE = `redis://${REDIS_CLUSTER_NODES[0]?.host ?? '127.0.0.1'}:${REDIS_CLUSTER_NODES[0]?.port ?? 17001}`;
const KINDS: Array<[string, string, RegExp, RegExp]> = [
  ['a replica', REPLICA, /is a read-only replica \(of [^)]+\): writes fail with READONLY/, /--sentinels/],
  ['a Cluster node', NODE, /is a Redis Cluster node: a single-node client gets MOVED/, /use --cluster/],
];

const dir = mkdtempSync(join(tmpdir(), 'redfence-redis-kind-'));
after(() => rmSync(dir, { recursive: true, force: true }));

describe('a single-node Redis client on the wrong kind of Redis', { timeout: 180_000 }, () => {
  it('the primary and a Cluster client pass', async () => {
    const primary = new Redis(REDIS_URL);
    after(() => primary.disconnect());
    await checkRedisKind(primary);
    const nodes = cluster();
    after(() => nodes.disconnect());
    await checkRedisKind(nodes);
  });

  for (const [what, url, message] of KINDS) {
    const runtimes: Array<
      [string, (r: Redis, ns: string) => { start(): Promise<void>; close(): Promise<void> }]
    > = [
      [
        'processor',
        (redis, ns) =>
          new Processor({
            definition: defineProcessor({
              input: `${ns}-in`,
              output: `${ns}-out`,
              store: ns,
              operation: () => ({ op: 'add', by: 1 }),
            }),
            redis,
            groupId: `${ns}-g`,
            kafka: { brokers: KAFKA_BROKERS.split(',') },
          }),
      ],
      [
        'handler',
        (redis, ns) =>
          createHandler(defineHandler({ input: `${ns}-in`, name: 'h', handle: async () => undefined }), {
            kafka: { brokers: KAFKA_BROKERS.split(',') },
            groupId: `${ns}-g`,
            redis,
          }),
      ],
      [
        'invalidation consumer',
        (redis, ns) =>
          createInvalidation(
            defineInvalidation<{ tenant: string; id: string }>({
              input: { topic: `${ns}-in` },
              name: 'inv',
              cache: ns,
              keys: `${ns}:{tenant}:{id}`,
            }),
            {
              kafka: { brokers: KAFKA_BROKERS.split(',') },
              groupId: `${ns}-g`,
              redis,
              registry: new Registry(),
            },
          ),
      ],
    ];
    for (const [runtime, make] of runtimes) {
      it(`${runtime} on ${what}: start() fails with RF_REDIS_WRONG_KIND and the fix`, async (t) => {
        const ns = uniqueName('kind');
        t.after(
          await createTopics(
            [`${ns}-in`, `${ns}-out`, `${ns}-in.DLT`].map((topic) => ({ topic, partitions: 1 })),
          ),
        );
        const redis = new Redis(url, { maxRetriesPerRequest: 1 });
        t.after(() => redis.disconnect());
        const r = make(redis, ns);
        const err = await r.start().then(
          () => undefined,
          (e: unknown) => e,
        );
        await r.close();
        assert.ok(
          RedfenceError.is(err, 'RF_REDIS_WRONG_KIND'),
          `RF_REDIS_WRONG_KIND, got ${(err as Error)?.message}`,
        );
        assert.match((err as Error).message, message);
        assert.match((err as Error).message, /Redis at 127\.0\.0\.1:\d+ /, 'names the node');
      });
    }
  }

  const BIN = new URL('../../dist/cli/bin.js', import.meta.url).pathname;
  function cli(args: string[]) {
    const base = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !/^(REDIS_|KAFKA_|REDFENCE_)/.test(k)),
    );
    const child = spawn(process.execPath, [BIN, ...args], { env: base, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    return new Promise<{ code: number | null; stderr: string }>((resolve) =>
      child.once('exit', (code) => resolve({ code, stderr })),
    );
  }
  it('redfence inspect (reads only) answers from a replica', async () => {
    const r = await cli(['inspect', uniqueName('none'), 'k', '--redis', REPLICA]);
    assert.equal(r.code, 3, r.stderr); // no state for that key: read from the replica, not refused
  });
  for (const [what, url, message, fix] of KINDS) {
    for (const verb of what === 'a replica' ? (['run'] as const) : (['run', 'inspect'] as const)) {
      it(`redfence ${verb} --redis <${what}>: exit 2 with RF_REDIS_WRONG_KIND and the flag to use`, async (t) => {
        const ns = uniqueName('kindcli');
        const module = join(dir, `${ns}.mjs`);
        writeFileSync(
          module,
          `export default { input: '${ns}-in', output: '${ns}-out', store: '${ns}', reduce: () => ({ state: 1 }) };\n`,
        );
        t.after(
          await createTopics(
            [`${ns}-in`, `${ns}-out`, `${ns}-in.DLT`].map((topic) => ({ topic, partitions: 1 })),
          ),
        );
        const args =
          verb === 'run'
            ? ['run', module, '--brokers', KAFKA_BROKERS, '--redis', url]
            : ['inspect', ns, 'k', '--redis', url];
        const r = await cli(args);
        assert.equal(r.code, 2, r.stderr);
        const last = r.stderr.trim().split('\n').at(-1) ?? '';
        assert.match(last, message);
        assert.match(last, fix);
        assert.match(last, /\[RF_REDIS_WRONG_KIND\]$/);
      });
    }
  }
});
