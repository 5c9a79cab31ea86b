/**
 * The metrics address a runtime registers (src/runtime/registry.ts) is the one its metrics server
 * listens on: `redfence run --metrics-port` (bound to 127.0.0.1) registers `127.0.0.1:<port>` (see
 * mount.test.ts and relay-instance.test.ts), `--metrics-host 0.0.0.0` registers the hostname (every
 * interface listens, and the console scrapes it there); IPv6 hosts are bracketed. A --metrics-host that
 * is not an address exits 2 before any connection.
 */
import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { afterEach, describe, it } from 'node:test';
import { liveInstances } from '../../src/console/instances.js';
import { metricsAddressOf } from '../../src/runtime/registry.js';
import { killLeftovers, startProcessorChild } from '../helpers/child.js';
import { runCli } from '../helpers/cli.js';
import { KAFKA_BROKERS, REDIS_URL, standalone, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil } from '../helpers/kafka.js';

afterEach(killLeftovers);

describe('the registered metrics address', () => {
  it('is the bound host and port; every interface: the hostname', () => {
    assert.equal(metricsAddressOf('127.0.0.1', 9464), '127.0.0.1:9464');
    assert.equal(metricsAddressOf('10.1.2.3', 9464), '10.1.2.3:9464');
    assert.equal(metricsAddressOf('localhost', 1), 'localhost:1');
    assert.equal(metricsAddressOf('::1', 9464), '[::1]:9464');
    assert.equal(metricsAddressOf('0.0.0.0', 9464), `${hostname()}:9464`);
    assert.equal(metricsAddressOf('::', 9464), `${hostname()}:9464`);
  });

  it('redfence run --metrics-host 0.0.0.0 registers the hostname, and serves on loopback too', async (t) => {
    const ns = uniqueName('maddr');
    const orders = `${ns}-orders`;
    const drop = await createTopics([
      { topic: orders, partitions: 1 },
      { topic: `${ns}-totals`, partitions: 1 },
      { topic: `${orders}.DLT`, partitions: 1 },
    ]);
    t.after(drop);
    const redis = standalone();
    t.after(() => redis.disconnect());
    const instance = `${ns}-i`;
    const child = await startProcessorChild({
      orders,
      totals: `${ns}-totals`,
      store: ns.replace(/-/g, '_'),
      mode: 'at-least-once',
      group: `${ns}-group`,
      instance,
      log: 'warn',
      env: { REDFENCE_METRICS_HOST: '0.0.0.0' },
    });
    const find = async () => (await liveInstances(redis)).find((i) => i.id === instance);
    await pollUntil('the instance registered', async () => (await find()) !== undefined, 60_000);
    assert.equal((await find())?.metrics, `${hostname()}:${child.metricsPort}`);
    const res = await fetch(`http://127.0.0.1:${child.metricsPort}/metrics`);
    assert.equal(res.status, 200);
    await res.text();
    child.term();
    assert.equal((await child.exited).code, 0);
  });

  it('--metrics-host that is not an address exits 2 before any connection', async () => {
    const r = await runCli([
      'run',
      'examples/customer-totals.ts',
      '--brokers',
      KAFKA_BROKERS,
      '--redis',
      REDIS_URL,
      '--metrics-host',
      '999.1.1.1',
    ]);
    assert.equal(r.code, 2);
    assert.match(r.err, /--metrics-host .*999\.1\.1\.1.*RF_INVALID_OPTIONS/);
  });
});
