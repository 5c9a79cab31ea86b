/** The pure part of the Kafka client configuration: security properties, refusals, failure lines. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RedfenceError } from '../../src/index.js';
import {
  authFailure,
  configError,
  impliedProtocol,
  librdkafkaToken,
  passThrough,
  REFUSED,
  securityProperties,
} from '../../src/kafka/client-config.js';

describe('Kafka client configuration', () => {
  it('maps SASL and TLS settings to librdkafka properties', () => {
    assert.deepEqual(
      securityProperties({
        protocol: 'SASL_SSL',
        sasl: { mechanism: 'SCRAM-SHA-512', username: 'u', password: 'p' },
        ssl: { ca: 'CA', cert: 'C', key: 'K', keyPassword: 'KP' },
      }),
      {
        'security.protocol': 'sasl_ssl',
        'sasl.mechanism': 'SCRAM-SHA-512',
        'sasl.username': 'u',
        'sasl.password': 'p',
        'ssl.ca.pem': 'CA',
        'ssl.certificate.pem': 'C',
        'ssl.key.pem': 'K',
        'ssl.key.password': 'KP',
      },
    );
    assert.deepEqual(securityProperties(undefined), {});
  });

  it('wraps the OAUTHBEARER provider for librdkafka and checks its token', async () => {
    const props = securityProperties({
      protocol: 'SASL_PLAINTEXT',
      sasl: { mechanism: 'OAUTHBEARER', oauthBearerProvider: async () => ({ value: 't', lifetime: 5 }) },
    });
    const cb = props.oauthbearer_token_refresh_cb as () => Promise<unknown>;
    assert.deepEqual(await cb(), { tokenValue: 't', lifetime: 5, principal: '' });
    assert.throws(() => librdkafkaToken({ lifetime: 5 }), /no token "value"/);
    assert.throws(() => librdkafkaToken({ value: 'x' }), /no "lifetime"/);
  });

  it('implies SASL_SSL for SASL (never a password in clear), SSL for TLS only', () => {
    assert.equal(impliedProtocol(true, false), 'SASL_SSL');
    assert.equal(impliedProtocol(true, true), 'SASL_SSL');
    assert.equal(impliedProtocol(false, true), 'SSL');
    assert.equal(impliedProtocol(false, false), 'PLAINTEXT');
  });

  it('refuses the runtime-owned and secret keys by name, never showing a value', () => {
    for (const key of ['enable.auto.commit', 'isolation.level', 'transactional.id', 'sasl.password']) {
      assert.ok(Object.hasOwn(REFUSED, key));
      assert.throws(
        () => passThrough('kafka.config', { [key]: 'secret-value' }),
        (e: unknown) =>
          RedfenceError.is(e, 'RF_INVALID_OPTIONS') &&
          (e as Error).message.includes(`"${key}"`) &&
          !(e as Error).message.includes('secret-value'),
      );
    }
    assert.throws(() => passThrough('kafka.config', { 'linger.ms': {} }), /must be a string/);
    assert.deepEqual(passThrough('kafka.config', { 'linger.ms': 5, 'client.rack': 'a' }), {
      'linger.ms': 5,
      'client.rack': 'a',
    });
  });

  it('classifies librdkafka lines: SASL, TLS and protocol failures, not a broker that is down', () => {
    assert.equal(authFailure('SASL authentication error: Authentication failed (after 3ms)')?.kind, 'sasl');
    assert.equal(
      authFailure('[thrd:x]: SSL handshake failed: certificate verify failed')?.detail,
      'SSL handshake failed: certificate verify failed',
    );
    assert.equal(authFailure('Receive failed: sslv3 alert bad certificate')?.kind, 'tls');
    assert.equal(
      authFailure('might be caused by incorrect security.protocol configuration')?.kind,
      'protocol',
    );
    assert.equal(authFailure('Connect to ipv4#127.0.0.1:1 failed: Connection refused'), undefined);
    assert.equal(authFailure('all broker connections are down'), undefined);
  });

  it("names the key of librdkafka's refusals, not the value", () => {
    const e = configError(new Error('No such configuration property: "foo.bar"'), 'consumer');
    assert.match(
      e?.message ?? '',
      /Kafka consumer configuration: "foo.bar": librdkafka knows no such property/,
    );
    assert.equal(configError(new Error('something else'), 'consumer'), undefined);
  });
});
