/**
 * Redis going away under a running `redfence run` (the built CLI): the client's error events are
 * handled (ioredis prints "[ioredis] Unhandled error event" for each one otherwise), logged once per
 * outage as a JSON line, and SIGTERM still ends the process. The Redis is a private redis-server; once
 * it is killed, a socket on its port that drops every connection counts the client's reconnect attempts.
 * An idle processor (no record comes) still shows the outage on /readyz and in redfence_redis_outage,
 * and its end when Redis is back.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it, type TestContext } from 'node:test';
import { Redis } from 'ioredis';
import { freePort } from '../helpers/child.js';
import { KAFKA_BROKERS, uniqueName } from '../helpers/env.js';
import { createTopics, pollUntil } from '../helpers/kafka.js';

const BIN = new URL('../../dist/cli/bin.js', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'redfence-cli-outage-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.once('exit', (code) => resolve(code));
  });
}

/** A private redis-server on `port`, killed after the test; resolves once it answers. */
async function privateRedis(t: TestContext, port: number): Promise<ChildProcess> {
  const redis = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    { stdio: 'ignore' },
  );
  t.after(() => {
    redis.kill('SIGKILL');
  });
  const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0 });
  probe.on('error', () => undefined);
  await pollUntil(
    'the private redis-server answers',
    () =>
      probe.ping().then(
        (r) => r === 'PONG',
        () => false,
      ),
    10_000,
  );
  probe.disconnect();
  return redis;
}

/** Topics and a one-line processor module for `ns`; returns the module's path. */
async function processorModule(t: TestContext, ns: string): Promise<string> {
  t.after(
    await createTopics([
      { topic: `${ns}-in`, partitions: 1 },
      { topic: `${ns}-out`, partitions: 1 },
      { topic: `${ns}-in.DLT`, partitions: 1 },
    ]),
  );
  const module = join(dir, `${ns}.mjs`);
  writeFileSync(
    module,
    `export default { input: '${ns}-in', output: '${ns}-out', store: '${ns}', reduce: (s, r) => ({ state: r }) };\n`,
  );
  return module;
}

/** `redfence run <module>` on the broker and the Redis at `redisUrl`, as a child; its stderr collected. */
function startRun(
  t: TestContext,
  module: string,
  ns: string,
  redisUrl: string,
  extra: string[],
): { child: ChildProcess; stderr: string } {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(REDIS_|REDFENCE_)/.test(k)));
  const child = spawn(
    process.execPath,
    [
      BIN,
      'run',
      module,
      '--brokers',
      KAFKA_BROKERS,
      '--redis',
      redisUrl,
      '--group',
      ns,
      '--allow-eviction',
      ...extra,
    ],
    { env, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  t.after(() => {
    child.kill('SIGKILL');
  });
  const run = { child, stderr: '' };
  child.stderr?.on('data', (d: Buffer) => {
    run.stderr += d.toString();
  });
  return run;
}

describe('redfence run while Redis is down', { timeout: 90_000 }, () => {
  it('handles every client error event, logs the outage once, and still stops on SIGTERM', async (t) => {
    const port = await freePort();
    const redis = await privateRedis(t, port);
    const ns = uniqueName('cli-outage');
    const module = await processorModule(t, ns);
    const run = startRun(t, module, ns, `redis://:pw-never-shown@127.0.0.1:${port}`, [
      '--shutdown-timeout',
      '5000',
      '--session-timeout',
      '6000',
    ]);
    await pollUntil('the processor started', () => run.stderr.includes('"msg":"processor started"'), 40_000);

    // Redis dies; its port then drops every connection, so each reconnect attempt fails with an error event
    redis.kill('SIGKILL');
    await exited(redis);
    let attempts = 0;
    const dropper: Server = createServer((s) => {
      attempts++;
      s.destroy();
    });
    await new Promise<void>((r) => dropper.listen(port, '127.0.0.1', r));
    t.after(() => new Promise<void>((r) => dropper.close(() => r())));
    await pollUntil('the client tried to reconnect three times', () => attempts >= 3, 30_000);

    assert.doesNotMatch(run.stderr, /Unhandled error event/);
    assert.doesNotMatch(run.stderr, /pw-never-shown/);
    const outage = run.stderr.split('\n').filter((l) => l.includes('"msg":"Redis connection error"'));
    assert.equal(outage.length, 1, run.stderr);
    assert.match(outage[0] as string, /"level":"warn"/);

    // shutting down with Redis gone ends within --shutdown-timeout (5 s): at once or by the deadline
    const sent = Date.now();
    run.child.kill('SIGTERM');
    const code = await exited(run.child);
    assert.ok(code === 0 || code === 1, `exit ${code}`);
    assert.ok(Date.now() - sent < 5000 + 3000, `stopped after ${Date.now() - sent} ms`);
    assert.match(run.stderr, /"msg":"shutting down"/);
    assert.doesNotMatch(run.stderr, /Unhandled error event/);
  });
  it('an idle processor shows the outage on /readyz and redfence_redis_outage, and its end', async (t) => {
    const port = await freePort();
    let redis = await privateRedis(t, port);
    const ns = uniqueName('cli-idle-outage');
    const module = await processorModule(t, ns);
    const metricsPort = await freePort();
    const run = startRun(t, module, ns, `redis://127.0.0.1:${port}`, [
      '--session-timeout',
      '6000',
      '--metrics-port',
      String(metricsPort),
    ]);
    const base = `http://127.0.0.1:${metricsPort}`;
    const ready = () =>
      fetch(`${base}/readyz`).then(
        (r) => r.status,
        () => 0,
      );
    const outageMetric = async () => {
      const text = await (await fetch(`${base}/metrics`)).text();
      return /^redfence_redis_outage(?:\{[^}]*\})? (\d+)/m.exec(text)?.[1];
    };
    await pollUntil('/readyz says ready', async () => (await ready()) === 200, 40_000, 100);
    assert.equal(await outageMetric(), '0');

    // no record comes: only the idle probe can notice
    redis.kill('SIGKILL');
    await exited(redis);
    await pollUntil('/readyz says not ready', async () => (await ready()) === 503, 20_000, 100);
    assert.equal(await outageMetric(), '1');
    assert.match(run.stderr, /"msg":"Redis unavailable: paused consumption, offsets stay put"/);

    redis = await privateRedis(t, port);
    await pollUntil('/readyz says ready again', async () => (await ready()) === 200, 30_000, 100);
    assert.equal(await outageMetric(), '0');
    assert.match(run.stderr, /"msg":"Redis is back: resumed"/);
    run.child.kill('SIGTERM');
    assert.equal(await exited(run.child), 0, run.stderr);
  });
});
