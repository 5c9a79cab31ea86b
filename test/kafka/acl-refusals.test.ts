/**
 * The one translation of an authorization refusal (src/kafka/permissions.ts), pure: librdkafka's
 * TOPIC / GROUP / CLUSTER / TRANSACTIONAL_ID_AUTHORIZATION_FAILED codes (29, 30, 31, 53), on the error
 * or its cause, become RF_KAFKA_AUTH naming the operation and the resource; anything else is left as
 * it is. The start-time check refuses exactly what the brokers' lists leave out (Describe implied by
 * Read, Write and Delete; All allowing everything) and says nothing of what they tell nothing about.
 * (A refused Create needs a cluster ACL to see on a broker, which would reach past a test's own
 * resources: its translation is checked here; the brokers' side in test/kafka/acl-start.test.ts.)
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RedfenceError } from '../../src/errors/index.js';
import {
  authRefusal,
  checkPermissions,
  narrowRefusal,
  onGroup,
  onTopic,
} from '../../src/kafka/permissions.js';
import { ensureTopics } from '../../src/kafka/topics.js';
import type { AuthorizedOperations, KafkaPort } from '../../src/kafka/types.js';
import { missingOf } from './acl-support.js';

const coded = (code: number) => Object.assign(new Error('Broker: refused'), { code });

describe('authorization refusals', () => {
  it('each librdkafka authorization code names its operation and resource', () => {
    const ctx = { topic: 'orders', group: 'g', transactionalId: 'g-1', when: 'refuse a produce' };
    assert.deepEqual(missingOf(authRefusal(coded(29), { ...ctx, topicOperation: 'Write' })), [
      'Write topic orders',
    ]);
    assert.deepEqual(missingOf(authRefusal(coded(29), { ...ctx, topicOperation: 'Read' })), [
      'Read topic orders',
    ]);
    assert.deepEqual(missingOf(authRefusal(coded(30), ctx)), ['Read group g']);
    assert.deepEqual(missingOf(authRefusal(coded(53), ctx)), ['Write transactional-id g-1']);
    assert.deepEqual(missingOf(authRefusal(coded(31), { ...ctx, topicOperation: 'Create' })), [
      'Create cluster kafka-cluster',
    ]);
    const inCause = authRefusal(new Error('commit failed', { cause: coded(29) }), ctx);
    assert.ok(RedfenceError.is(inCause, 'RF_KAFKA_AUTH'));
    assert.equal((inCause.cause as Error).message, 'commit failed', 'keeps what it translated as the cause');
    assert.match(
      inCause.message,
      /grant it that operation \(e\.g\. kafka-acls\.sh --add --allow-principal User:<principal> --operation Write --topic orders;/,
    );
    assert.equal(authRefusal(coded(3), ctx), undefined, 'UNKNOWN_TOPIC_OR_PART is not a refusal');
    assert.equal(authRefusal(new Error('timed out'), ctx), undefined);
  });

  it('the start-time check refuses what the lists leave out, all at once, and nothing they do not tell', async () => {
    const told: AuthorizedOperations = {
      topics: new Map([
        ['in', ['Describe', 'Write']],
        ['out', ['Read', 'Describe']],
        ['dlt', ['All']],
        ['rep', ['Delete']],
        ['hidden', []],
      ]),
      group: ['Describe'],
    };
    const port: Pick<KafkaPort, 'authorizedOperations'> = { authorizedOperations: async () => told };
    const err = await checkPermissions(
      port,
      [
        onTopic('Read', 'in', 'the input'),
        onGroup('g'),
        onTopic('Write', 'out', 'the output'),
        onTopic('Write', 'dlt', 'the dead letters'),
        onTopic('Describe', 'rep', 'implied by Delete'),
        onTopic('Read', 'hidden', 'not even Describe'),
        onTopic('Write', 'unknown', 'the brokers tell nothing'),
      ],
      'g',
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(RedfenceError.is(err, 'RF_KAFKA_AUTH'));
    assert.deepEqual(missingOf(err), [
      'Read topic in',
      'Read group g',
      'Write topic out',
      'Read topic hidden',
    ]);
    assert.deepEqual(err.details?.topics, ['hidden', 'in', 'out']);
    await checkPermissions({}, [onTopic('Read', 'in', 'a port without the method')], 'g');
  });

  it("a consumer's refusal naming several topics is narrowed to those the brokers say it may not read", async () => {
    const both = authRefusal(coded(29), {
      topicOperation: 'Read',
      topic: 'rep, in',
      when: 'refuse the consumer',
    });
    assert.ok(both !== undefined);
    const port = {
      authorizedOperations: async () => ({
        topics: new Map([
          ['rep', ['Describe', 'Write']],
          ['in', ['All']],
        ]),
      }),
    };
    const one = await narrowRefusal(both, port);
    assert.deepEqual(missingOf(one), ['Read topic rep']);
    assert.match(one.message, /^Kafka ACLs refuse the consumer: /);
    const silent = { authorizedOperations: async () => ({ topics: new Map() }) };
    assert.equal(await narrowRefusal(both, silent), both, 'the brokers tell nothing: as it was');
  });

  it('a Create the brokers refuse is RF_KAFKA_AUTH from ensureTopics, not RF_TOPIC_MISSING', async () => {
    const port = {
      describeTopics: async (topics: readonly string[]) =>
        new Map(topics.filter((t) => t === 'in').map((t) => [t, 2])),
      createTopics: async () => {
        throw authRefusal(coded(31), {
          topicOperation: 'Create',
          topic: 'out',
          when: 'refuse creating topics',
        });
      },
    } as unknown as KafkaPort;
    await assert.rejects(
      ensureTopics(port, { input: 'in', outputs: ['out'], create: true }),
      (e: unknown) =>
        RedfenceError.is(e, 'RF_KAFKA_AUTH') && missingOf(e)[0] === 'Create cluster kafka-cluster',
    );
  });
});
