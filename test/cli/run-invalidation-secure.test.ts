/**
 * `redfence run examples/quote-invalidation.ts` on the secured broker (SCRAM-SHA-512 over SASL_SSL, the
 * CA given, the password in REDFENCE_KAFKA_PASSWORD): with the right password every entry its events
 * name is gone and every offset committed, SIGTERM exits 0; with a wrong one it exits 2 with
 * RF_KAFKA_AUTH from the auth watch (not a connect timeout), the password never printed. (It used to time out after ~6 s with
 * `Local: Timed out`, exit 1, in both cases: the consumer connected without its security settings.)
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { Redis } from 'ioredis';
import { KitKeys } from '../../src/keys/kit.js';
import { Cache } from '../../src/kit/index.js';
import { REDIS_URL, uniqueName } from '../helpers/env.js';
import { pollUntil } from '../helpers/kafka.js';
import { createSecureTopics, LISTENERS, produceSecure, secret, tlsFile } from '../helpers/secure-kafka.js';

const CLI = ['--import', 'tsx', 'src/cli/bin.ts', 'run', 'examples/quote-invalidation.ts'];
const SCRAM = [
  '--brokers',
  LISTENERS.saslSsl,
  '--kafka-sasl-mechanism',
  'SCRAM-SHA-512',
  '--kafka-sasl-username',
  'redfence',
  '--kafka-ca',
  tlsFile('ca.crt'),
];

function run(args: string[], env: NodeJS.ProcessEnv) {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(REDIS_|KAFKA_|REDFENCE_)/.test(k)),
  );
  const child = spawn(process.execPath, [...CLI, ...args], {
    env: { ...base, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, output: () => out, exited };
}

async function committedTotal(groupId: string, topic: string): Promise<number> {
  const admin = new KafkaJS.Kafka({
    kafkaJS: { brokers: [LISTENERS.internal], logLevel: KafkaJS.logLevel.NOTHING },
  }).admin();
  await admin.connect();
  try {
    const [t] = await admin.fetchOffsets({ groupId, topics: [topic] });
    return (t?.partitions ?? []).reduce((s, p) => s + Math.max(0, Number(p.offset)), 0);
  } finally {
    await admin.disconnect();
  }
}

describe('redfence run <invalidation module> on the secured Kafka', { timeout: 120_000 }, () => {
  it('SCRAM-SHA-512 over SASL_SSL: every entry invalidated, every offset committed, exit 0', async (t) => {
    const topic = uniqueName('secinvcli');
    const group = `${topic}-g`;
    const cacheName = uniqueName('quotes');
    t.after(
      await createSecureTopics([
        { topic, partitions: 2 },
        { topic: `${topic}.DLT`, partitions: 1 },
      ]),
    );
    const redis = new Redis(REDIS_URL);
    t.after(() => redis.disconnect());
    const cache = new Cache<number>({ redis, name: cacheName, ttlMs: 600_000 });
    t.after(() => cache.close());
    const N = 40;
    for (let i = 0; i < N; i++) await cache.get({ tenant: 'acme', id: `q${i}` }, () => i);
    const keys = new KitKeys('cache', cacheName);
    const left = async () => {
      let n = 0;
      for (let i = 0; i < N; i++)
        n += await redis.exists(keys.parts({ tenant: 'acme', id: `q${i}` }, 'v')[0] as string);
      return n;
    };
    assert.equal(await left(), N);
    await produceSecure(
      topic,
      Array.from({ length: N }, (_, i) => ({
        key: `q${i}`,
        value: JSON.stringify({ tenantId: 'acme', quoteId: `q${i}` }),
      })),
    );
    const r = run(
      [...SCRAM, '--redis', REDIS_URL, '--group', group, '--commit-interval', '100', '--log', 'warn'],
      { REDFENCE_KAFKA_PASSWORD: secret('scram'), QUOTE_EVENTS: topic, QUOTE_CACHE: cacheName },
    );
    t.after(() => r.child.kill('SIGKILL'));
    await pollUntil(
      'every event committed',
      async () => (await committedTotal(group, topic)) === N,
      60_000,
      100,
    );
    assert.equal(await left(), 0, 'entries left after their events were committed');
    r.child.kill('SIGTERM');
    assert.equal(await r.exited, 0, r.output());
    assert.ok(!r.output().includes(secret('scram')), 'the password is never printed');
  });

  it('a wrong password: exit 2 with RF_KAFKA_AUTH from the auth watch (not a connect timeout)', async (t) => {
    const topic = uniqueName('secinvcli');
    t.after(
      await createSecureTopics([
        { topic, partitions: 1 },
        { topic: `${topic}.DLT`, partitions: 1 },
      ]),
    );
    const r = run([...SCRAM, '--redis', REDIS_URL, '--group', `${topic}-g`], {
      REDFENCE_KAFKA_PASSWORD: 'not-the-password',
      QUOTE_EVENTS: topic,
    });
    t.after(() => r.child.kill('SIGKILL'));
    assert.equal(await r.exited, 2, r.output());
    assert.match(r.output(), /SASL authentication error.*\[RF_KAFKA_AUTH\]/);
    assert.ok(!r.output().includes('not-the-password'));
  });
});
