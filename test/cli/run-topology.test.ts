/**
 * `redfence run examples/fraud.ts` (a module whose default export is a built topology) on the real broker
 * and Redis: the CLI runs it as a TopologyProcessor; the alerts topic (read_committed) equals the reference
 * model's outputs per key and the dead-letter topic holds one record per late order; SIGTERM drains and
 * commits (exit 0). With --workers 2 both workers join the one group and get partitions, the alerts
 * equal the model the same way, each worker's console (--console, on --metrics-port + i) lists both,
 * and SIGTERM ends both (exit 0). With --tracing and a tracer provider registered through
 * NODE_OPTIONS=--import, the batch, Redis step and Kafka step spans are exported and the alerts still
 * equal the model. Flags a topology does not take are refused (exit 2) before any connection.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { Redis } from 'ioredis';
import { Child } from '../../src/harness/index.js';
import type { BuiltTopology } from '../../src/index.js';
import { runModel } from '../../src/topology/model.js';
import { freePort } from '../helpers/child.js';
import { KAFKA_BROKERS, REDIS_URL, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil, produce, readToEnd, waitCommitted } from '../helpers/kafka.js';
import { generateInput, START_MS } from '../topology/scenarios.js';

const CLI = ['--import', 'tsx', 'src/cli/bin.ts', 'run', 'examples/fraud.ts'];
const PARTITIONS = 3;
const ROOT = new URL('../../', import.meta.url).pathname;
const SPANS_SETUP = new URL('./fixtures/otel-spans-to-file.mjs', import.meta.url).pathname;

/** n free consecutive ports: the first of them. */
async function freePorts(n: number): Promise<number> {
  for (;;) {
    const first = await freePort();
    const rest = await Promise.all(Array.from({ length: n - 1 }, (_, i) => portFree(first + i + 1)));
    if (rest.every(Boolean)) return first;
  }
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** GET a page of 127.0.0.1:port; its body ('' when it fails). */
async function get(port: number, path: string): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(30_000) }).catch(
    () => undefined,
  );
  return res === undefined ? '' : res.text();
}

interface Setup {
  ns: string;
  env: Record<string, string>;
  model: ReturnType<typeof runModel>;
}

/** The fraud example's topics, its built topology and the model's outputs over produced input. */
async function setup(t: TestContext, prefix: string): Promise<Setup> {
  const ns = uniqueName(prefix);
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
  // the example's topology, built as the CLI builds it (its environment set first; a query makes each
  // setup load the module again, with its own names)
  Object.assign(process.env, env);
  const built = (await import(`../../examples/fraud.js?${ns}`)).default as BuiltTopology;
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
  return { ns, env, model };
}

/** The alerts topic (read_committed) equals the model per key; one dead letter per late order. */
async function assertModel({ env, model }: Setup): Promise<void> {
  const perKey = (rows: { key: string | null; value: string | null; ts: string }[]) => {
    const m = new Map<string, string[]>();
    for (const r of rows) m.set(r.key ?? '-', [...(m.get(r.key ?? '-') ?? []), `${r.value} @${r.ts}`]);
    return m;
  };
  const alerts = await readToEnd(env.ALERTS_TOPIC as string);
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
}

