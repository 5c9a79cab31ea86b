/**
 * The OpenTelemetry semantic-convention names redfence's spans use, pinned here (not imported from
 * `@opentelemetry/semantic-conventions`, whose incubating names change in minor releases).
 *
 * Checked against OpenTelemetry semantic conventions v1.45.0 (docs/messaging/messaging-spans.md and
 * docs/messaging/kafka.md, the attribute registry; `@opentelemetry/semantic-conventions` 1.45.0):
 * - span names are `{messaging.operation.name} {destination}` (`process orders`, `send totals`);
 * - `process` spans are CONSUMER; a `send` span whose context is not the messages' creation context is
 *   CLIENT (ours: the outputs carry the batch's `process` span as their creation context);
 * - a batch `process` span links to each message's creation context; a span for one message may take it
 *   as its parent instead;
 * - v1.45.0 renamed `messaging.system` to `messaging.system.name` and `messaging.kafka.offset` to
 *   `kafka.offset`. The messaging conventions are still in development and most backends and
 *   instrumentations read the earlier names, so both are written (a handful of bytes per span).
 * Never recorded: `kafka.message.key` / `messaging.kafka.message.key` (keys are often personal data),
 * record values, error messages (they may quote a value).
 */

export const SEMCONV_VERSION = '1.45.0';

export const ATTR = {
  messagingSystem: 'messaging.system',
  messagingSystemName: 'messaging.system.name',
  destinationName: 'messaging.destination.name',
  partitionId: 'messaging.destination.partition.id',
  consumerGroup: 'messaging.consumer.group.name',
  operationType: 'messaging.operation.type',
  operationName: 'messaging.operation.name',
  batchCount: 'messaging.batch.message_count',
  kafkaOffset: 'kafka.offset',
  messagingKafkaOffset: 'messaging.kafka.offset',
  errorType: 'error.type',
  dbSystemName: 'db.system.name',
  exceptionType: 'exception.type',
  exceptionStacktrace: 'exception.stacktrace',
  // redfence's own, under its own namespace
  attempt: 'redfence.attempt',
  epoch: 'redfence.epoch',
  fenced: 'redfence.fenced',
  outputs: 'redfence.outputs',
  mode: 'redfence.mode',
  batches: 'redfence.batches',
  inputRecords: 'redfence.input.message_count',
  errorCode: 'redfence.error.code',
  // the topology processor's batch spans
  deadLetters: 'redfence.dead_letters',
  applicationId: 'redfence.topology.application_id',
  subTopology: 'redfence.topology.subtopology',
  dropped: 'redfence.topology.dropped',
  nodeNames: 'redfence.topology.node.names',
  nodeIn: 'redfence.topology.node.in',
  nodeOut: 'redfence.topology.node.out',
} as const;

export const KAFKA = 'kafka';
export const REDIS = 'redis';

/** `messaging.operation.type` (and `.name`: Kafka has no more specific operation names for these). */
export const OPERATION = { process: 'process', send: 'send' } as const;

/** The name of the Redis step's span. */
export const FENCE_SPAN = 'fence apply';

/** The W3C Trace Context headers carried on records. */
export const TRACEPARENT = 'traceparent';
export const TRACESTATE = 'tracestate';

/** At most this many span links per span (a batch's inputs, a Kafka step's batches). */
export const MAX_LINKS = 128;
