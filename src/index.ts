/**
 * redfence: effectively-once Kafka stream processing with state in Redis.
 * The public API. Everything exported here is documented in README.md and docs/.
 */

export {
  buildDeadLetter,
  DEAD_LETTER_HEADERS,
  type DeadLetterHeaders,
  type DeadLetterInput,
  type DeadLetterOptions,
  type DeadLetterReason,
  type DeadLetterRecord,
  type HeaderValue,
  type OriginalTimestampType,
  type SourceRecord as DeadLetterSource,
} from './dead-letter/build.js';
export { type DlqHeaders, decodeRetryTopicHeaders, type RetryTopicInfo } from './dead-letter/decode.js';
export { readDeadLetterHeaders } from './dead-letter/read-headers.js';
export {
  defineProcessor,
  type OperationProcessor,
  type ProcessorCommon,
  type ProcessorDefinition,
  type RecordMeta,
  type ReducerProcessor,
  type Reduction,
} from './definition/definition.js';
export {
  defineHandler,
  type HandlerContext,
  type HandlerDefinition,
  type HandlerRecord,
  type OnceResult,
  type SqlClient,
} from './definition/handler.js';
export { ERROR_CODES, type ErrorCode, RedfenceError, type RedfenceErrorOptions } from './errors/index.js';
export {
  type ApplyRequest,
  Fence,
  type FenceOptions,
  type FenceRecord,
  type FenceRedis,
  type FenceToken,
  type FencingMode,
  type Operation,
  type Output,
  type OutputSpec,
  type PendingEntry,
  type RecordResult,
  type RedisArg,
  type StoredState,
  Verdict,
} from './fence/index.js';
export {
  createHandler,
  createProcessedTable,
  Handler,
  type HandlerCounts,
  type HandlerOptions,
  type HandlerState,
  type PostgresOptions,
  processedTableSql,
  RateLimited,
  type RetryOptions,
  type SqlPool,
} from './handler/index.js';
export type {
  OAuthBearerProvider,
  OAuthBearerToken,
  PasswordMechanism,
  SaslSettings,
  SecurityProtocol,
  SslSettings,
} from './kafka/client-config.js';
export type {
  AuthorizedOperations,
  CommitOffset,
  CommittedOffset,
  ConsumerHandlers,
  Headers,
  InRecord,
  KafkaPort,
  OutRecord,
  TopicPartition,
  TopicSpec,
} from './kafka/types.js';
export { type KeyEncoding, KeySpace, type KeySpaceOptions } from './keys/index.js';
export {
  type CommitMode,
  type HandlerOutcome,
  type HealthPart,
  type HealthSnapshot,
  HealthState,
  type HealthStateOptions,
  type MetricsMount,
  type MetricsRegistry,
  type MetricsServer,
  type MetricsServerOptions,
  type OffsetResetReason,
  type RebalanceKind,
  RedfenceMetrics,
  type RedfenceMetricsOptions,
  startMetricsServer,
  type TopologyDropReason,
  type TopologyNodes,
} from './metrics/index.js';
export type { PartitionProgress } from './metrics/lag-board.js';
/** The transactional outbox (docs/outbox.md): `outbox.enqueue(client, event)`, `outbox.initOutbox`, the relay. */
export * as outbox from './outbox/index.js';
export { type OutboxEvent, OutboxRelay, type RelayOptions as OutboxRelayOptions } from './outbox/index.js';
export { type PartitionKey, partitionFor } from './partitioner/index.js';
export type { ProcessorCounts } from './processor/counts.js';
export {
  type ClientConfig,
  type KafkaOptions,
  type OwnerCacheOptions,
  PROCESSING_MODES,
  type ProcessingMode,
  type ProcessorOptions,
  type WaitReplicasOptions,
  type WatchdogOptions,
} from './processor/options.js';
export { createProcessor, Processor, type ProcessorState } from './processor/processor.js';
export type { SnapshotOptions } from './processor/snapshot-options.js';
export type { SnapshotStats } from './processor/snapshotter.js';
export {
  type TopologyCounts,
  TopologyProcessor,
  type TopologyProcessorOptions,
} from './processor/topology/processor.js';
export {
  type Classification,
  type ClassifyRules,
  type ClassRules,
  classify,
  type ErrorClass,
} from './retry/classify.js';
export {
  RETRY_TOPIC_HEADERS,
  type RetryBackoff,
  type RetryTopicsOptions,
  retryTopicName,
} from './retry/retry-topics.js';
export type { KafkaSasl, KafkaSsl } from './runtime/kafka-options.js';
export type { RuntimeState } from './runtime/lifecycle.js';
export type { Logger } from './runtime/logger.js';
export type { RuntimeOptions } from './runtime/options.js';
export type { StateStamp } from './store/index.js';
export type { TracerLike, TracingOption } from './telemetry/options.js';
export { ATTR as TRACE_ATTRIBUTES, SEMCONV_VERSION } from './telemetry/semconv.js';
export {
  type AggregateParams,
  BranchedKStream,
  type BuiltTopology,
  type Consumed,
  type Grouped,
  KGroupedStream,
  KStream,
  KTable,
  type Materialized,
  type Named,
  type Produced,
  type Repartitioned,
  type RepartitionSpec,
  type Serde,
  SessionWindowedKStream,
  SessionWindows,
  SlidingWindows,
  type SplitBranch,
  type StoreSpec,
  type SubTopology,
  serdes,
  TimeWindowedKStream,
  TimeWindows,
  type TopologyBuilder,
  type TopologyEdge,
  type TopologyNode,
  type TopologyOptions,
  topology,
  type WindowBounds,
  type Windowed,
  WindowedStreamBase,
  type WindowSpec,
  type Windows,
} from './topology/index.js';
export {
  type ModelDeadLetter,
  type ModelDrop,
  type ModelErrorDeadLetter,
  type ModelHeaders,
  type ModelInput,
  type ModelMisplaced,
  type ModelOptions,
  type ModelOutput,
  type ModelResult,
  type ModelSource,
  runModel,
} from './topology/model.js';
export { type StateStoreInfo, TopologyState, type TopologyStateOptions } from './topology/state/state.js';
export type {
  KeyValueAnswer,
  ReadOnlyKeyValueStore,
  ReadOnlySessionStore,
  ReadOnlyWindowStore,
  SessionEntry,
  SessionFetchAnswer,
  TopologyStamp,
  WindowEntry,
  WindowFetchAnswer,
} from './topology/state/stores.js';
export { isTick, TICK_HEADER } from './topology/tick.js';
export { VERSION } from './version.js';
