/**
 * `redfence run <module>`: loads a module whose default export (or `processor` export) is a processor
 * definition, and runs it until SIGTERM/SIGINT (drain, commit, disconnect within --shutdown-timeout; a
 * second signal exits at once). Every option is checked and the module loaded before any connection.
 * With --workers n > 1 this process supervises n workers instead (workers.ts), each running this verb
 * as worker i of n.
 */
import { randomBytes } from 'node:crypto';
import { RedfenceError } from '../errors/index.js';
import type { ProcessingMode, Processor, ProcessorOptions, startMetricsServer } from '../index.js';
import { MAX_TIMER_MS } from '../processor/option-checks.js';
import { CONNECTION_OPTIONS, modulePositional } from './connection.js';
import { type KafkaSecurity, kafkaSecurity } from './kafka-options.js';
import { loadRunnable } from './load.js';
import { jsonLogger, LOG_LEVELS } from './log.js';
import {
  choiceOption,
  helpText,
  numberOption,
  parseOptions,
  switchOption,
  textOption,
  type Values,
} from './options.js';
import { connectRedis, redisClient, redisTarget, showRedisUrl } from './redis.js';
import { checkHandlerFlags, runHandler } from './run-handler.js';
import { superviseWorkers, watchSupervisor, workerRole, workerStarted } from './workers.js';