describe('redfence run <topology module>', { timeout: 180_000 }, () => {
  it('runs examples/fraud.ts: the alerts equal the model per key; SIGTERM drains and commits', async (t) => {
    const s = await setup(t, 'clit');
    const child = spawn(
      process.execPath,
      [...CLI, '--brokers', KAFKA_BROKERS, '--redis', REDIS_URL, '--max-batch-size', '50', '--log', 'warn'],
      { env: { ...process.env, ...s.env }, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr?.on('data', (c) => {
      stderr += c;
    });
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    t.after(() => child.kill('SIGKILL'));
    // the group is the applicationId
    await waitCommitted(s.ns, s.env.ORDERS_TOPIC as string, 120_000);
    child.kill('SIGTERM');
    assert.equal(await exited, 0, stderr);
    await assertModel(s);
  });

  it('--tracing: the batch, Redis step and Kafka step spans go to the provider registered through NODE_OPTIONS; the alerts still equal the model', async (t) => {
    const s = await setup(t, 'clitt');
    const spans = join(mkdtempSync(join(tmpdir(), 'rf-topo-spans-')), 'spans');
    t.after(() => rmSync(dirname(spans), { recursive: true, force: true }));
    const child = spawn(
      process.execPath,
      [
        ...CLI,
        '--brokers',
        KAFKA_BROKERS,
        '--redis',
        REDIS_URL,
        '--max-batch-size',
        '50',
        '--tracing',
        '--log',
        'warn',
      ],
      {
        env: { ...process.env, ...s.env, NODE_OPTIONS: `--import ${SPANS_SETUP}`, RF_SPANS_FILE: spans },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr?.on('data', (c) => {
      stderr += c;
    });
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    t.after(() => child.kill('SIGKILL'));
    await waitCommitted(s.ns, s.env.ORDERS_TOPIC as string, 120_000);
    const names = () => (existsSync(spans) ? readFileSync(spans, 'utf8').split('\n') : []);
    // the Kafka step's span ends right after its commit
    await pollUntil('a Kafka step span', () => names().some((n) => n.startsWith('send')), 10_000, 50);
    child.kill('SIGTERM');
    assert.equal(await exited, 0, stderr);
    assert.ok(names().includes(`process ${s.env.ORDERS_TOPIC}`), names().join(','));
    assert.ok(names().includes('fence apply'), names().join(','));
    await assertModel(s);
  });

  it('--workers 2: both workers of the one group get partitions; the alerts equal the model; SIGTERM ends both (exit 0)', async (t) => {
    const s = await setup(t, 'clitw');
    const instance = `i${s.ns.slice(-6)}`;
    const port = await freePorts(2);
    const child = new Child({
      name: 'topology --workers 2',
      command: process.execPath,
      args: [
        ...CLI,
        '--brokers',
        KAFKA_BROKERS,
        '--redis',
        REDIS_URL,
        '--max-batch-size',
        '20',
        '--workers',
        '2',
        '--instance',
        instance,
        '--session-timeout',
        '6000',
        '--metrics-port',
        String(port),
        '--console',
      ],
      cwd: ROOT,
      env: { ...process.env, ...s.env },
    });
    t.after(() => child.kill());
    await child.log.waitFor('workers started', (l) => l.msg === 'workers started', 90_000);
    for (const i of [0, 1])
      await child.log.waitFor(
        `worker ${i} assigned partitions`,
        (l) =>
          l.instance === `${instance}-${i}` &&
          l.worker === i &&
          l.msg === 'partitions assigned' &&
          Array.isArray(l.partitions) &&
          l.partitions.length > 0,
        90_000,
      );
    await waitCommitted(s.ns, s.env.ORDERS_TOPIC as string, 120_000);
    // --console on each worker's metrics server (port + i): worker 1's lists both workers of the group
    await pollUntil('both workers listed by the console of worker 1', async () => {
      const page = await get(port + 1, '/console/instances');
      return [0, 1].every((i) => page.includes(`<code>${instance}-${i}</code>`));
    });
    assert.match(await get(port, '/console/instances'), new RegExp(`<td>${s.ns}</td>`), 'the group');
    child.signal('SIGTERM');
    const exit = await child.waitExit(60_000);
    assert.equal(exit.code, 0, `supervisor exit ${JSON.stringify(exit)}`);
    for (const i of [0, 1])
      assert.ok(
        child.log.find((l) => l.msg === 'worker exited' && l.worker === i && l.code === 0).length === 1,
        `worker ${i} exited 0`,
      );
    await assertModel(s);
  });

  it('refuses flags a topology does not take, before any connection (exit 2)', () => {
    for (const flags of [
      ['--sweep-every', '3'],
      ['--concurrency', '4'],
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

  it('refuses a topology the Redis runtime does not run, naming the node and the fix, before any connection (exit 2)', () => {
    const r = spawnSync(
      process.execPath,
      [
        ...['--import', 'tsx', 'src/cli/bin.ts', 'run', 'test/cli/fixtures/merged-count.ts'],
        ...['--brokers', '127.0.0.1:1', '--redis', 'redis://127.0.0.1:1'],
      ],
      { encoding: 'utf8', timeout: 60_000 },
    );
    assert.equal(r.status, 2, r.stderr);
    assert.match(
      r.stderr,
      /topology node KSTREAM-AGGREGATE-\d+: .*several topics \(web-orders, app-orders\).*repartition\(\)/,
    );
    assert.match(r.stderr, /\[RF_TOPOLOGY_UNSUPPORTED\]/);
    assert.doesNotMatch(r.stderr, /ECONNREFUSED|connect/i, 'nothing was connected to');
  });
});
