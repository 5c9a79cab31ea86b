/**
 * `redfence run --snapshot-interval` and `--tracing` through the CLI on the real broker and Redis: the
 * snapshot topic gets key and marker records covering every committed record, and `redfence rebuild`
 * brings back the store's keys after they are deleted; with --tracing and a tracer provider registered
 * through NODE_OPTIONS=--import, batch spans are exported; without @opentelemetry/api the run fails with
 * one coded line (exit 2); bad values and handler modules are refused before any connection.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { KeySpace } from '../../src/keys/index.js';
import {
  decodeRecord,
  keyFromHash,
  type SnapshotKey,
  type SnapshotMarker,
} from '../../src/processor/snapshot-codec.js';
import { KAFKA_BROKERS, REDIS_URL, uniqueName } from '../helpers/env.js';
import { committedOffsets, createTopics, kafka, pollUntil, produce, readToEnd } from '../helpers/kafka.js';

const ROOT = new URL('../..', import.meta.url).pathname;
const SPANS_SETUP = new URL('./fixtures/otel-spans-to-file.mjs', import.meta.url).pathname;

interface Run {
  exited: Promise<number | null>;
  stderr: () => string;
  kill: (sig: NodeJS.Signals) => void;
}

/** The CLI from source, with a clean Redfence environment plus `env`. */
function cli(args: string[], env: NodeJS.ProcessEnv = {}): Run {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(REDIS_|KAFKA_|REDFENCE_|NODE_OPTIONS$)/.test(k)),
  );
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/bin.ts', ...args], {
    cwd: ROOT,
    env: { ...base, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const exited = new Promise<number | null>((r) =>
    child.on('exit', (code) => {
      clearTimeout(timer);
      r(code);
    }),
  );
  return { exited, stderr: () => stderr, kill: (sig) => child.kill(sig) };
}

