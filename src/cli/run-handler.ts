/**
 * `redfence run <module>` when the module exports a handler (defineHandler): the same verb, flags and
 * signal handling as for a processor, with the handler's own settings. Redis is connected only when a
 * Redis target is given (--redis, --cluster, --sentinels, or their environment variables): ctx.once
 * needs it, ctx.transaction does not. --postgres makes a pg Pool for ctx.transaction (pg is an
 * optional peer dependency, loaded only then). Flags that only mean something to a processor are
 * refused with a handler, and the handler's own flags with a processor, before any connection. A
 * cache invalidation definition (defineInvalidation of redfence/kit) runs here too, as
 * createInvalidation with the same settings: it needs a Redis target, and takes no --postgres.
 */

import type { Cluster, Redis } from 'ioredis';
import type { InvalidationDefinition } from '../definition/invalidation.js';
import { RedfenceError } from '../errors/index.js';
import type { SqlPool } from '../handler/postgres.js';
import type { HandlerDefinition, HandlerOptions, Logger } from '../index.js';
import { kafkaSecurity } from './kafka-options.js';
import type { Source, Values } from './options.js';
import { connectRedis, type RedisTarget, redisClient } from './redis.js';
import { checkMetricsFlags } from './run-console.js';
import type { RUN_OPTIONS } from './run-options.js';
import { type MetricsServer, serveMetrics, serveUntilSignal } from './serve.js';
import type { WorkerRole } from './workers.js';

const PROCESSOR_ONLY = [
  'mode',
  'group-commit-records',
  'partitions-in-flight',
  'transaction-timeout',
  'user-retries',
  'sweep-every',
  'owner-cache',
  'wait-replicas',
  'replication-factor',
  'allow-eviction',
  'snapshot-interval',
  'snapshot-topic',
  'snapshot-rate',
];
const HANDLER_ONLY = ['concurrency', 'attempt-timeout', 'postgres', 'postgres-table'];
const TOPOLOGY_ONLY = ['idle-close', 'pattern-refresh'];
const REDIS_TARGETS = ['redis', 'cluster', 'sentinels'];

const invalid = (message: string) => new RedfenceError('RF_INVALID_OPTIONS', message);
const given = (sources: Record<string, Source>, names: string[]) =>
  names.filter((n) => sources[n] !== undefined && sources[n] !== 'default');

/** Refuses flags of the other kind of definition (given by flag, environment or --config). */
export function checkHandlerFlags(handler: boolean, sources: Record<string, Source>): void {
  const topologyOnly = given(sources, TOPOLOGY_ONLY);
  if (topologyOnly.length > 0)
    throw invalid(
      `${topologyOnly.map((n) => `--${n}`).join(', ')} applies to topologies, and the module exports a ${handler ? 'handler' : 'processor'}`,
    );
  const wrong = given(sources, handler ? PROCESSOR_ONLY : HANDLER_ONLY);
  if (wrong.length > 0)
    throw invalid(
      `${wrong.map((n) => `--${n}`).join(', ')} ${wrong.length === 1 ? 'applies' : 'apply'} to ${handler ? 'processors' : 'handlers'}, and the module exports a ${handler ? 'handler' : 'processor'}`,
    );
}

export interface HandlerRun {
  o: Values<typeof RUN_OPTIONS>;
  sources: Record<string, Source>;
  definition: HandlerDefinition | InvalidationDefinition;
  instance: string;
  logger: Logger;
  target: RedisTarget;
  worker: WorkerRole | undefined;
  metricsPort: number | undefined;
}

type Pool = SqlPool & { end(): Promise<void> };

async function postgresPool(url: string, max: number, logger: Logger): Promise<Pool> {
  let pg: typeof import('pg');
  try {
    pg = await import('pg');
  } catch (err) {
    throw new RedfenceError('RF_INVALID_OPTIONS', '--postgres needs the pg package: npm install pg', {
      cause: err,
    });
  }
  const Pool = pg.Pool ?? (pg as unknown as { default: typeof import('pg') }).default.Pool;
  const pool = new Pool({ connectionString: url, max });
  // an idle client's error (the server restarted) must not crash the process; the next query reconnects
  pool.on('error', (err) =>
    logger.warn({ error: err.name, code: (err as { code?: string }).code }, 'PostgreSQL idle client error'),
  );
  return pool as unknown as Pool;
}

