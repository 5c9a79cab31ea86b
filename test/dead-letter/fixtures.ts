/** Dead letters as each of the four writers lays out their headers, for the dlq tests. */
import { buildDeadLetter } from '../../src/dead-letter/build.js';

export type HeaderList = Array<[string, Buffer]>;

const int32 = (n: number) => {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
};
const int64 = (n: bigint) => {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(n);
  return b;
};
const s = (t: string) => Buffer.from(t, 'utf8');

/** A dead letter as redfence's own processor writes it. */
export function redfenceHeaders(
  topic: string,
  partition: number,
  offset: number,
  reason: 'rejected' | 'processing-error',
): HeaderList {
  const record = buildDeadLetter({
    source: {
      topic,
      partition,
      offset,
      timestamp: 1_700_000_000_000,
      key: s('k'),
      value: s('v'),
      headers: { trace: 'abc' },
    },
    consumerGroup: 'g1',
    reason,
    error: new TypeError('bad amount'),
  });
  const out: HeaderList = [];
  for (const [name, v] of Object.entries(record.headers)) {
    for (const b of Array.isArray(v) ? v : [v]) out.push([name, b]);
  }
  return out;
}

/** Spring Kafka's DeadLetterPublishingRecoverer: binary partition, offset and timestamp. */
export function springHeaders(topic: string, partition: number, offset: number): HeaderList {
  return [
    ['kafka_dlt-original-topic', s(topic)],
    ['kafka_dlt-original-partition', int32(partition)],
    ['kafka_dlt-original-offset', int64(BigInt(offset))],
    ['kafka_dlt-original-timestamp', int64(1_700_000_000_123n)],
    ['kafka_dlt-original-timestamp-type', s('CreateTime')],
    ['kafka_dlt-original-consumer-group', s('spring-group')],
    ['kafka_dlt-exception-fqcn', s('org.springframework.kafka.listener.ListenerExecutionFailedException')],
    ['kafka_dlt-exception-message', s('Listener failed')],
    ['kafka_dlt-exception-stacktrace', s('org.springframework...\n\tat x.y(Z.java:1)')],
  ];
}

/** Kafka Connect's DeadLetterQueueReporter: every value decimal or plain UTF-8 text. */
export function connectHeaders(topic: string, partition: number, offset: number): HeaderList {
  return [
    ['__connect.errors.topic', s(topic)],
    ['__connect.errors.partition', s(String(partition))],
    ['__connect.errors.offset', s(String(offset))],
    ['__connect.errors.connector.name', s('jdbc-sink')],
    ['__connect.errors.task.id', s('0')],
    ['__connect.errors.stage', s('VALUE_CONVERTER')],
    ['__connect.errors.class.name', s('org.apache.kafka.connect.json.JsonConverter')],
    ['__connect.errors.exception.class.name', s('org.apache.kafka.connect.errors.DataException')],
    ['__connect.errors.exception.message', s('Converting byte[] to Kafka Connect data failed')],
    ['__connect.errors.exception.stacktrace', s('org.apache.kafka.connect.errors.DataException: ...')],
  ];
}

/** Kafka Streams (KIP-1034): decimal text for partition and offset. */
export function streamsHeaders(topic: string, partition: number, offset: number): HeaderList {
  return [
    ['__streams.errors.exception', s('org.apache.kafka.common.errors.SerializationException')],
    ['__streams.errors.message', s('Size of data received is not 8')],
    ['__streams.errors.stacktrace', s('org.apache.kafka.common.errors.SerializationException: ...')],
    ['__streams.errors.topic', s(topic)],
    ['__streams.errors.partition', s(String(partition))],
    ['__streams.errors.offset', s(String(offset))],
  ];
}

export function toMap(list: HeaderList): Map<string, Buffer[]> {
  const m = new Map<string, Buffer[]>();
  for (const [name, v] of list) {
    const values = m.get(name) ?? [];
    values.push(v);
    m.set(name, values);
  }
  return m;
}