const dir = mkdtempSync(join(tmpdir(), 'rf-run-flags-'));
/** A TCP server that accepts and never answers: a connection attempt would be seen. */
let silent: Server;
let silentPort = 0;
const connections: Socket[] = [];
before(async () => {
  silent = createServer((s) => connections.push(s));
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  silentPort = (silent.address() as { port: number }).port;
});
after(async () => {
  for (const s of connections) s.destroy();
  await new Promise<void>((r) => silent.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

/** A processor module summing each customer's amounts. */
function totalsModule(ns: string): { file: string; store: string; input: string; output: string } {
  const store = ns.replace(/-/g, '_');
  const input = `${ns}-orders`;
  const output = `${ns}-totals`;
  const file = join(dir, `${ns}.mjs`);
  writeFileSync(
    file,
    `export default { input: ${JSON.stringify(input)}, output: ${JSON.stringify(output)}, store: ${JSON.stringify(store)}, reduce: (s, o) => ({ state: { total: (s?.total ?? 0) + o.amount } }) };\n`,
  );
  return { file, store, input, output };
}

async function topicsFor(m: { input: string; output: string }, partitions: number) {
  return createTopics([
    { topic: m.input, partitions },
    { topic: m.output, partitions },
    { topic: `${m.input}.DLT`, partitions: 1 },
  ]);
}

const orders = (n: number, keys: number) =>
  Array.from({ length: n }, (_, i) => ({
    key: `c-${i % keys}`,
    value: JSON.stringify({ amount: i + 1 }),
  }));

const sum = (m: Map<number, number>) => [...m.values()].reduce((s, x) => s + x, 0);

describe('redfence run --snapshot-interval, --tracing', { timeout: 120_000 }, () => {
  it('bad snapshot values and snapshot flags with a handler are refused before any connection', async () => {
    const m = totalsModule(uniqueName('snapbad'));
    const at = ['--brokers', `127.0.0.1:${silentPort}`, '--redis', `redis://127.0.0.1:${silentPort}`];
    const cases: Array<[string[], RegExp]> = [
      [[m.file, '--snapshot-interval', '50'], /--snapshot-interval must be an integer >= 100/],
      [[m.file, '--snapshot-interval', '500', '--snapshot-rate', '-1'], /--snapshot-rate must be/],
      [[m.file, '--snapshot-interval', '500', '--snapshot-topic', 'a b'], /--snapshot-topic must be/],
      [
        [m.file, '--snapshot-topic', 'snap'],
        /--snapshot-topic applies to snapshots; add --snapshot-interval/,
      ],
      [
        ['examples/order-webhook.ts', '--snapshot-interval', '500'],
        /--snapshot-interval applies to processors, and the module exports a handler/,
      ],
    ];
    for (const [args, expected] of cases) {
      const r = cli(['run', ...args, ...at]);
      assert.equal(await r.exited, 2, r.stderr());
      assert.match(r.stderr(), /^[^\n]+\[RF_INVALID_OPTIONS\]\n$/, r.stderr());
      assert.match(r.stderr(), expected);
    }
    assert.equal(connections.length, 0, 'nothing connected');
  });

  it('writes key and marker records to the snapshot topic; rebuild restores the deleted keys', async (t) => {
    const ns = uniqueName('clisnap');
    const m = totalsModule(ns);
    const snapTopic = `${ns}-snap`;
    const group = `${ns}-g`;
    const partitions = 2;
    t.after(await topicsFor(m, partitions));
    t.after(async () => {
      const admin = kafka.admin();
      await admin.connect();
      await admin.deleteTopics({ topics: [snapTopic] }).catch(() => undefined);
      await admin.disconnect();
    });
    const redis = new Redis(REDIS_URL);
    const storeKeys = () => redis.keys(`rf:{${m.store}:*`);
    t.after(async () => {
      const keys = await storeKeys();
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    });
    const N = 40;
    await produce(m.input, orders(N, 6));
    const common = ['--brokers', KAFKA_BROKERS, '--redis', REDIS_URL, '--group', group];
    const run = cli([
      'run',
      m.file,
      ...common,
      '--snapshot-interval',
      '500',
      '--snapshot-topic',
      snapTopic,
      '--snapshot-rate',
      '1000',
      '--session-timeout',
      '6000',
      '--log',
      'warn',
    ]);
    t.after(() => run.kill('SIGKILL'));
    await pollUntil(
      'every order committed',
      async () => sum(await committedOffsets(group, m.input)) === N,
      60_000,
      200,
    );
    const committed = await committedOffsets(group, m.input);
    // a pass begun after the last commit: a marker per partition at its committed offset
    let keys = new Map<string, SnapshotKey>();
    let markers = new Map<number, SnapshotMarker>();
    await pollUntil(
      'markers at the committed offsets',
      async () => {
        keys = new Map();
        markers = new Map();
        for (const r of await readToEnd(snapTopic, 30_000)) {
          const d = decodeRecord(Buffer.from(r.key ?? ''), r.value === null ? null : Buffer.from(r.value));
          if (d?.kind === 'key') keys.set(d.key.redisKey, d.key);
          if (d?.kind === 'marker') markers.set(d.marker.partition, d.marker);
        }
        return [...committed].every(([p, c]) => markers.get(p)?.offset === c);
      },
      30_000,
      500,
    );
    run.kill('SIGTERM');
    assert.equal(await run.exited, 0, run.stderr());
    assert.equal(keys.size, 6, 'a key record per customer');
    assert.equal(
      [...markers.values()].reduce((s, x) => s + x.keys, 0) >= 6,
      true,
      'the markers count the key records',
    );
    for (const k of keys.values()) assert.equal(k.asOf <= (committed.get(k.partition) ?? 0), true);

    // the store's state as it stands, then every key of the store deleted
    const before = new Map<string, SnapshotKey | null>();
    for (const name of keys.keys()) before.set(name, keyFromHash(name, await redis.hgetallBuffer(name), 0));
    // each customer's total is the sum of its own orders (one total over all keys cannot see an order
    // counted under the wrong key, or one lost beside another counted twice)
    const space = new KeySpace({ store: m.store });
    const want = new Map<string, number>();
    for (const o of orders(N, 6))
      want.set(space.state(o.key), (want.get(space.state(o.key)) ?? 0) + JSON.parse(o.value).amount);
    assert.deepEqual([...before.keys()].sort(), [...want.keys()].sort(), 'a state key per customer');
    for (const [name, total] of want) {
      const state = JSON.parse(before.get(name)?.value?.toString() ?? 'null') as { total: number } | null;
      assert.equal(state?.total, total, `${name}: the sum of its orders`);
    }
    await redis.del(...(await storeKeys()));
    assert.deepEqual(await storeKeys(), []);

    const rebuild = cli(['rebuild', m.file, ...common, '--snapshot-topic', snapTopic, '--json']);
    assert.equal(await rebuild.exited, 0, rebuild.stderr());
    for (const [name, was] of before) {
      const now = keyFromHash(name, await redis.hgetallBuffer(name), 0);
      assert.ok(now !== null && was !== null, `${name} restored`);
      assert.deepEqual(now.value, was.value, `${name}: its value`);
      assert.equal(now.offset, was.offset, `${name}: its fence`);
      assert.equal(now.partition, was.partition);
    }
  });

  it('--tracing: batch spans go to the tracer provider registered through NODE_OPTIONS', async (t) => {
    const ns = uniqueName('clitrace');
    const m = totalsModule(ns);
    const group = `${ns}-g`;
    t.after(await topicsFor(m, 1));
    const redis = new Redis(REDIS_URL);
    t.after(async () => {
      const keys = await redis.keys(`rf:{${m.store}:*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    });
    const spans = join(dir, `${ns}.spans`);
    const N = 20;
    await produce(m.input, orders(N, 4));
    const run = cli(
      [
        'run',
        m.file,
        '--brokers',
        KAFKA_BROKERS,
        '--redis',
        REDIS_URL,
        '--group',
        group,
        '--tracing',
        '--log',
        'warn',
      ],
      { NODE_OPTIONS: `--import ${SPANS_SETUP}`, RF_SPANS_FILE: spans },
    );
    t.after(() => run.kill('SIGKILL'));
    const names = () => (existsSync(spans) ? readFileSync(spans, 'utf8').split('\n') : []);
    await pollUntil(
      'a batch span and its Kafka step span exported',
      () => names().includes(`process ${m.input}`) && names().some((n) => n.startsWith('send')),
      60_000,
      100,
    );
    run.kill('SIGTERM');
    assert.equal(await run.exited, 0, run.stderr());
    assert.ok(names().includes('fence apply'), names().join(','));
    assert.equal(sum(await committedOffsets(group, m.input)), N);
  });

  it('--tracing without @opentelemetry/api: one coded line naming the install, exit 2, nothing connected', async () => {
    const m = totalsModule(uniqueName('clinoapi'));
    // a resolve hook that hides the API, as in a project that did not install it
    const hook = `export async function resolve(s, c, next) { if (s === '@opentelemetry/api') throw new Error('Cannot find package @opentelemetry/api'); return next(s, c); }`;
    const register = `import { register } from 'node:module'; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hook)}`)});`;
    const setup = join(dir, 'hide-otel-api.mjs');
    writeFileSync(setup, register);
    const at = ['--brokers', `127.0.0.1:${silentPort}`, '--redis', `redis://127.0.0.1:${silentPort}`];
    const r = cli(['run', m.file, ...at, '--tracing'], { NODE_OPTIONS: `--import ${setup}` });
    assert.equal(await r.exited, 2, r.stderr());
    assert.match(
      r.stderr(),
      /^redfence run: [^\n]*npm install @opentelemetry\/api \[RF_INVALID_OPTIONS\]\n$/,
      r.stderr(),
    );
    assert.equal(connections.length, 0, 'nothing connected');
  });
});
