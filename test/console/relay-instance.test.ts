/**
 * The outbox relay in the instance registry (real PostgreSQL, broker and Redis): given a Redis, a
 * running relay is listed by the console's Instances view as kind `relay` with its outbox and mode, and
 * its entry goes when it closes; without one it never registers (the relay needs no Redis otherwise).
 * `redfence outbox relay --registry-redis` registers with its metrics address, so the Processing view
 * shows its backlog, and leaves the registry on SIGTERM.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { type AddressInfo, createServer } from 'node:net';
import { describe, it } from 'node:test';
import { liveInstances } from '../../src/console/instances.js';
import { startConsole } from '../../src/console/server.js';
import { OutboxRelay } from '../../src/outbox/index.js';
import { DATABASE_URL, KAFKA_BROKERS, REDIS_URL, standalone, uniqueName } from '../helpers/env.js';
import { pollUntil } from '../helpers/kafka.js';
import { deleteTopics, testSchema } from '../outbox/support.js';

const BIN = new URL('../../src/cli/bin.ts', import.meta.url).pathname;

describe('outbox relay in the instance registry', () => {
  it('registered while running with its outbox and mode, gone once closed', async (t) => {
    const s = await testSchema();
    t.after(() => s.drop());
    const prefix = uniqueName('console-relay');
    t.after(() => deleteTopics([`${prefix}.progress`]));
    const redis = standalone();
    const noop = () => undefined;
    const relay = (relayId: string, withRedis: boolean) =>
      new OutboxRelay({
        databaseUrl: DATABASE_URL,
        brokers: KAFKA_BROKERS.split(','),
        schema: s.schema,
        mode: 'at-least-once',
        relayId,
        topicTemplate: `${prefix}.\${aggregatetype}`,
        progressTopic: `${prefix}.progress`,
        pollIntervalMs: 200,
        leaseMs: 3000,
        logger: { debug: noop, info: noop, warn: noop, error: noop },
        ...(withRedis ? { redis } : {}),
      });
    assert.throws(
      () => new OutboxRelay({ databaseUrl: DATABASE_URL, brokers: ['b:9092'], redis: {} as never }),
      (e: Error & { code?: string }) => e.code === 'RF_INVALID_OPTIONS' && /relay\.redis/.test(e.message),
    );
    const registered = relay(uniqueName('relay'), true);
    const unregistered = relay(uniqueName('relay'), false);
    t.after(() => Promise.all([registered.close(), unregistered.close()]));
    const c = await startConsole({
      redis,
      kafka: { brokers: KAFKA_BROKERS.split(','), clientId: 'console-relay-test' },
      port: 0,
    });
    t.after(() => c.close());
    t.after(() => redis.disconnect()); // after hooks run in order: the others use it first
    await Promise.all([registered.start(), unregistered.start()]);
    const find = async (id: string) => (await liveInstances(redis)).find((i) => i.id === id);
    await pollUntil(
      'the relay registered',
      async () => (await find(registered.relayId)) !== undefined,
      15_000,
    );
    const row = await find(registered.relayId);
    assert.equal(row?.kind, 'relay');
    assert.equal(row?.module, `${s.schema}.redfence_outbox`);
    assert.equal(row?.mode, 'at-least-once');
    const page = await (await fetch(`${c.url}instances`)).text();
    assert.match(page, new RegExp(`<td><code>${registered.relayId}</code></td><td>relay</td>`));
    assert.equal(await find(unregistered.relayId), undefined, 'no Redis, no entry');
    await registered.close();
    assert.equal(await find(registered.relayId), undefined, 'gone once closed');
  });

  it('redfence outbox relay --registry-redis: listed with its metrics address, its backlog on Processing', async (t) => {
    const s = await testSchema();
    t.after(() => s.drop());
    const prefix = uniqueName('console-cli-relay');
    const redis = standalone();
    const port = await freePort();
    const relayId = uniqueName('cli-relay');
    const base = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !/^(DATABASE_URL|KAFKA_|REDFENCE_|REDIS_)/.test(k)),
    );
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        BIN,
        'outbox',
        'relay',
        '--schema',
        s.schema,
        '--brokers',
        KAFKA_BROKERS,
        '--mode',
        'at-least-once',
        '--relay-id',
        relayId,
        '--topic-template',
        `${prefix}.\${aggregatetype}`,
        '--poll-interval',
        '200',
        '--metrics-port',
        String(port),
        '--log',
        'error',
      ],
      {
        env: { ...base, DATABASE_URL, REDFENCE_REGISTRY_REDIS: REDIS_URL },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    let err = '';
    child.stderr?.on('data', (d: Buffer) => {
      err += d.toString();
    });
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    t.after(async () => {
      if (child.exitCode === null) child.kill('SIGKILL');
      await exited;
    });
    const c = await startConsole({
      redis,
      kafka: { brokers: KAFKA_BROKERS.split(','), clientId: 'console-cli-relay-test' },
      port: 0,
    });
    t.after(() => c.close());
    t.after(() => redis.disconnect());
    const find = async () => (await liveInstances(redis)).find((i) => i.id === relayId);
    await pollUntil('the CLI relay registered', async () => (await find()) !== undefined, 30_000);
    const row = await find();
    assert.equal(row?.kind, 'relay');
    assert.equal(row?.metrics, `127.0.0.1:${port}`, 'the address it listens on (loopback)');
    const page = await (await fetch(`${c.url}processing`)).text();
    const section =
      new RegExp(`<section data-instance="${relayId}"(.*?)</section>`, 's').exec(page)?.[1] ?? '';
    assert.match(section, /data-field="outbox-pending">\d+</, `${section}\n${err}`);
    child.kill('SIGTERM');
    assert.equal(await exited, 0, err);
    assert.equal(await find(), undefined, 'gone once stopped');
  });
});

/** A port nothing listens on now (taken from the kernel, then freed). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}
