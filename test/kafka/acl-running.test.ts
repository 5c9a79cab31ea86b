/**
 * A permission removed while a runtime runs (secured broker, User:redfence): the runtime closes with
 * RF_KAFKA_AUTH naming the operation and the resource (onFatal), instead of redelivering a refused
 * batch forever or fetching nothing without a word; what it had not committed stays uncommitted, so
 * nothing is lost. Granted again, a new processor takes up where the first stopped and every record's
 * output is in the output topic exactly once per key (exactly-once). A topology denied Read on its
 * repartition topic is told that topic alone (librdkafka's error names none; the brokers are asked).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Redis } from 'ioredis';
import { RedfenceError } from '../../src/errors/index.js';
import { standalone, uniqueName } from '../helpers/env.js';
import { pollUntil } from '../helpers/kafka.js';
import { assertPerKey, countOf, countsUpTo } from '../helpers/outputs.js';
import { produceSecure, readSecureToEnd, waitSecureCommitted } from '../helpers/secure-kafka.js';
import {
  caseTopics,
  committedSum,
  countTopology,
  deny,
  Heard,
  handlerOf,
  missingOf,
  names,
  processorOf,
  produceCase,
  topologyOf,
} from './acl-support.js';

/** One record per key given, all to partition 0, in this order. */
function produceSecureInOrder(topic: string, keys: string[]): Promise<void> {
  return produceSecure(
    topic,
    keys.map((key, i) => ({ key, value: JSON.stringify({ i }), partition: 0 })),
  );
}

const FOUR_KEYS = (n: number) => new Map(['k0', 'k1', 'k2', 'k3'].map((k) => [k, n]));

describe('a Kafka permission removed while running', { timeout: 240_000 }, () => {
  let redis: Redis;
  const spaces: string[] = [];
  before(() => {
    redis = standalone();
  });
  after(async () => {
    for (const ns of spaces) {
      const keys = await redis.keys(`rf:*${ns}*`);
      if (keys.length > 0) await redis.del(...keys);
    }
    redis.disconnect();
  });

  it('processor exactly-once, Write on the output: closes naming it; granted again, each output once per key', {
    timeout: 90_000,
  }, async (t) => {
    const ns = uniqueName('aclrun');
    spaces.push(ns);
    const n = names(ns);
    t.after(await caseTopics(ns));
    await produceCase(ns, 40);
    const heard = new Heard();
    const first = processorOf(ns, redis, 'exactly-once', heard);
    await first.start();
    t.after(() => first.close());
    await waitSecureCommitted(n.group, n.input);
    const grant = await deny(['--topic', n.output], 'Write');
    t.after(grant);
    await produceCase(ns, 40);
    await pollUntil('the processor closes on its own', () => heard.fatals.length > 0, 45_000);
    await first.close();
    const fatal = heard.fatals[0];
    assert.ok(RedfenceError.is(fatal, 'RF_KAFKA_AUTH'), `RF_KAFKA_AUTH, got ${String(fatal)}`);
    assert.deepEqual(missingOf(fatal), [`Write topic ${n.output}`]);
    assert.equal(await committedSum(n.group, n.input), 40, 'nothing committed past the refused batch');

    await grant();
    const again = processorOf(ns, redis, 'exactly-once', new Heard());
    await again.start();
    t.after(() => again.close());
    await waitSecureCommitted(n.group, n.input);
    await again.close();
    assert.equal(await committedSum(n.group, n.input), 80);
    assertPerKey('outputs', await readSecureToEnd(n.output), countOf, countsUpTo(FOUR_KEYS(20)));
  });

  it('processor at-least-once, Write on the dead-letter topic: closes naming it, the record uncommitted', {
    timeout: 60_000,
  }, async (t) => {
    const ns = uniqueName('aclrun');
    spaces.push(ns);
    const n = names(ns);
    t.after(await caseTopics(ns));
    await produceCase(ns, 20);
    const heard = new Heard();
    const p = processorOf(ns, redis, 'at-least-once', heard);
    await p.start();
    t.after(() => p.close());
    await waitSecureCommitted(n.group, n.input);
    t.after(await deny(['--topic', n.dlt], 'Write'));
    await produceCase(ns, 0, 2);
    await pollUntil('the processor closes on its own', () => heard.fatals.length > 0, 45_000);
    await p.close();
    assert.ok(
      RedfenceError.is(heard.fatals[0], 'RF_KAFKA_AUTH'),
      `RF_KAFKA_AUTH, got ${String(heard.fatals[0])}`,
    );
    assert.deepEqual(missingOf(heard.fatals[0]), [`Write topic ${n.dlt}`]);
    assert.equal(await committedSum(n.group, n.input), 20, 'the refused dead letters are not committed');
  });

  it('topology exactly-once, Read on its repartition topic: closes naming that topic alone', {
    timeout: 60_000,
  }, async (t) => {
    const ns = uniqueName('aclrun');
    spaces.push(ns);
    const n = names(ns);
    const repartition = countTopology(ns).repartitionTopics[0] as string;
    t.after(await caseTopics(ns, [repartition]));
    await produceCase(ns, 20);
    const heard = new Heard();
    const p = topologyOf(ns, redis, 'exactly-once', heard);
    await p.start();
    t.after(() => p.close());
    await waitSecureCommitted(n.group, repartition);
    t.after(await deny(['--topic', repartition], 'Read'));
    await produceCase(ns, 20);
    await pollUntil('the topology processor closes on its own', () => heard.fatals.length > 0, 45_000);
    await p.close();
    assert.ok(
      RedfenceError.is(heard.fatals[0], 'RF_KAFKA_AUTH'),
      `RF_KAFKA_AUTH, got ${String(heard.fatals[0])}`,
    );
    assert.deepEqual(
      missingOf(heard.fatals[0]),
      [`Read topic ${repartition}`],
      'the refused topic, not the input',
    );
  });

  it('handler, Write on the dead-letter topic: closes naming it, the failed record uncommitted', {
    timeout: 60_000,
  }, async (t) => {
    const ns = uniqueName('aclrun');
    const n = names(ns);
    t.after(await caseTopics(ns, [], 1));
    const heard = new Heard();
    const seen = new Map<string, number>();
    const h = handlerOf(ns, heard, seen);
    await h.start();
    t.after(() => h.close());
    t.after(await deny(['--topic', n.dlt], 'Write'));
    // k1 k2 k3 handled, then k0 (a decoding error: dead-lettered at once) refused
    await produceSecureInOrder(n.input, ['k1', 'k2', 'k3', 'k0', 'k1']);
    await pollUntil('the handler closes on its own', () => heard.fatals.length > 0, 45_000);
    await h.close();
    assert.ok(
      RedfenceError.is(heard.fatals[0], 'RF_KAFKA_AUTH'),
      `RF_KAFKA_AUTH, got ${String(heard.fatals[0])}`,
    );
    assert.deepEqual(missingOf(heard.fatals[0]), [`Write topic ${n.dlt}`]);
    assert.ok((await committedSum(n.group, n.input)) <= 3, 'never committed past the refused dead letter');
  });
});
