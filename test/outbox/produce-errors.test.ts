/**
 * The relay's classification of produce errors: connectivity, timeouts, purged and fenced records are
 * retriable (no attempt counted); a record's own refusals are permanent; any other code is unknown and
 * counts an attempt like a permanent one. The code is found on the error or its causes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { KafkaJS } from '@confluentinc/kafka-javascript';
import { classifyCode, codeName, errorCode, RecordRefusal } from '../../src/outbox/produce-errors.js';

const C = KafkaJS.ErrorCodes as unknown as Record<string, number>;
const code = (name: string) => {
  const v = C[name];
  assert.equal(typeof v, 'number', name);
  return v as number;
};

describe('outbox produce error classification', () => {
  it('connectivity, timeouts, leadership, purges and fencing are retriable', () => {
    for (const n of [
      'ERR__TRANSPORT',
      'ERR__MSG_TIMED_OUT',
      'ERR__ALL_BROKERS_DOWN',
      'ERR__TIMED_OUT',
      'ERR__PURGE_QUEUE',
      'ERR__PURGE_INFLIGHT',
      'ERR__FENCED',
      'ERR_LEADER_NOT_AVAILABLE',
      'ERR_NOT_LEADER_FOR_PARTITION',
      'ERR_REQUEST_TIMED_OUT',
      'ERR_NETWORK_EXCEPTION',
      'ERR_NOT_ENOUGH_REPLICAS',
      'ERR_NOT_COORDINATOR',
      'ERR_CONCURRENT_TRANSACTIONS',
      'ERR_INVALID_PRODUCER_EPOCH',
      'ERR_PRODUCER_FENCED',
      'ERR_KAFKA_STORAGE_ERROR',
      'ERR_THROTTLING_QUOTA_EXCEEDED',
    ])
      assert.equal(classifyCode(code(n)), 'retriable', n);
  });

  it("a record's own refusals are permanent", () => {
    for (const n of [
      'ERR_MSG_SIZE_TOO_LARGE',
      'ERR_RECORD_LIST_TOO_LARGE',
      'ERR_TOPIC_EXCEPTION',
      'ERR_TOPIC_AUTHORIZATION_FAILED',
      'ERR_UNKNOWN_TOPIC_OR_PART',
      'ERR__UNKNOWN_TOPIC',
      'ERR__UNKNOWN_PARTITION',
      'ERR_INVALID_RECORD',
      'ERR_INVALID_TIMESTAMP',
      'ERR_POLICY_VIOLATION',
    ])
      assert.equal(classifyCode(code(n)), 'permanent', n);
  });

  it('any other code is unknown (counted as an attempt, like a permanent one)', () => {
    for (const c of [code('ERR_UNKNOWN'), code('ERR_INVALID_REQUEST'), 12345, -1234])
      assert.equal(classifyCode(c), 'unknown', String(c));
    assert.equal(codeName(12345), 'code 12345');
    assert.equal(codeName(10), 'MESSAGE_TOO_LARGE');
  });

  it('finds the code on the error or its causes; a refusal carries its class', () => {
    const inner = Object.assign(new Error('Broker: Message size too large'), { code: 10 });
    const outer = new Error('Kafka: delivery failed', { cause: inner });
    assert.equal(errorCode(outer), 10);
    assert.equal(errorCode(new Error('no code')), undefined);
    assert.equal(errorCode(Object.assign(new Error('x'), { code: 'ECONNRESET' })), undefined);
    assert.equal(new RecordRefusal('m', 10, outer).kind, 'permanent');
    assert.equal(new RecordRefusal('m', -192, outer).kind, 'retriable');
    assert.equal(new RecordRefusal('m', 999, outer).kind, 'unknown');
  });
});
