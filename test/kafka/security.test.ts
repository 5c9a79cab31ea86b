/**
 * The processor's Kafka security settings against the secured broker of `dev/kafka.sh up s`: a
 * processor runs end to end (consumer, producer and admin on the secured listener) with SCRAM-SHA-512
 * over SASL_SSL (exactly-once), PLAIN over SASL_PLAINTEXT, mutual TLS with an encrypted client key, and
 * OAUTHBEARER through the token provider; a wrong password, an untrusted CA, a missing or untrusted
 * client certificate and a failing token provider each fail start() with RF_KAFKA_AUTH from the auth watch (not a connect timeout)
 * (librdkafka alone would retry for ever), a plaintext client on a TLS port fails on the admin call's
 * timeout; refused and unknown
 * pass-through properties fail construction with RF_INVALID_OPTIONS naming the key.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { defineProcessor, Processor, type ProcessorOptions, RedfenceError } from '../../src/index.js';
import { standalone, uniqueName } from '../helpers/env.js';
import { assertPerKey, countOf, countsUpTo } from '../helpers/outputs.js';
import {
  createSecureTopics,
  LISTENERS,
  pem,
  produceSecure,
  readSecureToEnd,
  secret,
  waitSecureCommitted,
} from '../helpers/secure-kafka.js';

type Kafka = Extract<ProcessorOptions['kafka'], { brokers: string[] }>;

const unsecuredJwt = (sub: string, lifeS = 3600) => {
  const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const now = Math.floor(Date.now() / 1000);
  return { value: `${b64({ alg: 'none' })}.${b64({ sub, iat: now, exp: now + lifeS })}.`, exp: now + lifeS };
};

describe('Kafka security (secured broker)', { timeout: 240_000 }, () => {
  let redis: Redis;
  before(() => {
    redis = standalone();
  });
  after(() => redis.disconnect());

  const processor = (ns: string, kafka: Kafka, mode: 'exactly-once' | 'at-least-once' = 'at-least-once') =>
    new Processor({
      definition: defineProcessor({
        input: `${ns}-in`,
        output: `${ns}-out`,
        store: ns,
        operation: () => ({ op: 'add', by: 1 }),
      }),
      redis,
      mode,
      groupId: `${ns}-g`,
      kafka: { sessionTimeoutMs: 6000, ...kafka },
    });

  /** Five keys, six records each. */
  const PER_KEY = new Map(Array.from({ length: 5 }, (_, k) => [`k${k}`, 6]));

  /** Runs a processor with these settings over 30 records and checks every output arrived. */
  async function roundTrip(prefix: string, kafka: Kafka, mode?: 'exactly-once' | 'at-least-once') {
    const ns = uniqueName(prefix);
    const drop = await createSecureTopics(
      [`${ns}-in`, `${ns}-out`, `${ns}-in.DLT`].map((topic) => ({ topic, partitions: 2 })),
    );
    const p = processor(ns, kafka, mode);
    try {
      await produceSecure(
        `${ns}-in`,
        Array.from({ length: 30 }, (_, i) => ({ key: `k${i % 5}`, value: String(i) })),
      );
      await p.start();
      await waitSecureCommitted(`${ns}-g`, `${ns}-in`);
      // Each key's six inputs counted once each: its outputs are its counts 1..6, in order, each once
      // (at least once under at-least-once).
      assertPerKey('outputs', await readSecureToEnd(`${ns}-out`), countOf, countsUpTo(PER_KEY), {
        ordered: true,
        duplicates: mode === 'exactly-once' ? 'none' : 'allowed',
      });
    } finally {
      await p.close();
      await drop();
    }
  }

  it('SCRAM-SHA-512 over SASL_SSL, exactly-once', () =>
    roundTrip(
      'scram',
      {
        brokers: [LISTENERS.saslSsl],
        sasl: { mechanism: 'SCRAM-SHA-512', username: 'redfence', password: secret('scram') },
        ssl: { ca: pem('ca.crt') },
      },
      'exactly-once',
    ));

  it('PLAIN over SASL_PLAINTEXT', () =>
    roundTrip('plain', {
      brokers: [LISTENERS.saslPlaintext],
      securityProtocol: 'SASL_PLAINTEXT',
      sasl: { mechanism: 'PLAIN', username: 'redfence', password: secret('plain') },
    }));

  it('mutual TLS with an encrypted client key', () =>
    roundTrip('mtls', {
      brokers: [LISTENERS.ssl],
      ssl: {
        ca: pem('ca.crt'),
        cert: pem('client.crt'),
        key: pem('client-enc.key'),
        keyPassword: secret('key'),
      },
    }));

  it('OAUTHBEARER through the token provider (called for the token, principal from the provider)', async () => {
    let calls = 0;
    await roundTrip('oauth', {
      brokers: [LISTENERS.saslPlaintext],
      securityProtocol: 'SASL_PLAINTEXT',
      sasl: {
        mechanism: 'OAUTHBEARER',
        oauthBearerProvider: async () => {
          calls++;
          const t = unsecuredJwt('redfence');
          return { value: t.value, principal: 'redfence', lifetime: t.exp * 1000 };
        },
      },
    });
    assert.ok(calls >= 1, 'the provider was asked for a token');
  });

  const refused: Array<[string, Kafka, RegExp]> = [
    [
      'a wrong SCRAM password',
      {
        brokers: [LISTENERS.saslSsl],
        sasl: { mechanism: 'SCRAM-SHA-512', username: 'redfence', password: 'wrong-password' },
        ssl: { ca: pem('ca.crt') },
      },
      /SASL authentication error.*invalid credentials/,
    ],
    [
      'a wrong PLAIN password',
      {
        brokers: [LISTENERS.saslPlaintext],
        securityProtocol: 'SASL_PLAINTEXT',
        sasl: { mechanism: 'PLAIN', username: 'redfence', password: 'wrong-password' },
      },
      /SASL authentication error/,
    ],
    [
      "a CA that did not sign the broker's certificate",
      {
        brokers: [LISTENERS.saslSsl],
        sasl: { mechanism: 'SCRAM-SHA-512', username: 'redfence', password: secret('scram') },
        ssl: { ca: pem('other-ca.crt') },
      },
      /certificate verify failed/,
    ],
    [
      'no client certificate where the broker requires one',
      { brokers: [LISTENERS.ssl], ssl: { ca: pem('ca.crt') } },
      /bad certificate/,
    ],
    [
      'a client certificate of a CA the broker does not trust',
      {
        brokers: [LISTENERS.ssl],
        ssl: { ca: pem('ca.crt'), cert: pem('other-client.crt'), key: pem('other-client.key') },
      },
      /bad certificate/,
    ],
    [
      'a token provider that fails',
      {
        brokers: [LISTENERS.saslPlaintext],
        securityProtocol: 'SASL_PLAINTEXT',
        sasl: {
          mechanism: 'OAUTHBEARER',
          oauthBearerProvider: async () => {
            throw new Error('identity provider unreachable');
          },
        },
      },
      /identity provider unreachable/,
    ],
  ];
  for (const [what, kafka, detail] of refused) {
    it(`${what}: start() fails with RF_KAFKA_AUTH from the auth watch (not a connect timeout)`, async (t) => {
      const ns = uniqueName('refused');
      const drop = await createSecureTopics(
        [`${ns}-in`, `${ns}-out`, `${ns}-in.DLT`].map((topic) => ({ topic, partitions: 1 })),
      );
      t.after(drop);
      const p = processor(ns, kafka);
      const err = await p.start().then(
        () => undefined,
        (e: unknown) => e,
      );
      await p.close();
      assert.ok(RedfenceError.is(err, 'RF_KAFKA_AUTH'), `RF_KAFKA_AUTH, got ${(err as Error)?.message}`);
      assert.match((err as Error).message, detail);
      assert.doesNotMatch((err as Error).message, new RegExp(secret('scram')));
      assert.equal(p.state, 'closed');
    });
  }

  it('a plaintext client on the TLS listener: start() fails (not fast: the broker only closes the connection)', async (t) => {
    const ns = uniqueName('plain-on-tls');
    const drop = await createSecureTopics(
      [`${ns}-in`, `${ns}-out`, `${ns}-in.DLT`].map((topic) => ({ topic, partitions: 1 })),
    );
    t.after(drop);
    const p = processor(ns, { brokers: [LISTENERS.saslSsl] });
    // librdkafka sees what it sees of a broker going away mid-handshake: no line names the cause, so
    // this is the admin call's timeout, not RF_KAFKA_AUTH (docs/operations.md says so)
    await assert.rejects(p.start(), /Timed out/);
    await p.close();
    assert.equal(p.state, 'closed');
  });

  it('refused and unknown kafka.config keys fail construction with RF_INVALID_OPTIONS naming the key', () => {
    for (const [config, key] of [
      [{ 'enable.auto.commit': true }, 'enable.auto.commit'],
      [{ 'sasl.password': 'x' }, 'sasl.password'],
      [{ 'no.such.property': 1 }, 'no.such.property'],
    ] as const) {
      assert.throws(
        () => processor(uniqueName('cfg'), { brokers: [LISTENERS.saslSsl], config }),
        (e: unknown) =>
          RedfenceError.is(e, 'RF_INVALID_OPTIONS') && (e as Error).message.includes(`"${key}"`),
      );
    }
  });
});
