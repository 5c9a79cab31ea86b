/**
 * `redfence run <module>` when the module's default export is a built topology (`topology(...).build()`):
 * a TopologyProcessor with the processor's Kafka, group, mode and commit flags, its state in the Redis
 * target, until SIGTERM/SIGINT (drain, commit, disconnect within --shutdown-timeout; a second signal
 * exits at once). --tracing sets `tracing: true`, as for a processor (run.ts checks the API first).
 * Flags a topology does not take (the processor's fence and sweep flags, the handler's) are refused
 * before any connection; the snapshot flags set its `snapshot` option as a processor's. With --workers n each of the n worker processes the supervisor
 * forks (workers.ts) runs one TopologyProcessor in the one group, as a processor's workers do.
 * --console mounts the console on its metrics server (its group and dead-letter topic), as for a
 * processor. --idle-close sets `idleCloseMs` (the wall-clock close of idle partitions; a module that
 * exports no topology refuses it, run-handler.ts). Fault tests' crash point (`REDFENCE_CRASH_AT`, `REDFENCE_CRASH_AFTER`:
 * src/processor/crash-points.ts) is read as for a processor, a wrong name refused before any connection.
 */
import { RedfenceError } from '../errors/index.js';
import type { BuiltTopology, Logger, ProcessorOptions, TopologyProcessorOptions } from '../index.js';
import { crashHookFromEnv } from '../processor/crash-points.js';
import type { Source, Values } from './options.js';
import { connectRedis, type RedisTarget, redisClient } from './redis.js';
import type { RUN_OPTIONS } from './run-options.js';
import { type MetricsServer, serveMetrics, serveUntilSignal } from './serve.js';
import type { WorkerRole } from './workers.js';

const NOT_FOR_TOPOLOGIES = [
  'user-retries',
  'partitions-in-flight',
  'sweep-every',
  'concurrency',
  'attempt-timeout',
  'postgres',
  'postgres-table',
];

const invalid = (message: string) => new RedfenceError('RF_INVALID_OPTIONS', message);

/** Refuses the flags a topology does not take (given by flag, environment or --config). */
export function checkTopologyFlags(sources: Record<string, Source>): void {
  const wrong = NOT_FOR_TOPOLOGIES.filter((n) => sources[n] !== undefined && sources[n] !== 'default');
  if (wrong.length > 0)
    throw invalid(
      `${wrong.map((n) => `--${n}`).join(', ')} ${wrong.length === 1 ? 'does' : 'do'} not apply to a topology, and the module exports one`,
    );
}

export interface TopologyRun {
  o: Values<typeof RUN_OPTIONS>;
  built: BuiltTopology;
  /** What the flags set on a processor (run.ts's processorSettings): the topology takes part of it. */
  settings: Omit<ProcessorOptions, 'definition' | 'redis'>;
  logger: Logger;
  target: RedisTarget;
  /** --metrics-port, plus the worker's index under --workers. */
  metricsPort: number | undefined;
  /** Set when a supervisor forked this process (--workers). */
  worker: WorkerRole | undefined;
}

/** The options the flags set: the processor's, less what a topology does not take. */
export function topologySettings(
  p: Omit<ProcessorOptions, 'definition' | 'redis'>,
): Omit<TopologyProcessorOptions, 'topology' | 'redis'> {
  return {
    kafka: p.kafka,
    ...(p.instanceId === undefined ? {} : { instanceId: p.instanceId }),
    ...(p.mode === undefined ? {} : { mode: p.mode }),
    ...(p.requireNoEviction === undefined ? {} : { requireNoEviction: p.requireNoEviction }),
    ...(p.groupId === undefined ? {} : { groupId: p.groupId }),
    ...(p.groupCommitRecords === undefined ? {} : { groupCommitRecords: p.groupCommitRecords }),
    ...(p.commitIntervalMs === undefined ? {} : { commitIntervalMs: p.commitIntervalMs }),
    ...(p.createTopics === undefined ? {} : { createTopics: p.createTopics }),
    ...(p.replicationFactor === undefined ? {} : { replicationFactor: p.replicationFactor }),
    ...(p.tracing === undefined ? {} : { tracing: p.tracing }),
    ...(p.ownerCache === undefined ? {} : { ownerCache: p.ownerCache }),
    ...(p.waitReplicas === undefined ? {} : { waitReplicas: p.waitReplicas }),
    ...(p.snapshot === undefined ? {} : { snapshot: p.snapshot }),
  };
}

export async function runTopology(r: TopologyRun): Promise<number> {
  const { o, logger, target, worker } = r;
  // fault tests' crash point (REDFENCE_CRASH_AT): a wrong name is refused here, before any connection
  const crashHook = crashHookFromEnv();
  const { HealthState, RedfenceMetrics, TopologyProcessor } = await import('../index.js');
  const redis = await redisClient(target, logger);
  const metrics = new RedfenceMetrics();
  const health = new HealthState();
  let server: MetricsServer | undefined;
  let processor: InstanceType<typeof TopologyProcessor>;
  try {
    processor = new TopologyProcessor({
      ...topologySettings(r.settings),
      ...(o['idle-close'] === undefined ? {} : { idleCloseMs: o['idle-close'] }),
      ...(o['pattern-refresh'] === undefined ? {} : { patternRefreshMs: o['pattern-refresh'] }),
      topology: r.built,
      redis,
      ...(crashHook ? { crashHook } : {}),
      logger,
      metrics,
      health,
      onFatal: (err) => {
        logger.error({ err: err.message }, 'topology processor stopped after a fatal error');
        void server?.close();
        redis.disconnect();
        process.exit(1);
      },
    });
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
        port: r.metricsPort,
        console: {
          redis,
          cluster: target.kind === 'cluster',
          instance: processor.instanceId,
          group: processor.groupId,
          dlqTopic: processor.deadLetterTopic,
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