export async function runHandler(r: HandlerRun): Promise<number> {
  const { o, logger, target, worker } = r;
  if (given(r.sources, ['postgres-table']).length > 0 && o.postgres === undefined)
    throw invalid('--postgres-table needs --postgres');
  // the Kafka security options, checked (and their files read) by run() before the module was loaded
  const kafka: Extract<HandlerOptions['kafka'], { brokers: string[] }> = {
    brokers: o.brokers,
    ...kafkaSecurity(o),
  };
  if (o['session-timeout'] !== undefined) kafka.sessionTimeoutMs = o['session-timeout'];
  if (o.static) kafka.groupInstanceId = r.instance;
  if (o['group-protocol'] !== undefined) kafka.groupProtocol = o['group-protocol'];
  if (o['max-batch-size'] !== undefined) kafka.maxBatchSize = o['max-batch-size'];
  const deadline = o['shutdown-timeout'];
  const settings: HandlerOptions = {
    kafka,
    instanceId: r.instance,
    // close() drains for two thirds of the deadline, leaving the rest to commit and leave the group
    closeTimeoutMs: Math.floor((deadline * 2) / 3),
    createTopics: o['create-topics'],
    logger,
  };
  if (o.group !== undefined) settings.groupId = o.group;
  if (o.concurrency !== undefined) settings.concurrency = o.concurrency;
  if (o['attempt-timeout'] !== undefined) settings.retry = { attemptTimeoutMs: o['attempt-timeout'] };
  if (o['commit-interval'] !== undefined) settings.commitIntervalMs = o['commit-interval'];
  if (o.tracing) settings.tracing = true;

  const { createHandler, HealthState, RedfenceMetrics } = await import('../index.js');
  const useRedis = given(r.sources, REDIS_TARGETS).length > 0;
  const invalidation = 'cache' in r.definition ? r.definition : undefined;
  if (invalidation && !useRedis)
    throw invalid("an invalidation module needs its caches' Redis: give --redis, --cluster or --sentinels");
  if (invalidation && o.postgres !== undefined)
    throw invalid('--postgres applies to handlers, not to invalidations');
  if (invalidation && o['attempt-timeout'] !== undefined)
    throw invalid('--attempt-timeout applies to handlers, not to invalidations');
  if (o.console && !useRedis)
    throw invalid('--console reads the registry and state in Redis: give --redis, --cluster or --sentinels');
  checkMetricsFlags(o);
  const redis: Redis | Cluster | undefined = useRedis ? await redisClient(target, logger) : undefined;
  const pool =
    o.postgres === undefined
      ? undefined
      : await postgresPool(o.postgres, Math.min(64, o.concurrency ?? 64), logger);
  const metrics = new RedfenceMetrics();
  const health = new HealthState();
  let server: MetricsServer | undefined;
  const release = async () => {
    await server?.close().catch(() => undefined);
    redis?.disconnect();
    await pool?.end().catch(() => undefined);
  };
  let handler: Pick<ReturnType<typeof createHandler>, 'start' | 'close' | 'inputPartitions'>;
  const onFatal = (err: Error) => {
    logger.error({ err: err.message }, 'handler stopped after a fatal error');
    void release().then(() => process.exit(1));
  };
  try {
    if (invalidation) {
      const { createInvalidation } = await import('../kit/index.js');
      const { concurrency: _ignored, ...rest } = settings;
      handler = createInvalidation(invalidation, {
        ...rest,
        redis: redis as Redis | Cluster,
        metrics,
        health,
        onFatal,
      });
    } else
      handler = createHandler(r.definition as HandlerDefinition, {
        ...settings,
        ...(redis ? { redis } : {}),
        ...(pool
          ? { postgres: { pool, ...(o['postgres-table'] ? { table: o['postgres-table'] } : {}) } }
          : {}),
        metrics,
        health,
        onFatal,
      });
  } catch (err) {
    await release();
    throw err;
  }
  return serveUntilSignal({
    service: handler,
    logger,
    worker,
    deadlineMs: deadline,
    boot: async () => {
      if (redis) await connectRedis(redis, target, o['connect-timeout']);
      server = await serveMetrics(o, {
        metrics,
        health,
        port: r.metricsPort,
        console: redis
          ? {
              redis,
              cluster: r.target.kind === 'cluster',
              instance: r.instance,
              group:
                'groupId' in handler && typeof handler.groupId === 'string' ? handler.groupId : undefined,
              dlqTopic: deadLetterTopicOf(r.definition),
              prometheus: o['console-prometheus'],
            }
          : undefined,
      });
    },
    release,
  });
}

/** The dead-letter topic of a handler or invalidation definition (their defaults: `<input>.DLT`). */
function deadLetterTopicOf(d: HandlerRun['definition']): string {
  if ('cache' in d) return d.input.deadLetter ?? `${d.input.topic}.DLT`;
  return d.deadLetter ?? `${d.input}.DLT`;
}
