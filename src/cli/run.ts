/**
 * `redfence run <module>`: loads a module whose default export (or `processor` export) is a processor
 * definition (a handler: run-handler.ts; a built topology: run-topology.ts), and runs it until SIGTERM/SIGINT (drain, commit, disconnect within --shutdown-timeout; a
 * second signal exits at once). Every option is checked and the module loaded before any connection.
 * With --workers n > 1 this process supervises n workers instead (workers.ts), each running this verb
 * as worker i of n.
 */
import { randomBytes } from 'node:crypto';
import { RedfenceError } from '../errors/index.js';
import type { Processor, ProcessorOptions } from '../index.js';
import { isBuiltTopology, loadRunnable } from '../loader/load.js';
import { crashHookFromEnv } from '../processor/crash-points.js';
import { modulePositional } from './connection.js';
import { type KafkaSecurity, kafkaSecurity } from './kafka-options.js';
import { jsonLogger } from './log.js';
import { parseOptions, type Values } from './options.js';
import { connectRedis, redisClient, redisTarget } from './redis.js';
import { checkMetricsFlags } from './run-console.js';
import { checkHandlerFlags, runHandler } from './run-handler.js';
import { INSTANCE_ID, RUN_HELP, RUN_OPTIONS } from './run-options.js';
import { checkTopologyFlags, runTopology } from './run-topology.js';
import { type MetricsServer, serveMetrics, serveUntilSignal } from './serve.js';
import { superviseWorkers, workerRole } from './workers.js';

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
  if (o['partitions-in-flight'] !== undefined) s.partitionsInFlight = o['partitions-in-flight'];
  if (o['user-retries'] !== undefined) s.userRetries = o['user-retries'];
  if (o['sweep-every'] !== undefined) s.sweepEvery = o['sweep-every'];
  if (o['owner-cache'] !== undefined)
    s.ownerCache = o['owner-cache'] === 0 ? false : { maxBytes: o['owner-cache'] };
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
  checkMetricsFlags(o);
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
  const topology = isBuiltTopology(loaded);
  if (topology) checkTopologyFlags(sources);
  else checkHandlerFlags('handle' in loaded || 'cache' in loaded, sources);
  if (workers > 1)
    return superviseWorkers({
      count: workers,
      instance: base,
      args,
      shutdownTimeoutMs: o['shutdown-timeout'],
      logger,
    });
  const metricsPort = o['metrics-port'] === undefined ? undefined : o['metrics-port'] + (worker?.index ?? 0);
  if (topology) {
    const settings = processorSettings(o, instance, security);
    return runTopology({ o, built: loaded, settings, logger, target, metricsPort, worker });
  }
  if ('handle' in loaded || 'cache' in loaded)
    return runHandler({ o, sources, definition: loaded, instance, logger, target, worker, metricsPort });
  const definition = loaded;

  // fault tests' crash point (REDFENCE_CRASH_AT): a wrong name is refused here, before any connection
  const crashHook = crashHookFromEnv();
  // The runtime loads only now: bad options are refused without it.
  const { HealthState, Processor, RedfenceMetrics } = await import('../index.js');
  const redis = await redisClient(target, logger);
  const metrics = new RedfenceMetrics();
  const health = new HealthState();
  let server: MetricsServer | undefined;
  const options: ProcessorOptions = {
    ...processorSettings(o, instance, security),
    definition,
    redis,
    ...(crashHook ? { crashHook } : {}),
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

  return serveUntilSignal({
    service: processor,
    logger,
    worker,
    deadlineMs: o['shutdown-timeout'],
    boot: async () => {
      await connectRedis(redis, target, o['connect-timeout']);
      server = await serveMetrics(o, {
        metrics,
        health,
        port: metricsPort,
        console: {
          redis,
          cluster: target.kind === 'cluster',
          instance,
          group: processor.groupId,
          dlqTopic: definition.deadLetter ?? `${definition.input}.DLT`,
          prometheus: o['console-prometheus'],
        },
      });
    },
    release: async () => {
      await server?.close().catch(() => undefined);
      redis.disconnect();
    },
  });
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
