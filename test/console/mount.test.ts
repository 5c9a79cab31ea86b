/**
 * The console on a processor's own metrics server (`redfence run --console`), against the real broker
 * and Redis: the metrics port serves /console (instances, the lag of its own group, the inspector on its
 * store, the shipped CSS), every link under /console, with the console's security rules (CSP, Host
 * check) and read-only: action POSTs are refused (403). /metrics still answers beside it. The metrics
 * server's mount option refuses a bad prefix; --console without --metrics-port, or on a handler without
 * Redis, exits 2.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { request } from 'node:http';
import { after, afterEach, describe, it } from 'node:test';
import { CSP } from '../../src/console/security.js';
import { HealthState, RedfenceMetrics, startMetricsServer } from '../../src/index.js';
import { killLeftovers, startProcessorChild } from '../helpers/child.js';
import { runCli } from '../helpers/cli.js';
import { KAFKA_BROKERS, REDIS_URL, standalone, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil, produce, waitCommitted } from '../helpers/kafka.js';

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function call(
  port: number,
  path: string,
  o: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, method: o.method ?? 'GET', headers: o.headers ?? {} },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.setTimeout(30_000, () => req.destroy(new Error(`${path} took over 30 s`)));
    req.on('error', reject);
    req.end(o.body);
  });
}

const ROOT = new URL('../..', import.meta.url).pathname;

afterEach(killLeftovers);

describe('the console on a processor metrics server (redfence run --console)', () => {
  it('serves instances, its group lag and the inspector under /console, read-only', async (t) => {
    const ns = uniqueName('mount');
    const orders = `${ns}-orders`;
    const totals = `${ns}-totals`;
    const store = ns.replace(/-/g, '_');
    const group = `${ns}-group`;
    const instance = `${ns}-i`;
    const drop = await createTopics([
      { topic: orders, partitions: 3 },
      { topic: totals, partitions: 3 },
      { topic: `${orders}.DLT`, partitions: 3 },
    ]);
    t.after(drop);
    const redis = standalone();
    t.after(async () => {
      const keys = await redis.keys(`rf:*${store}*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    });
    await produce(orders, [
      { key: 'c-7', value: JSON.stringify({ customer: 'c-7', amount: 250 }) },
      { key: 'c-7', value: JSON.stringify({ customer: 'c-7', amount: 5 }) },
      { key: 'c-8', value: JSON.stringify({ customer: 'c-8', amount: 1 }) },
    ]);
    const child = await startProcessorChild({
      orders,
      totals,
      store,
      mode: 'exactly-once',
      group,
      instance,
      log: 'warn',
      // a Prometheus nobody listens on (port 9 is discard, closed here): shown unreachable, the
      // credentials never shown
      env: {
        REDFENCE_METRICS_CONSOLE: '1',
        REDFENCE_METRICS_CONSOLE_PROMETHEUS: 'http://op:mount-secret-31@127.0.0.1:9/',
      },
    });
    await waitCommitted(group, orders);
    const port = child.metricsPort;

    const root = await call(port, '/console');
    assert.equal(root.status, 302);
    assert.equal(root.headers.location, '/console/instances');

    // the registry entry appears with the first heartbeat after start
    let instances: Reply = { status: 0, headers: {}, body: '' };
    await pollUntil('the instance listed', async () => {
      instances = await call(port, '/console/instances');
      return instances.body.includes(`<code>${instance}</code>`);
    });
    assert.equal(instances.status, 200);
    assert.equal(instances.headers['content-security-policy'], CSP);
    assert.match(instances.body, new RegExp(`<td>${group}</td>`));
    // registered with the address the metrics server listens on (127.0.0.1), not the hostname
    assert.match(instances.body, new RegExp(`<td>127\\.0\\.0\\.1:${port}</td>`));
    assert.match(instances.body, /href="\/console\/lag"/);
    assert.match(instances.body, /href="\/console\/assets\/console.css"/);
    assert.doesNotMatch(instances.body, /href="\/(lag|instances|assets)/, 'every link under /console');
    assert.match(instances.body, /read-only/);
    assert.match(
      instances.body,
      /data-field="prometheus" data-state="unreachable">Prometheus at <code>http:\/\/127\.0\.0\.1:9\/<\/code> unreachable/,
      '--console-prometheus reaches the mount',
    );
    assert.doesNotMatch(instances.body, /mount-secret-31/);

    let lag: Reply = { status: 0, headers: {}, body: '' };
    await pollUntil('the group lag sampled', async () => {
      lag = await call(port, '/console/lag');
      return new RegExp(`<td>${orders}</td><td class="num">2</td>`).test(lag.body);
    });
    assert.match(lag.body, new RegExp(`group ${group}`));

    const inspected = await call(port, `/console/inspector?store=${store}&key=c-7`);
    assert.equal(inspected.status, 200);
    assert.match(inspected.body, /data-field="offset">\d+</);
    assert.doesNotMatch(inspected.body, /"total"/, 'the state value is masked');

    const css = await call(port, '/console/assets/console.css');
    assert.equal(css.status, 200);
    assert.match(String(css.headers['content-type']), /text\/css/);

    const refused = await call(port, '/console/actions/redrive', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-redfence-token': 'x'.repeat(20) },
      body: `topic=${orders}.DLT&dry-run=0`,
    });
    assert.equal(refused.status, 403);
    assert.match(refused.body, /actions are off/);
    const otherHost = await call(port, '/console/instances', { headers: { host: 'attacker.example' } });
    assert.equal(otherHost.status, 403);
    assert.equal((await call(port, '/consolex')).status, 404);

    const metrics = await call(port, '/metrics');
    assert.equal(metrics.status, 200);
    assert.match(metrics.body, /redfence_/);
    child.term();
    assert.equal((await child.exited).code, 0);
  });

  it('refuses a mount prefix that is not /name or is a metrics route', async () => {
    const mount = (prefix: string) => ({ prefix, handle: () => undefined, close: async () => undefined });
    for (const prefix of ['console', '/console/', '/metrics', '/a b'])
      await assert.rejects(
        startMetricsServer({
          metrics: new RedfenceMetrics(),
          health: new HealthState(),
          port: 0,
          mount: mount(prefix),
        }),
        (e: Error & { code?: string }) => e.code === 'RF_INVALID_OPTIONS' && /mount\.prefix/.test(e.message),
        prefix,
      );
  });

  it('closes the mount with the server', async () => {
    let closed = 0;
    let bound = '';
    const server = await startMetricsServer({
      metrics: new RedfenceMetrics(),
      health: new HealthState(),
      port: 0,
      mount: {
        prefix: '/hello',
        listening: (host, port) => {
          bound = `${host}:${port}`;
        },
        handle: (_req, res) => res.end('hello\n'),
        close: async () => {
          closed++;
        },
      },
    });
    assert.equal(bound, `127.0.0.1:${server.port}`);
    assert.equal((await call(server.port, '/hello/x')).body, 'hello\n');
    assert.equal((await call(server.port, '/hellox')).status, 404);
    await Promise.all([server.close(), server.close()]);
    assert.equal(closed, 1);
  });

  it('a handler without Redis refuses --console (exit 2) before any connection', () => {
    const env = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !/^(REDIS_|REDFENCE_|KAFKA_)/.test(k)),
    );
    const r = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        'src/cli/bin.ts',
        'run',
        'examples/order-webhook.ts',
        '--brokers',
        '127.0.0.1:1',
        '--metrics-port',
        '1',
        '--console',
      ],
      { cwd: ROOT, env, encoding: 'utf8', timeout: 60_000 },
    );
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /--console reads the registry and state in Redis.*RF_INVALID_OPTIONS/);
  });

  it('--console without --metrics-port exits 2 before any connection', async () => {
    const r = await runCli([
      'run',
      'examples/customer-totals.ts',
      '--brokers',
      KAFKA_BROKERS,
      '--redis',
      REDIS_URL,
      '--console',
    ]);
    assert.equal(r.code, 2);
    assert.match(r.err, /--console .*--metrics-port.*RF_INVALID_OPTIONS/);
  });

  it('--console-prometheus without --console, or not an http(s) URL, exits 2 before any connection', async () => {
    const base = ['run', 'examples/customer-totals.ts', '--brokers', KAFKA_BROKERS, '--redis', REDIS_URL];
    const alone = await runCli([
      ...base,
      '--metrics-port',
      '9999',
      '--console-prometheus',
      'http://127.0.0.1:9090/',
    ]);
    assert.equal(alone.code, 2);
    assert.match(alone.err, /--console-prometheus applies to --console.*RF_INVALID_OPTIONS/);
    const bad = await runCli([
      ...base,
      '--metrics-port',
      '9999',
      '--console',
      '--console-prometheus',
      'ftp://op:pw-77@127.0.0.1/',
    ]);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /--console-prometheus must be an http:\/\/ or https:\/\/ URL.*RF_INVALID_OPTIONS/);
    assert.doesNotMatch(bad.err, /pw-77/);
  });
});

after(killLeftovers);
