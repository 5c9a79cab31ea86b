/**
 * Brokers that do not answer (a closed port on 127.0.0.1): every runtime's start() and every CLI verb
 * that talks to Kafka fails within bounded time with RF_KAFKA_UNAVAILABLE naming the brokers, the cause
 * librdkafka logged (`Connect to ipv4#127.0.0.1:<port> failed: Connection refused`) and the options to
 * check (--brokers / KAFKA_BROKERS); the CLI exits 1, as for RF_REDIS_UNAVAILABLE. Before, it ended
 * after ~6 s with librdkafka's bare `Local: Timed out` (no code, no brokers, no hint); reconcile said
 * `connect failed: broker transport failure [RF_KAFKA_FATAL]` after 30 s.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { freePort } from '../../src/harness/port.js';
import { createHandler, defineHandler, defineProcessor, Processor, RedfenceError } from '../../src/index.js';
import { createInvalidation, defineInvalidation } from '../../src/kit/index.js';
import { OutboxRelay } from '../../src/outbox/index.js';
import { DATABASE_URL, REDIS_URL, standalone } from '../helpers/env.js';
import { testSchema } from '../outbox/support.js';

const dir = mkdtempSync(join(tmpdir(), 'redfence-unreachable-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** The message every case must give for `brokers`. */
const expected = (brokers: string) =>
  new RegExp(
    `Kafka at ${brokers.replace(/[.]/g, '\\.')} did not answer the [a-z ]+ \\(Connect to ipv4#${brokers.replace(/[.]/g, '\\.')} failed: Connection refused\\); check --brokers / KAFKA_BROKERS`,
  );

describe('Kafka brokers that do not answer', { timeout: 300_000 }, () => {
  let redis: Redis;
  let brokers: string;
  let schema: Awaited<ReturnType<typeof testSchema>>;
  before(async () => {
    redis = standalone();
    brokers = `127.0.0.1:${await freePort()}`; // nothing listens there
    schema = await testSchema();
  });
  after(async () => {
    redis.disconnect();
    await schema?.drop();
  });

  const runtimes: Array<[string, () => { start(): Promise<void>; close(): Promise<void> }]> = [
    [
      'processor',
      () =>
        new Processor({
          definition: defineProcessor({
            input: 'u-in',
            output: 'u-out',
            store: 'u',
            operation: () => ({ op: 'add', by: 1 }),
          }),
          redis,
          groupId: 'u-g',
          kafka: { brokers: [brokers] },
        }),
    ],
    [
      'handler',
      () =>
        createHandler(defineHandler({ input: 'u-in', name: 'h', handle: async () => undefined }), {
          kafka: { brokers: [brokers] },
          groupId: 'u-g',
        }),
    ],
    [
      'invalidation consumer',
      () =>
        createInvalidation(
          defineInvalidation<{ tenant: string; id: string }>({
            input: { topic: 'u-in' },
            name: 'inv',
            cache: 'u',
            keys: 'u:{tenant}:{id}',
          }),
          { kafka: { brokers: [brokers] }, groupId: 'u-g', redis, registry: new Registry() },
        ),
    ],
    [
      'outbox relay',
      () => new OutboxRelay({ databaseUrl: DATABASE_URL, brokers: [brokers], schema: schema.schema }),
    ],
  ];
  for (const [what, make] of runtimes) {
    it(`${what}: start() fails with RF_KAFKA_UNAVAILABLE naming the brokers and the cause`, async () => {
      const r = make();
      const t0 = Date.now();
      const err = await r.start().then(
        () => undefined,
        (e: unknown) => e,
      );
      const took = Date.now() - t0;
      await r.close();
      assert.ok(
        RedfenceError.is(err, 'RF_KAFKA_UNAVAILABLE'),
        `RF_KAFKA_UNAVAILABLE, got ${(err as Error)?.message}`,
      );
      assert.match((err as Error).message, expected(brokers));
      assert.ok(RedfenceError.isRetriable(err), 'retriable: start again once the brokers answer');
      assert.ok(took < 20_000, `failed after ${took} ms`);
    });
  }

  const BIN = new URL('../../dist/cli/bin.js', import.meta.url).pathname;
  function cli(args: string[], env: NodeJS.ProcessEnv = {}) {
    const base = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => !/^(REDIS_|KAFKA_|REDFENCE_|DATABASE_URL)/.test(k)),
    );
    const child = spawn(process.execPath, [BIN, ...args], {
      env: { ...base, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    const t0 = Date.now();
    return new Promise<{ code: number | null; signal: string | null; stderr: string; ms: number }>(
      (resolve) =>
        child.once('exit', (code, signal) => resolve({ code, signal, stderr, ms: Date.now() - t0 })),
    );
  }
  const mod = (name: string, text: string) => {
    const file = join(dir, name);
    writeFileSync(file, text);
    return file;
  };

  const verbs: Array<[string, () => string[], NodeJS.ProcessEnv?]> = [
    [
      'run <processor>',
      () => [
        'run',
        mod(
          'p.mjs',
          "export default { input: 'u-in', output: 'u-out', store: 'u', reduce: () => ({ state: 1 }) };",
        ),
        '--redis',
        REDIS_URL,
      ],
    ],
    ['run <invalidation>', () => ['run', 'examples/quote-invalidation.ts', '--redis', REDIS_URL]],
    ['lag', () => ['lag', '--group', 'u-g', '--samples', '1']],
    ['dlq stats', () => ['dlq', 'stats', '--topic', 'u-in.DLT', '--timeout', '5000']],
    ['reconcile', () => ['reconcile', join(dir, 'p.mjs'), '--redis', REDIS_URL, '--read-timeout', '5000']],
    ['rebuild', () => ['rebuild', join(dir, 'p.mjs'), '--redis', `${REDIS_URL}/9`]],
    ['outbox relay', () => ['outbox', 'relay', '--database-url', DATABASE_URL, '--schema', schema.schema]],
  ];
  for (const [what, args] of verbs) {
    it(`redfence ${what}: exit 1 with RF_KAFKA_UNAVAILABLE, the brokers and --brokers named`, async () => {
      // the brokers through the environment for one verb, the flag for the others: both are named
      const viaEnv = what === 'lag';
      const r = await cli(
        viaEnv ? args() : [...args(), '--brokers', brokers],
        viaEnv ? { KAFKA_BROKERS: brokers } : {},
      );
      assert.equal(r.code, 1, `exit ${r.code}, signal ${r.signal}, after ${r.ms} ms: ${r.stderr}`);
      const last = r.stderr.trim().split('\n').at(-1) ?? '';
      assert.match(last, expected(brokers));
      assert.match(last, /\[RF_KAFKA_UNAVAILABLE\]$/);
      assert.ok(r.ms < 30_000, `exited after ${r.ms} ms`);
    });
  }
});
