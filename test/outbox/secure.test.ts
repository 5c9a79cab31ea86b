/**
 * `redfence outbox relay` (the built CLI) on the secured broker: SCRAM-SHA-512 over SASL_SSL (password
 * from REDFENCE_KAFKA_PASSWORD, the CA from --kafka-ca) publishes every committed row, exactly once
 * (read_committed), its progress topic and transactions on the same secured listener; a wrong password
 * exits 2 with RF_KAFKA_AUTH from the auth watch (not a connect timeout); the library relay takes the processor's `kafka` shape and
 * refuses a bad one before connecting. The password never appears in what the relay printed.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { enqueue, OutboxRelay } from '../../src/outbox/index.js';
import { resolveRelayOptions } from '../../src/outbox/options.js';
import { DATABASE_URL, uniqueName } from '../helpers/env.js';
import { pollUntil, type ReadRecord } from '../helpers/kafka.js';
import { assertPerKey } from '../helpers/outputs.js';
import {
  createSecureTopics,
  LISTENERS,
  pem,
  readSecureToEnd,
  secret,
  tlsFile,
} from '../helpers/secure-kafka.js';
import { inTransaction, type TestSchema, testSchema } from './support.js';

const BIN = new URL('../../dist/cli/bin.js', import.meta.url).pathname;

function start(args: string[], env: NodeJS.ProcessEnv) {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(DATABASE_URL|KAFKA_|REDFENCE_)/.test(k)),
  );
  const child = spawn(process.execPath, [BIN, 'outbox', 'relay', ...args], {
    env: { ...base, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stderr?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stdout?.on('data', (d: Buffer) => {
    out += d.toString();
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, output: () => out, exited };
}

async function deleteSecureTopics(topics: string[]): Promise<void> {
  const admin = new KafkaJS.Kafka({
    kafkaJS: { brokers: [LISTENERS.internal], logLevel: KafkaJS.logLevel.NOTHING },
  }).admin();
  await admin.connect();
  await admin.deleteTopics({ topics }).catch(() => undefined);
  await admin.disconnect();
}

const scram = ['--kafka-sasl-mechanism', 'SCRAM-SHA-512', '--kafka-sasl-username', 'redfence'];

describe('outbox relay on the secured Kafka', { timeout: 120_000 }, () => {
  let t: TestSchema;
  let prefix: string;
  let dropTopics: () => Promise<void>;
  before(async () => {
    t = await testSchema();
    prefix = uniqueName('obxsec');
    dropTopics = await createSecureTopics([{ topic: `${prefix}.order`, partitions: 3 }]);
  });
  after(async () => {
    await dropTopics?.();
    if (t) await deleteSecureTopics([`redfence-outbox-progress.${t.schema}.redfence_outbox`]);
    await t?.drop();
  });

  it('SCRAM-SHA-512 over SASL_SSL: every committed row published once', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 10; i++)
      ids.push(
        ...(await inTransaction(t.pool, (c) =>
          enqueue(
            c,
            Array.from({ length: 3 }, (_, j) => ({
              aggregateType: 'order',
              aggregateId: `o-${(i + j) % 4}`,
              type: 'Placed',
              payload: { i, j },
            })),
            { schema: t.schema },
          ),
        )),
      );
    const r = start(
      [
        '--database-url',
        DATABASE_URL,
        '--schema',
        t.schema,
        '--brokers',
        LISTENERS.saslSsl,
        '--topic-template',
        `${prefix}.\${aggregatetype}`,
        '--lease',
        '3000',
        ...scram,
        '--kafka-ca',
        tlsFile('ca.crt'),
      ],
      { REDFENCE_KAFKA_PASSWORD: secret('scram') },
    );
    try {
      await pollUntil(
        'the relay published every row',
        async () => {
          const q = await t.pool.query(
            `SELECT count(*)::int AS n FROM "${t.schema}".redfence_outbox WHERE state = 'published'`,
          );
          return q.rows[0].n === ids.length;
        },
        60_000,
      );
      // Each aggregate's events exactly once, in its commit order (read_committed, to the end offsets).
      const want = new Map<string, string[]>();
      for (let i = 0; i < 10; i++)
        for (let j = 0; j < 3; j++) {
          const key = `o-${(i + j) % 4}`;
          want.set(key, [...(want.get(key) ?? []), `${i}.${j}`]);
        }
      const event = (r: ReadRecord) => {
        const p = JSON.parse(r.value ?? 'null') as { i: number; j: number };
        return `${p.i}.${p.j}`;
      };
      assertPerKey('published events', await readSecureToEnd(`${prefix}.order`), event, want, {
        ordered: true,
      });
      r.child.kill('SIGTERM');
      assert.equal(await r.exited, 0, r.output());
      assert.ok(!r.output().includes(secret('scram')), 'the password is never printed');
    } finally {
      r.child.kill('SIGKILL');
    }
  });

  it('a wrong password: exit 2 with RF_KAFKA_AUTH from the auth watch (not a connect timeout)', async () => {
    const r = start(
      [
        '--database-url',
        DATABASE_URL,
        '--schema',
        t.schema,
        '--brokers',
        LISTENERS.saslSsl,
        ...scram,
        '--kafka-ca',
        tlsFile('ca.crt'),
      ],
      { REDFENCE_KAFKA_PASSWORD: 'not-the-password' },
    );
    try {
      assert.equal(await r.exited, 2, r.output());
      assert.match(r.output(), /SASL authentication error.*\[RF_KAFKA_AUTH\]/);
      assert.ok(!r.output().includes('not-the-password'));
    } finally {
      r.child.kill('SIGKILL');
    }
  });

  it('the library relay takes the processor kafka shape and refuses a bad one before connecting', async () => {
    const base = { databaseUrl: DATABASE_URL, brokers: [LISTENERS.saslSsl], schema: t.schema };
    const options = {
      ...base,
      kafka: {
        sasl: { mechanism: 'SCRAM-SHA-512' as const, username: 'redfence', password: 'wrong' },
        ssl: { ca: pem('ca.crt') },
      },
    };
    assert.equal(resolveRelayOptions(options).kafka.securityProtocol, 'SASL_SSL', 'implied by sasl');
    const relay = new OutboxRelay(options);
    await assert.rejects(relay.start(), (e: Error & { code?: string }) => e.code === 'RF_KAFKA_AUTH');
    assert.equal(relay.state, 'closed');
    for (const [kafka, message] of [
      [{ groupProtocol: 'consumer' }, /unknown outbox relay option "kafka.groupProtocol"/],
      [{ securityProtocol: 'SASL_SSL' }, /"kafka.securityProtocol" is SASL_SSL: give "kafka.sasl"/],
      [{ config: { 'enable.idempotence': false } }, /may not set "enable.idempotence"/],
      [{ ssl: { ca: '/etc/ca.pem' } }, /"kafka.ssl.ca" must be PEM text/],
    ] as const)
      assert.throws(
        () => new OutboxRelay({ ...base, kafka: kafka as never }),
        (e: Error & { code?: string }) => e.code === 'RF_INVALID_OPTIONS' && message.test(e.message),
      );
  });
});