const MODES: readonly ProcessingMode[] = ['exactly-once', 'at-least-once'];
const INSTANCE_ID = /^[A-Za-z0-9._-]{1,200}$/;

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
    description: 'serve /metrics, /livez and /readyz on 127.0.0.1:<n> (with --workers: worker i on <n>+i)',
    env: 'REDFENCE_METRICS_PORT',
    min: 1,
    max: 65535,
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
  'commit-interval': numberOption('<ms>', {
    description:
      'least time between two Kafka steps (as Kafka Streams commit.interval.ms): fewer, larger transactions for that much more latency',
    env: 'REDFENCE_COMMIT_INTERVAL_MS',
    defaultText: '0',
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
      "processors: snapshot the owned partitions' state into a compacted topic, a pass at most every <ms>, for `redfence rebuild` (docs/operations.md)",
    env: 'REDFENCE_SNAPSHOT_INTERVAL_MS',
    defaultText: 'off',
    min: 100,
    max: MAX_TIMER_MS,
  }),
  'snapshot-topic': textOption('<name>', {
    description: 'the snapshot topic (with --snapshot-interval)',
    env: 'REDFENCE_SNAPSHOT_TOPIC',
    defaultText: '<store>-snapshot',
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
  'Runs the processor or handler exported by <module> (default export, "processor" or "handler"): a .ts,\n.mts, .cts, .js, .mjs or .cjs file.',
  RUN_OPTIONS,
);

/** What the options set on the processor: everything but the definition, the clients and the hooks. */
export type ProcessorSettings = Omit<
  ProcessorOptions,
  'definition' | 'redis' | 'logger' | 'metrics' | 'health' | 'onFatal'
>;

export function processorSettings(
  o: Values<typeof RUN_OPTIONS>,
  instance: string,
  security: KafkaSecurity = {},
): ProcessorSettings {
  const kafka: Extract<ProcessorOptions['kafka'], { brokers: string[] }> = {
    brokers: o.brokers,
    ...security,
  };
  if (o['session-timeout'] !== undefined) kafka.sessionTimeoutMs = o['session-timeout'];
  if (o.static) kafka.groupInstanceId = instance;
  if (o['group-protocol'] !== undefined) kafka.groupProtocol = o['group-protocol'];
  if (o['max-batch-size'] !== undefined) kafka.maxBatchSize = o['max-batch-size'];
  if (o['transaction-timeout'] !== undefined) kafka.transactionTimeoutMs = o['transaction-timeout'];
  const s: ProcessorSettings = {
    kafka,
    mode: o.mode,
    instanceId: instance,
    requireNoEviction: !o['allow-eviction'],
  };
  if (o.group !== undefined) s.groupId = o.group;
  if (o['group-commit-records'] !== undefined) s.groupCommitRecords = o['group-commit-records'];
  if (o['commit-interval'] !== undefined) s.commitIntervalMs = o['commit-interval'];
  if (o['user-retries'] !== undefined) s.userRetries = o['user-retries'];
  if (o['sweep-every'] !== undefined) s.sweepEvery = o['sweep-every'];
  if (o['wait-replicas'] !== undefined)
    s.waitReplicas = { replicas: o['wait-replicas'], timeoutMs: o['wait-timeout'] };
  if (o['create-topics']) s.createTopics = true;
  if (o['replication-factor'] !== undefined) s.replicationFactor = o['replication-factor'];
  if (o['snapshot-interval'] !== undefined)
    s.snapshot = {
      intervalMs: o['snapshot-interval'],
      ...(o['snapshot-topic'] === undefined ? {} : { topic: o['snapshot-topic'] }),
      ...(o['snapshot-rate'] === undefined ? {} : { maxKeysPerSecond: o['snapshot-rate'] }),
    };
  if (o.tracing) s.tracing = true;
  return s;
}

const invalid = (message: string) => new RedfenceError('RF_INVALID_OPTIONS', message);

export async function run(args: readonly string[], out: (s: string) => void): Promise<number> {
  const { values: o, sources, positionals, help } = parseOptions(RUN_OPTIONS, args);
  if (help) {
    out(RUN_HELP);
    return 0;
  }
  const file = modulePositional('run', positionals);
  if (o.static && o.instance === undefined)
    throw invalid('--static needs --instance <id> (the id a replacement reuses to take over)');
  if (o['replication-factor'] !== undefined && !o['create-topics'])
    throw invalid('--replication-factor applies to the topics --create-topics makes; add --create-topics');
  if (sources['wait-timeout'] !== 'default' && o['wait-replicas'] === undefined)
    throw invalid('--wait-timeout applies to --wait-replicas; add --wait-replicas <n>');
  for (const name of ['snapshot-topic', 'snapshot-rate'] as const)
    if (o[name] !== undefined && o['snapshot-interval'] === undefined)
      throw invalid(`--${name} applies to snapshots; add --snapshot-interval <ms>`);
  const target = redisTarget(o, sources);
  const security = kafkaSecurity(o);
  if (o.tracing) await tracingApi();
  const worker = workerRole();
  const workers = worker === undefined ? o.workers : 1;
  if (workers > 1) checkWorkers(o);
  // The processor's own default, chosen here so that every log line carries it (and every worker shares it).
  const base = worker?.base ?? o.instance ?? randomBytes(4).toString('hex');
  const instance = worker === undefined ? base : `${base}-${worker.index}`;
  const logger = jsonLogger(o.log, instance, worker === undefined ? {} : { worker: worker.index });
  const loaded = await loadRunnable(file);
  const handler = 'handle' in loaded || 'cache' in loaded;
  checkHandlerFlags(handler, sources);
  if (workers > 1)
    return superviseWorkers({
      count: workers,
      instance: base,
      args,
      shutdownTimeoutMs: o['shutdown-timeout'],
      logger,
    });
  const metricsPort = o['metrics-port'] === undefined ? undefined : o['metrics-port'] + (worker?.index ?? 0);
  if ('handle' in loaded || 'cache' in loaded)
    return runHandler({ o, sources, definition: loaded, instance, logger, target, worker, metricsPort });
  const definition = loaded;

  // The runtime loads only now: bad options are refused without it.
  const { HealthState, Processor, RedfenceMetrics, startMetricsServer } = await import('../index.js');
  const redis = await redisClient(target, logger);
  const metrics = new RedfenceMetrics();
  const health = new HealthState();
  let server: Awaited<ReturnType<typeof startMetricsServer>> | undefined;
  const options: ProcessorOptions = {
    ...processorSettings(o, instance, security),
    definition,
    redis,
    onFatal: (err) => {
      logger.error({ err: err.message }, 'processor stopped after a fatal error');
      void server?.close();
      redis.disconnect();
      process.exit(1);
    },
    logger,
    metrics,
    health,
  };
  let processor: Processor;
  try {
    processor = new Processor(options);
  } catch (err) {
    redis.disconnect();
    throw err;
  }

  const deadline = o['shutdown-timeout'];
  let signals = 0;
  let release: (() => void) | undefined;
  const stopped = new Promise<number>((resolveStop) => {
    const onSignal = (sig: string) => {
      signals++;
      // A second signal exits at once; a worker's supervisor enforces the deadline itself, and a worker
      // may get a signal twice (the supervisor's forward and a terminal's or systemd's to the group).
      if (signals > 1 && worker === undefined) process.exit(130);
      if (signals > 1) return;
      logger.info({ signal: sig }, 'shutting down');
      const timer = setTimeout(() => {
        logger.error({ deadline }, 'graceful shutdown timed out');
        process.exit(1);
      }, deadline);
      timer.unref();
      processor
        .close()
        .then(() => server?.close())
        .then(
          () => {
            redis.disconnect();
            resolveStop(0);
          },
          () => resolveStop(1),
        );
    };
    process.on('SIGTERM', () => onSignal('SIGTERM'));
    process.on('SIGINT', () => onSignal('SIGINT'));
    if (worker !== undefined) release = watchSupervisor(() => onSignal('supervisor gone'));
  });
  try {
    await connectRedis(redis, target, o['connect-timeout']);
    if (metricsPort !== undefined) server = await startMetricsServer({ metrics, health, port: metricsPort });
    await processor.start();
  } catch (err) {
    // A failed start must not leave the process hanging on open clients or the metrics server.
    await processor.close().catch(() => undefined);
    await server?.close().catch(() => undefined);
    redis.disconnect();
    release?.();
    throw err;
  }
  if (worker !== undefined) workerStarted(processor.inputPartitions);
  return stopped.finally(() => release?.());
}

/**
 * --tracing: the library's own check that @opentelemetry/api can be imported (RF_INVALID_OPTIONS naming
 * the install), made here because the CLI connects Redis before start() would make it.
 */
async function tracingApi(): Promise<void> {
  const { Tracing } = await import('../telemetry/tracing.js');
  await new Tracing({ tracer: undefined }, { groupId: 'redfence' }).load();
}

/** What --workers adds to the checks: every worker's metrics port and instance id must be valid. */
function checkWorkers(o: Values<typeof RUN_OPTIONS>): void {
  const last = o.workers - 1;
  const port = o['metrics-port'];
  if (port !== undefined && port + last > 65535)
    throw invalid(
      `--metrics-port ${port} with --workers ${o.workers}: worker i serves on ${port}+i, and ${port + last} is above 65535`,
    );
  if (o.instance !== undefined && !INSTANCE_ID.test(`${o.instance}-${last}`))
    throw invalid(
      `--instance with --workers ${o.workers}: worker ids are <instance>-<i>, and "${o.instance}-${last}" is longer than 200 characters`,
    );
}
