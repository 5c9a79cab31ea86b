/**
 * The pure parts of retry topics (src/retry/retry-topics.ts): backoff steps, topic names, Spring's
 * header encodings (Java BigInteger bytes, 4-byte attempts), the forwarded record; the retry gate's
 * holding with a fake clock; and the key-order scripts against the real Redis.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Redis } from 'ioredis';
import { decodeRetryTopicHeaders, headersForDisplay } from '../../src/dead-letter/decode.js';
import { KeyOrderStore } from '../../src/handler/key-order.js';
import { RetryGate } from '../../src/handler/retry-gate.js';
import { KeySpace } from '../../src/index.js';
import type { InRecord } from '../../src/kafka/types.js';
import {
  bigIntegerBytes,
  readAttempts,
  readBigInteger,
  readDueMs,
  resolveRetryTopics,
  retryRecord,
  retryTopicNames,
  stepDelays,
} from '../../src/retry/retry-topics.js';
import { REDIS_URL, uniqueName } from '../helpers/env.js';

function rec(offset: number, headers: InRecord['headers'] = {}): InRecord {
  return {
    topic: 't-retry-100',
    partition: 0,
    offset: String(offset),
    key: null,
    value: null,
    headers,
    timestamp: '5',
  };
}

describe('retry topics: pure parts', () => {
  it('steps: fixed repeats, exponential doubles up to its cap; one topic per distinct delay', () => {
    assert.deepEqual(stepDelays('fixed', 1000, 2, 1000, 3), [1000, 1000, 1000]);
    assert.deepEqual(stepDelays('exponential', 1000, 2, 5000, 5), [1000, 2000, 4000, 5000, 5000]);
    const t = resolveRetryTopics(
      { backoff: { kind: 'exponential', delayMs: 1000, maxDelayMs: 5000 }, maxAttempts: 6 },
      'handler',
    );
    assert.deepEqual(retryTopicNames('orders', t as NonNullable<typeof t>), [
      'orders-retry-1000',
      'orders-retry-2000',
      'orders-retry-4000',
      'orders-retry-5000',
    ]);
    const d = resolveRetryTopics({}, 'handler');
    assert.deepEqual(d, {
      kind: 'fixed',
      delays: [1000, 1000],
      maxAttempts: 3,
      dlt: 'always',
      keyOrder: false,
    });
    assert.equal(resolveRetryTopics(undefined, 'handler'), undefined);
  });

  it("Java BigInteger.toByteArray: minimal two's complement, read back", () => {
    const cases: [bigint, string][] = [
      [0n, '00'],
      [127n, '7f'],
      [128n, '0080'],
      [-1n, 'ff'],
      [-129n, 'ff7f'],
      [1_764_615_600_000n, '019adb493780'],
      [2n ** 63n - 1n, '7fffffffffffffff'],
    ];
    for (const [n, hex] of cases) {
      assert.equal(bigIntegerBytes(n).toString('hex'), hex, String(n));
      assert.equal(readBigInteger(Buffer.from(hex, 'hex')), n);
    }
    assert.equal(readBigInteger(Buffer.alloc(0)), undefined);
    assert.equal(readBigInteger(Buffer.alloc(9)), undefined);
  });

  it('attempts: 4 bytes big-endian (1 byte read too), out of range reads 1; due time as BigInteger or text', () => {
    assert.equal(readAttempts({}), 1);
    assert.equal(readAttempts({ 'retry_topic-attempts': Buffer.from('00000003', 'hex') }), 3);
    assert.equal(readAttempts({ 'retry_topic-attempts': Buffer.from([4]) }), 4);
    assert.equal(readAttempts({ 'retry_topic-attempts': Buffer.from('00010000', 'hex') }), 1);
    assert.equal(
      readAttempts({
        'retry_topic-attempts': [Buffer.from('00000002', 'hex'), Buffer.from('00000003', 'hex')],
      }),
      3,
    );
    assert.equal(readDueMs({}), 0);
    assert.equal(
      readDueMs({ 'retry_topic-backoff-timestamp': bigIntegerBytes(1_764_615_600_123n) }),
      1_764_615_600_123,
    );
    assert.equal(readDueMs({ 'retry_topic-backoff-timestamp': '1764615600123' }), 1_764_615_600_123);
  });

  it('the forwarded record keeps key, value, headers and partition; the first hop stays the original', () => {
    const main: InRecord = {
      topic: 'orders',
      partition: 2,
      offset: '41',
      key: Buffer.from('k'),
      value: Buffer.from('{"a":1}'),
      headers: { trace: Buffer.from('abc') },
      timestamp: '1764615600000',
    };
    const first = retryRecord({
      record: main,
      topic: 'orders-retry-100',
      groupId: 'g',
      error: new Error('x'),
      attempts: 2,
      dueMs: 1764615600100,
    });
    assert.equal(first.partition, 2);
    assert.deepEqual(first.key, main.key);
    assert.deepEqual(first.value, main.value);
    const h1 = first.headers as Record<string, Buffer | Buffer[]>;
    assert.deepEqual(h1.trace, Buffer.from('abc'));
    assert.deepEqual(h1['retry_topic-attempts'], Buffer.from('00000002', 'hex'));
    // the next hop, from the retry topic: the original-* headers still name orders/2@41
    const again: InRecord = {
      ...main,
      topic: 'orders-retry-100',
      offset: '7',
      headers: h1,
      timestamp: '1764615600200',
    };
    const second = retryRecord({
      record: again,
      topic: 'orders-retry-200',
      groupId: 'g',
      error: new Error('y'),
      attempts: 3,
      dueMs: 1764615600400,
    });
    const h2 = second.headers as Record<string, Buffer | Buffer[]>;
    assert.deepEqual(h2['kafka_dlt-original-topic'], Buffer.from('orders'));
    assert.equal((h2['kafka_dlt-original-offset'] as Buffer).readBigInt64BE(0), 41n);
    const m = new Map(Object.entries(h2).map(([k, v]) => [k, Array.isArray(v) ? v : [v]]));
    assert.equal(
      (m.get('retry_topic-attempts') as Buffer[]).length,
      2,
      'each hop appends (Spring retains all values)',
    );
    assert.deepEqual(decodeRetryTopicHeaders(m), {
      attempts: 3,
      backoffTimestamp: 1764615600400n,
      originalTimestamp: 1764615600000n,
    });
  });

  it('dlq show prints the retry_topic-* values as numbers', () => {
    const shown = headersForDisplay(
      new Map([
        ['retry_topic-attempts', [Buffer.from('00000003', 'hex')]],
        ['retry_topic-backoff-timestamp', [bigIntegerBytes(1_764_615_600_123n)]],
        ['retry_topic-original-timestamp', [bigIntegerBytes(1_764_615_600_000n)]],
      ]),
    );
    assert.deepEqual(shown, {
      'retry_topic-attempts': '3',
      'retry_topic-backoff-timestamp': '1764615600123',
      'retry_topic-original-timestamp': '1764615600000',
    });
  });

  it('the gate holds the head and everything behind it until due; pauses at its limit, resumes under half', () => {
    let now = 1000;
    const events: string[] = [];
    const accepted: string[] = [];
    const gate = new RetryGate(
      {
        hold: () => events.push('hold'),
        release: () => events.push('release'),
        accept: (rs) => accepted.push(...rs.map((r) => r.offset)),
        waiting: () => undefined,
      },
      2,
      () => now,
    );
    const due = (ms: number) => ({ 'retry_topic-backoff-timestamp': bigIntegerBytes(BigInt(ms)) });
    gate.offer([rec(0, due(900)), rec(1, due(1500)), rec(2, due(1200))]);
    assert.deepEqual(accepted, ['0'], 'the due head goes; 1 is not due and 2 waits behind it');
    assert.deepEqual(events, ['hold'], 'two wait: the limit, the partition pauses');
    now = 1500;
    // the timer would fire here; offering nothing drains the same way
    gate.offer([]);
    assert.deepEqual(accepted, ['0', '1', '2']);
    assert.deepEqual(events, ['hold', 'release']);
    gate.stop();
  });
});

describe('retry topics: key-order scripts', () => {
  it('free, head, behind; a main-topic record joins a blocked key; done frees; a newer epoch is fenced', async (t) => {
    const name = uniqueName('rko').replace(/-/g, '_');
    const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 2 });
    t.after(async () => {
      const keys = await redis.keys(`rf:{${name}:*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    });
    const ks = new KeySpace({ store: name });
    const store = new KeyOrderStore(redis, ks, 'in', 60_000);
    const main = { topic: 'in', partition: 0, epoch: 1 };
    await redis.set(ks.epoch('in', 0), '1');
    const retryEpoch = await store.raiseRetryEpoch('in-retry-100', 0);
    const retry = { topic: 'in-retry-100', partition: 0, epoch: retryEpoch };
    const k = Buffer.from('k');
    assert.equal(await store.check(main, k, '5', true), 'free');
    assert.equal(await store.block(main, k, '5'), true);
    assert.equal(await store.check(main, k, '6', true), 'behind', 'a later record joins');
    assert.deepEqual(await redis.lrange(ks.retryKeyOrder('in', 0, k), 0, -1), ['5', '6']);
    assert.equal(await store.check(retry, k, '5', false), 'head');
    assert.equal(await store.check(retry, k, '6', false), 'behind');
    assert.equal(
      await store.check(retry, k, '9', false),
      'free',
      'a retry record not in the list is not held',
    );
    assert.equal(await store.done(retry, k, '5'), true);
    assert.equal(await store.check(retry, k, '6', false), 'head');
    await redis.incr(ks.retryEpoch('in', 0, 'in-retry-100'));
    assert.equal(await store.check(retry, k, '6', false), 'fenced');
    assert.equal(await store.done(retry, k, '6'), false);
    assert.equal(await store.done(main, k, '6'), true);
    assert.equal(await redis.exists(ks.retryKeyOrder('in', 0, k)), 0, 'an empty list is gone');
  });
});
