import assert from 'node:assert/strict';
import { Agent, request } from 'node:http';
import { createServer } from 'node:net';
import { after, describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { RedfenceError } from '../../src/errors/index.js';
import {
  HEALTH_PARTS,
  HealthState,
  type MetricsServer,
  RedfenceMetrics,
  startMetricsServer,
} from '../../src/metrics/index.js';

const HOST = '127.0.0.1';

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function get(port: number, path: string, method = 'GET', agent: Agent | false = false): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ host: HOST, port, path, method, agent, timeout: 2_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`timeout on ${method} ${path}`)));
    req.on('error', reject);
    req.end();
  });
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, HOST, () => probe.close(() => resolve(true)));
  });
}

describe('startMetricsServer', { timeout: 20_000 }, () => {
  let now = 0;
  const health = new HealthState({ clock: () => now });
  const metrics = new RedfenceMetrics({ registry: new Registry() });
  let server: MetricsServer;
  const started: MetricsServer[] = [];

  after(async () => {
    await Promise.all(started.map((s) => s.close()));
  });

  it('listens on port 0 and reports the actual port', async () => {
    server = await startMetricsServer({ metrics, health, port: 0, maxStallMs: 1_000 });
    started.push(server);
    assert.ok(Number.isInteger(server.port) && server.port > 0);
  });

  it('serves /metrics with the registry content type', async () => {
    metrics.verdict('orders', 1, 'applied', 7);
    const reply = await get(server.port, '/metrics');
    assert.equal(reply.status, 200);
    assert.equal(reply.headers['content-type'], metrics.registry.contentType);
    assert.match(String(reply.headers['content-type']), /^text\/plain; version=0\.0\.4/);
    assert.ok(
      reply.body.includes('redfence_verdicts_total{topic="orders",partition="1",verdict="applied"} 7'),
    );
    assert.equal((await get(server.port, '/metrics?x=1')).status, 200);
  });

  it('answers /livez by the injected clock: 503 when stalled, 200 after progress', async () => {
    now = 1_000; // construction was at 0; exactly maxStallMs ago is still live
    const atLimit = await get(server.port, '/livez');
    assert.equal(atLimit.status, 200);
    assert.equal(atLimit.body, '{"live":true}');
    now = 1_001;
    const stalled = await get(server.port, '/livez');
    assert.equal(stalled.status, 503);
    assert.deepEqual(JSON.parse(stalled.body), { live: false });
    assert.match(String(stalled.headers['content-type']), /^application\/json/);
    health.markProgress();
    const live = await get(server.port, '/livez');
    assert.equal(live.status, 200);
    assert.equal(live.body, '{"live":true}');
  });

  it('answers /readyz 503 until every part is ready, then 200, with the snapshot', async () => {
    for (const part of HEALTH_PARTS) {
      const reply = await get(server.port, '/readyz');
      assert.equal(reply.status, 503);
      assert.equal(JSON.parse(reply.body).ready, false);
      health.setReady(part, true);
    }
    const ready = await get(server.port, '/readyz');
    assert.equal(ready.status, 200);
    assert.deepEqual(JSON.parse(ready.body), {
      ready: true,
      parts: { group: true, scripts: true, redis: true, kafka: true },
      lastProgressAt: 1_001,
    });
    health.setReady('redis', false);
    const notReady = await get(server.port, '/readyz');
    assert.equal(notReady.status, 503);
    assert.equal(JSON.parse(notReady.body).parts.redis, false);
  });

  it('answers 404 for unknown paths and 405 for other methods', async () => {
    assert.equal((await get(server.port, '/')).status, 404);
    assert.equal((await get(server.port, '/metricsx')).status, 404);
    assert.equal((await get(server.port, '/nope', 'POST')).status, 404);
    for (const method of ['POST', 'PUT', 'DELETE', 'HEAD']) {
      const reply = await get(server.port, '/metrics', method);
      assert.equal(reply.status, 405, method);
      assert.equal(reply.headers.allow, 'GET');
    }
  });

  it('answers 500 (and keeps serving) when the registry fails to collect', async () => {
    const registry = new Registry();
    const broken = new RedfenceMetrics({ registry });
    const { Gauge } = await import('prom-client');
    new Gauge({
      name: 'broken_gauge',
      help: 'throws on collect',
      registers: [registry],
      collect() {
        throw new Error('collect failed');
      },
    });
    const s = await startMetricsServer({ metrics: broken, health, port: 0 });
    started.push(s);
    assert.equal((await get(s.port, '/metrics')).status, 500);
    assert.equal((await get(s.port, '/livez')).status, 200);
  });

  it('close() frees the port, does not wait for keep-alive clients, and is idempotent', async () => {
    const s = await startMetricsServer({ metrics, health, port: 0 });
    started.push(s);
    const agent = new Agent({ keepAlive: true });
    try {
      assert.equal((await get(s.port, '/metrics', 'GET', agent)).status, 200);
      const first = s.close();
      assert.equal(s.close(), first);
      await first;
      await s.close();
    } finally {
      agent.destroy();
    }
    await assert.rejects(get(s.port, '/metrics'), /ECONNREFUSED/);
    assert.equal(await canListen(s.port), true);
    // The freed port can be listened on again by a new server.
    const again = await startMetricsServer({ metrics, health, port: s.port });
    started.push(again);
    assert.equal(again.port, s.port);
    assert.equal((await get(again.port, '/livez')).status, 200);
  });

  it('rejects with RF_INVALID_OPTIONS when the port is taken or options are bad', async () => {
    await assert.rejects(startMetricsServer({ metrics, health, port: server.port }), (err) => {
      assert.ok(RedfenceError.is(err, 'RF_INVALID_OPTIONS'));
      assert.equal((err.cause as NodeJS.ErrnoException).code, 'EADDRINUSE');
      return true;
    });
    const invalid = (err: unknown) => RedfenceError.is(err, 'RF_INVALID_OPTIONS');
    await assert.rejects(startMetricsServer({ metrics, health, port: -1 }), invalid);
    await assert.rejects(startMetricsServer({ metrics, health, port: 70_000 }), invalid);
    await assert.rejects(startMetricsServer({ metrics, health, port: 0, maxStallMs: 0 }), invalid);
    await assert.rejects(startMetricsServer({ metrics, health, port: 0, host: '' }), invalid);
  });
});
