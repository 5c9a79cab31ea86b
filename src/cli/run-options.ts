/**
 * The options and help text of `redfence run` (src/cli/run.ts runs a processor with them,
 * src/cli/run-handler.ts a handler).
 */
import type { ProcessingMode } from '../index.js';
import { MAX_TIMER_MS } from '../options/checks.js';
import {
  IDLE_CLOSE_MAX_MS,
  IDLE_CLOSE_MIN_MS,
  PATTERN_REFRESH_DEFAULT_MS,
  PATTERN_REFRESH_MAX_MS,
  PATTERN_REFRESH_MIN_MS,
} from '../processor/topology/options.js';
import { CONNECTION_OPTIONS } from './connection.js';
import { LOG_LEVELS } from './log.js';
import { choiceOption, helpText, maskUrl, numberOption, switchOption, textOption } from './options.js';
import { showRedisUrl } from './redis-options.js';

const MODES: readonly ProcessingMode[] = ['exactly-once', 'at-least-once'];
export const INSTANCE_ID = /^[A-Za-z0-9._-]{1,200}$/;

export const RUN_OPTIONS = {
  ...CONNECTION_OPTIONS,
  mode: choiceOption(MODES, {
    description: 'processing mode',
    env: 'REDFENCE_MODE',
    default: 'exactly-once',
  }),
  group: textOption('<id>', {
    description: 'consumer group',
    env: 'REDFENCE_GROUP',
    defaultText: 'redfence-<store>',
  }),
  instance: textOption('<id>', {
    description: "this instance's id, part of its transactional id (and its group.instance.id with --static)",
    env: 'REDFENCE_INSTANCE',
    defaultText: 'random',
    allowed: 'letters, digits, ".", "_" or "-" (at most 200)',
    pattern: INSTANCE_ID,
  }),
  workers: numberOption('<n>', {
    description:
      'worker processes, one core each: worker i runs one processor of the group as instance <instance>-<i> (with --metrics-port p, serving on p+i); 1: this process runs it',
    env: 'REDFENCE_WORKERS',
    default: 1,
    min: 1,
    max: 64,
  }),
  'metrics-port': numberOption('<n>', {
    description:
      'serve /metrics, /livez and /readyz on <n> of --metrics-host (with --workers: worker i on <n>+i)',
    env: 'REDFENCE_METRICS_PORT',
    min: 1,
    max: 65535,
  }),
  'metrics-host': textOption('<address>', {
    description:
      'address the metrics server listens on, and registers (0.0.0.0 or ::: every interface, registered as the hostname; anything but loopback exposes /metrics and --console)',
    env: 'REDFENCE_METRICS_HOST',
    default: '127.0.0.1',
    allowed: 'an IP address or localhost',
    pattern: /^(localhost|[0-9.]+|[0-9a-fA-F:]+)$/,
  }),
  console: switchOption({
    description:
      'serve the console read-only on the metrics server under /console (its instances, lag of its group, inspector, dead letters; needs --metrics-port and a Redis)',
    env: 'REDFENCE_METRICS_CONSOLE',
  }),
  'console-prometheus': textOption('<url>', {
    description:
      "with --console: the Prometheus that evaluates redfence's alert rules, for the Instances view (credentials in the URL are sent, never shown)",
    env: 'REDFENCE_METRICS_CONSOLE_PROMETHEUS',
    allowed: 'an http:// or https:// URL',
    pattern: /^https?:\/\/\S+$/,
    show: maskUrl,
  }),
  'session-timeout': numberOption('<ms>', {
    description: 'consumer session timeout',
    env: 'REDFENCE_SESSION_TIMEOUT_MS',
    defaultText: '10000',
    min: 1000,
    max: 3_600_000,
  }),
  static: switchOption({
    description:
      "static group membership: --instance is the consumer's group.instance.id, so a replacement started with the same --instance takes over its partitions at once, without waiting for the session timeout (needs --instance)",
    env: 'REDFENCE_STATIC',
  }),
  'group-protocol': choiceOption(['classic', 'consumer'] as const, {
    description: 'consumer group protocol (consumer: KIP-848)',
    env: 'REDFENCE_GROUP_PROTOCOL',
    defaultText: 'classic',
  }),
  'group-commit-records': numberOption('<n>', {
    description:
      'at most n applied records wait for the Kafka step in flight to go together in the next one; 0: one produce + commit (or transaction) per batch',
    env: 'REDFENCE_GROUP_COMMIT_RECORDS',
    defaultText: '2000',
    min: 0,
  }),
  'partitions-in-flight': numberOption('<n>', {
    description:
      "at most n partitions' batches in the Redis stage at once (never two of one partition); 1: one batch at a time",
    env: 'REDFENCE_PARTITIONS_IN_FLIGHT',
    defaultText: '1',
    min: 1,
    max: 64,
  }),
  'commit-interval': numberOption('<ms>', {
    description:
      'least time between two Kafka steps (as Kafka Streams commit.interval.ms): fewer, larger transactions for that much more latency',
    env: 'REDFENCE_COMMIT_INTERVAL_MS',
    defaultText: '100 exactly-once, 0 at-least-once',
    min: 0,
    max: 60_000,
  }),
  'max-batch-size': numberOption('<n>', {
    description: 'most records handed to the processor in one batch',
    env: 'REDFENCE_MAX_BATCH_SIZE',
    defaultText: 'the Kafka adapter default',
    min: 1,
  }),
  'transaction-timeout': numberOption('<ms>', {
    description: "exactly-once: the broker aborts a dead instance's open transaction after this long",
    env: 'REDFENCE_TRANSACTION_TIMEOUT_MS',
    defaultText: '10000',
    min: 1000,
    max: 900_000,
  }),
  'user-retries': numberOption('<n>', {
    description: 'retries of a user function that throws a retriable error, before dead-lettering',
    env: 'REDFENCE_USER_RETRIES',
    defaultText: '3',
    min: 0,
    max: 100,
  }),
  'owner-cache': numberOption('<bytes>', {
    description:
      "owner-local state: keep up to this many bytes of the owned keys' state (a reducer's, a topology's reduce and aggregate) and fold without reading Redis; 0: off",
    env: 'REDFENCE_OWNER_CACHE',
    defaultText: '16777216',
    min: 0,
  }),
  'sweep-every': numberOption('<n>', {
    description: 'sweep pending outputs of keys not written again every n committed batches per partition',
    env: 'REDFENCE_SWEEP_EVERY',
    defaultText: '20',
    min: 1,
  }),
  'wait-replicas': numberOption('<n>', {
    description:
      "after each cycle's Redis writes and each epoch raise, WAIT for n replicas to have them before committing",
    env: 'REDFENCE_WAIT_REPLICAS',
    min: 1,
    max: 100,
  }),
  'wait-timeout': numberOption('<ms>', {
    description: 'how long --wait-replicas waits for the replicas',
    env: 'REDFENCE_WAIT_TIMEOUT_MS',
    default: 1000,
    min: 1,
  }),
  'idle-close': numberOption('<ms>', {
    description:
      "topologies: a partition of a windowed aggregation's topic idle this long gets a tick (a record with the header redfence-tick) so its windows close with no further record; other readers of the topic see the ticks",
    env: 'REDFENCE_IDLE_CLOSE_MS',
    defaultText: 'off',
    min: IDLE_CLOSE_MIN_MS,
    max: IDLE_CLOSE_MAX_MS,
  }),
  'pattern-refresh': numberOption('<ms>', {
    description:
      'topologies reading a pattern: how often the running instance lists the topics; a matching topic made meanwhile is read from then on',
    env: 'REDFENCE_PATTERN_REFRESH_MS',
    default: PATTERN_REFRESH_DEFAULT_MS,
    min: PATTERN_REFRESH_MIN_MS,
    max: PATTERN_REFRESH_MAX_MS,
  }),
  'create-topics': switchOption({
    description:
      "create missing output and dead-letter topics with the input's partition count (otherwise a missing topic stops start-up)",
    env: 'REDFENCE_CREATE_TOPICS',
  }),
  'replication-factor': numberOption('<n>', {
    description: 'replication factor of the topics --create-topics makes',
    env: 'REDFENCE_REPLICATION_FACTOR',
    defaultText: "the broker's default",
    min: 1,
    max: 32767,
  }),
  concurrency: numberOption('<n>', {
    description: 'handlers: most handle() calls running at once',
    env: 'REDFENCE_CONCURRENCY',
    defaultText: '64',
    min: 1,
    max: 100_000,
  }),
  'attempt-timeout': numberOption('<ms>', {
    description:
      'handlers: a handle() call past this aborts ctx.signal and, when it throws, fails as retriable (RF_HANDLER_TIMEOUT); 0: none',
    env: 'REDFENCE_ATTEMPT_TIMEOUT_MS',
    defaultText: '0',
    min: 0,
    max: 2_147_483_647,
  }),
  postgres: textOption('<url>', {
    description:
      'handlers: PostgreSQL for ctx.transaction (needs the pg package; give a password through the environment, not a flag)',
    env: 'REDFENCE_POSTGRES_URL',
    allowed: 'a postgres:// or postgresql:// URL',
    pattern: /^postgres(ql)?:\/\/./,
    show: showRedisUrl,
  }),
  'postgres-table': textOption('<name>', {
    description: 'handlers: the processed-ids table, <table> or <schema>.<table>',
    env: 'REDFENCE_POSTGRES_TABLE',
    defaultText: 'redfence_processed',
    allowed: '<table> or <schema>.<table> of [A-Za-z_][A-Za-z0-9_]*',
    pattern: /^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$/,
  }),
  'snapshot-interval': numberOption('<ms>', {
    description:
      "processors and topologies: snapshot the owned partitions' state into a compacted topic, a pass at most every <ms>, for `redfence rebuild` (docs/operations.md)",
    env: 'REDFENCE_SNAPSHOT_INTERVAL_MS',
    defaultText: 'off',
    min: 100,
    max: MAX_TIMER_MS,
  }),
  'snapshot-topic': textOption('<name>', {
    description: 'the snapshot topic (with --snapshot-interval)',
    env: 'REDFENCE_SNAPSHOT_TOPIC',
    defaultText: '<store>-snapshot (a topology: <applicationId>-snapshot)',
    allowed: 'a Kafka topic name (1-249 of [A-Za-z0-9._-])',
    pattern: /^[A-Za-z0-9._-]{1,249}$/,
  }),
  'snapshot-rate': numberOption('<keys/s>', {
    description: 'most keys a snapshot pass reads per second (with --snapshot-interval); 0: no limit',
    env: 'REDFENCE_SNAPSHOT_RATE',
    defaultText: '0',
    min: 0,
    max: 10_000_000,
  }),
  tracing: switchOption({
    description:
      'OpenTelemetry spans from the global tracer provider (needs @opentelemetry/api; register the SDK with node --import: docs/operations.md, "Traces")',
    env: 'REDFENCE_TRACING',
  }),
  'allow-eviction': switchOption({
    description: "start even if Redis' maxmemory-policy is not noeviction",
    env: 'REDFENCE_ALLOW_EVICTION',
  }),
  'shutdown-timeout': numberOption('<ms>', {
    description: 'graceful shutdown deadline',
    env: 'REDFENCE_SHUTDOWN_TIMEOUT_MS',
    default: 15_000,
    min: 1,
  }),
  log: choiceOption(LOG_LEVELS, {
    description: 'JSON logs to stderr at this level',
    env: 'REDFENCE_LOG',
    default: 'info',
  }),
};

export const RUN_HELP = helpText(
  'redfence run <module> [options]',
  'Runs the processor, handler or built topology exported by <module> (default export, "processor" or\n"handler"): a .ts, .mts, .cts, .js, .mjs or .cjs file.',
  RUN_OPTIONS,
);
