/**
 * The dead-letter header table: every header name redfence writes or reads, in the four layouts it
 * knows (redfence's own, Spring Kafka's `DeadLetterPublishingRecoverer`, Kafka Connect's
 * `DeadLetterQueueReporter`, Kafka Streams' KIP-1034 handlers), and the reasons and timestamp types
 * their values may carry. build.ts writes them, read-headers.ts and decode.ts read them, replay.ts
 * strips them; where each name comes from is told in build.ts and decode.ts.
 */

/** Why a record was dead-lettered. Written, as UTF-8, to the `redfence-reason` header. */
export type DeadLetterReason =
  | 'wrong-partition'
  | 'undecodable'
  | 'rejected'
  | 'processing-error'
  | 'oversized'
  | 'null-key'
  | 'late';

/** A header value as Kafka clients hand them over: bytes, text, or several of either. */
export type HeaderValue = Buffer | string | readonly (Buffer | string)[] | undefined;

/** The timestamp types a dead-letter header can name (Spring may also write `NoTimestampType`). */
export type OriginalTimestampType = 'CREATE_TIME' | 'LOG_APPEND_TIME' | 'NO_TIMESTAMP_TYPE';

/** The dead-letter headers, decoded by `readDeadLetterHeaders` (read-headers.ts). */
export interface DeadLetterHeaders {
  originalTopic: string;
  originalPartition: number;
  originalOffset: bigint;
  originalTimestamp: bigint;
  originalTimestampType: OriginalTimestampType;
  /** Undefined when absent (Spring omits it when it does not know the group). */
  consumerGroup: string | undefined;
  exceptionFqcn: string | undefined;
  exceptionCauseFqcn: string | undefined;
  exceptionMessage: string | undefined;
  exceptionStacktrace: string | undefined;
  /** Undefined for records dead-lettered by something other than redfence. */
  reason: DeadLetterReason | undefined;
}

/** The header names, as Spring Kafka's `KafkaHeaders` constants spell them, plus our own. */
export const DEAD_LETTER_HEADERS = {
  originalTopic: 'kafka_dlt-original-topic',
  originalPartition: 'kafka_dlt-original-partition',
  originalOffset: 'kafka_dlt-original-offset',
  originalTimestamp: 'kafka_dlt-original-timestamp',
  originalTimestampType: 'kafka_dlt-original-timestamp-type',
  consumerGroup: 'kafka_dlt-original-consumer-group',
  exceptionFqcn: 'kafka_dlt-exception-fqcn',
  exceptionCauseFqcn: 'kafka_dlt-exception-cause-fqcn',
  exceptionMessage: 'kafka_dlt-exception-message',
  exceptionStacktrace: 'kafka_dlt-exception-stacktrace',
  reason: 'redfence-reason',
  stateApplied: 'redfence-state-applied',
} as const;

export const REASON_TEXT: Readonly<Record<DeadLetterReason, string>> = {
  'wrong-partition': 'The record is on a partition its key does not hash to.',
  undecodable: 'The record key or value could not be decoded.',
  rejected: 'The record was rejected by the application.',
  'processing-error': 'Processing the record failed.',
  oversized: 'The record exceeds the size limit.',
  'null-key': 'The record has no key.',
  late: 'The record arrived after the windows it falls in had closed.',
};

export const REASONS: ReadonlySet<string> = new Set(Object.keys(REASON_TEXT));

/** Spring's bytes for each timestamp type: Kafka's `TimestampType.toString()`. */
export const TIMESTAMP_TYPE_TEXT = {
  CREATE_TIME: 'CreateTime',
  LOG_APPEND_TIME: 'LogAppendTime',
} as const;

export const TIMESTAMP_TYPE_FROM_TEXT: Readonly<Record<string, OriginalTimestampType>> = {
  CreateTime: 'CREATE_TIME',
  LogAppendTime: 'LOG_APPEND_TIME',
  NoTimestampType: 'NO_TIMESTAMP_TYPE',
  CREATE_TIME: 'CREATE_TIME',
  LOG_APPEND_TIME: 'LOG_APPEND_TIME',
  NO_TIMESTAMP_TYPE: 'NO_TIMESTAMP_TYPE',
};

/** Spring's names as the four-layout reader (decode.ts) uses them: the same headers as above. */
export const SPRING = {
  topic: DEAD_LETTER_HEADERS.originalTopic,
  partition: DEAD_LETTER_HEADERS.originalPartition,
  offset: DEAD_LETTER_HEADERS.originalOffset,
  timestamp: DEAD_LETTER_HEADERS.originalTimestamp,
  group: DEAD_LETTER_HEADERS.consumerGroup,
  exception: DEAD_LETTER_HEADERS.exceptionFqcn,
  message: DEAD_LETTER_HEADERS.exceptionMessage,
  stacktrace: DEAD_LETTER_HEADERS.exceptionStacktrace,
} as const;

export const REDFENCE_REASON = DEAD_LETTER_HEADERS.reason;

/**
 * `redfence-state-applied: true`: the record's state changes were made before it failed (a topology
 * node threw downstream of an aggregation, docs/streams.md "A record that cannot be walked"). Sending it
 * back would apply them again (a count counted twice): `dlq replay` leaves it out unless told.
 *
 * @example
 * const applied = r.headers.get(STATE_APPLIED)?.at(-1)?.toString() === 'true';
 */
export const STATE_APPLIED = DEAD_LETTER_HEADERS.stateApplied;

/** Kafka Connect's `DeadLetterQueueReporter` (`errors.deadletterqueue.context.headers.enable`). */

export const CONNECT = {
  topic: '__connect.errors.topic',
  partition: '__connect.errors.partition',
  offset: '__connect.errors.offset',
  exception: '__connect.errors.exception.class.name',
  message: '__connect.errors.exception.message',
  stacktrace: '__connect.errors.exception.stacktrace',
  stage: '__connect.errors.stage',
  connector: '__connect.errors.connector.name',
  task: '__connect.errors.task.id',
} as const;

/** Kafka Streams' dead letters (KIP-1034, `ExceptionHandlerUtils`). */
export const STREAMS = {
  topic: '__streams.errors.topic',
  partition: '__streams.errors.partition',
  offset: '__streams.errors.offset',
  exception: '__streams.errors.exception',
  message: '__streams.errors.message',
  stacktrace: '__streams.errors.stacktrace',
} as const;

/** The headers a dead-letter writer adds: stripped from a replayed record (src/dead-letter/replay.ts). */
export function isDeadLetterHeader(name: string): boolean {
  return (
    name.startsWith('kafka_dlt-') ||
    name === REDFENCE_REASON ||
    name === STATE_APPLIED ||
    name.startsWith('__connect.errors.') ||
    name.startsWith('__streams.errors.')
  );
}
