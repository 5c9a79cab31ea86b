import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decodeDeadLetter, headersForDisplay } from '../../src/dead-letter/decode.js';
import { isDeadLetterHeader } from '../../src/dead-letter/headers.js';
import { connectHeaders, redfenceHeaders, springHeaders, streamsHeaders, toMap } from './fixtures.js';

describe('dlq headers: the four schemes decode to one shape', () => {
  it('reads a dead letter written by redfence (Spring headers plus redfence-reason)', () => {
    const info = decodeDeadLetter(toMap(redfenceHeaders('orders', 3, 1042, 'rejected')));
    assert.ok(info);
    assert.equal(info.scheme, 'redfence');
    assert.equal(info.originalTopic, 'orders');
    assert.equal(info.originalPartition, 3);
    assert.equal(info.originalOffset, 1042n);
    assert.equal(info.originalTimestamp, 1_700_000_000_000n);
    assert.equal(info.reason, 'rejected');
    assert.equal(info.exceptionClass, 'redfence.TypeError');
    assert.equal(info.exceptionMessage, 'bad amount');
    assert.equal(info.consumerGroup, 'g1');
    assert.deepEqual(info.problems, []);
  });

  it('reads Spring Kafka: 4-byte partition, 8-byte offset and timestamp, big-endian', () => {
    const info = decodeDeadLetter(toMap(springHeaders('payments', 0x01020304, 2 ** 40 + 7)));
    assert.ok(info);
    assert.equal(info.scheme, 'spring');
    assert.equal(info.originalPartition, 0x01020304);
    assert.equal(info.originalOffset, BigInt(2 ** 40 + 7));
    assert.equal(info.originalTimestamp, 1_700_000_000_123n);
    assert.equal(info.exceptionClass, 'org.springframework.kafka.listener.ListenerExecutionFailedException');
    assert.equal(info.reason, undefined);
    assert.equal(info.consumerGroup, 'spring-group');
  });

  it('reads Kafka Connect: decimal text, the exception class (not the stage class)', () => {
    const info = decodeDeadLetter(toMap(connectHeaders('clicks', 11, 99)));
    assert.ok(info);
    assert.equal(info.scheme, 'connect');
    assert.equal(info.originalTopic, 'clicks');
    assert.equal(info.originalPartition, 11);
    assert.equal(info.originalOffset, 99n);
    assert.equal(info.exceptionClass, 'org.apache.kafka.connect.errors.DataException');
    assert.equal(info.stage, 'VALUE_CONVERTER');
    assert.equal(info.connector, 'jdbc-sink');
    assert.equal(info.task, '0');
    assert.equal(info.originalTimestamp, undefined);
  });

  it('reads Kafka Streams KIP-1034', () => {
    const info = decodeDeadLetter(toMap(streamsHeaders('views', 2, 12345678901)));
    assert.ok(info);
    assert.equal(info.scheme, 'streams');
    assert.equal(info.originalTopic, 'views');
    assert.equal(info.originalPartition, 2);
    assert.equal(info.originalOffset, 12345678901n);
    assert.equal(info.exceptionClass, 'org.apache.kafka.common.errors.SerializationException');
    assert.equal(info.exceptionMessage, 'Size of data received is not 8');
  });

  it('reads the last value of a repeated header (the newest hop)', () => {
    const list = [...springHeaders('first', 1, 10), ...springHeaders('second', 2, 20)];
    const info = decodeDeadLetter(toMap(list));
    assert.equal(info?.originalTopic, 'second');
    assert.equal(info?.originalPartition, 2);
    assert.equal(info?.originalOffset, 20n);
  });

  it('a Spring partition set by hand as decimal text still reads', () => {
    const list = springHeaders('t', 0, 0).map(([n, v]): [string, Buffer] =>
      n === 'kafka_dlt-original-partition' ? [n, Buffer.from('7')] : [n, v],
    );
    assert.equal(decodeDeadLetter(toMap(list))?.originalPartition, 7);
  });

  it('a malformed field is undefined and named in problems, never a throw', () => {
    const list = connectHeaders('t', 0, 0).map(([n, v]): [string, Buffer] =>
      n === '__connect.errors.offset' ? [n, Buffer.from('twelve')] : [n, v],
    );
    const info = decodeDeadLetter(toMap(list));
    assert.equal(info?.originalOffset, undefined);
    assert.equal(info?.problems.length, 1);
    assert.match(info?.problems[0] ?? '', /__connect\.errors\.offset/);
  });

  it('a negative partition is refused', () => {
    const list = streamsHeaders('t', 0, 0).map(([n, v]): [string, Buffer] =>
      n === '__streams.errors.partition' ? [n, Buffer.from('-1')] : [n, v],
    );
    assert.equal(decodeDeadLetter(toMap(list))?.originalPartition, undefined);
  });

  it('a record without dead-letter headers is not a dead letter', () => {
    assert.equal(decodeDeadLetter(toMap([['trace', Buffer.from('x')]])), undefined);
  });

  it('display decodes binary Spring numbers and base64s other binary values', () => {
    const shown = headersForDisplay(
      toMap([...springHeaders('t', 5, 77), ['blob', Buffer.from([0, 1, 2, 255])]]),
    );
    assert.equal(shown['kafka_dlt-original-partition'], '5');
    assert.equal(shown['kafka_dlt-original-offset'], '77');
    assert.equal(shown.blob, 'base64:AAEC/w==');
    assert.equal(shown['kafka_dlt-original-topic'], 't');
  });

  it("knows which headers are the writers' own", () => {
    assert.ok(isDeadLetterHeader('kafka_dlt-original-topic'));
    assert.ok(isDeadLetterHeader('redfence-reason'));
    assert.ok(isDeadLetterHeader('__connect.errors.stage'));
    assert.ok(isDeadLetterHeader('__streams.errors.offset'));
    assert.ok(!isDeadLetterHeader('trace'));
    assert.ok(!isDeadLetterHeader('kafka_correlationId'));
  });
});
