/**
 * `redfence run <module>`: loads a module whose default export (or `processor` export) is a processor
 * definition, and runs it until SIGTERM/SIGINT (drain, commit, disconnect within --shutdown-timeout; a
 * second signal exits at once).
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Cluster, Redis } from 'ioredis';
import type { ProcessorDefinition } from '../definition/definition.js';
import { HealthState, RedfenceMetrics, startMetricsServer } from '../metrics/index.js';
import type { Logger } from '../processor/logger.js';
import type { ProcessingMode } from '../processor/options.js';
import { Processor } from '../processor/processor.js';

export const RUN_HELP = `redfence run <module> [options]

Runs the processor exported by <module> (default export or "processor").

Options (environment variable in brackets):
  --brokers <list>          Kafka bootstrap servers [KAFKA_BROKERS] (127.0.0.1:9092)
  --redis <url>             standalone Redis [REDIS_URL] (redis://127.0.0.1:6379)
  --cluster <list>          Redis Cluster seeds host:port,... [REDIS_CLUSTER_NODES]
  --mode <m>                exactly-once | at-least-once [REDFENCE_MODE] (exactly-once)
  --group <id>              consumer group [REDFENCE_GROUP] (redfence-<store>)
  --instance <id>           instance id, used in the transactional id [REDFENCE_INSTANCE] (random)
  --metrics-port <n>        serve /metrics, /livez, /readyz on 127.0.0.1:<n> [REDFENCE_METRICS_PORT]
  --session-timeout <ms>    consumer session timeout [REDFENCE_SESSION_TIMEOUT_MS] (10000)
  --static                  static group membership: the instance id is the consumer's
                            group.instance.id, so a replacement started with the same --instance
                            takes over its partitions at once, without waiting for the session
                            timeout [REDFENCE_STATIC=1] (needs --instance)
  --group-protocol <p>      classic | consumer (KIP-848) [REDFENCE_GROUP_PROTOCOL] (classic)
  --group-commit-records <n>  at most n applied records wait for the Kafka step in flight to go
                            together in the next one; 0: one produce + commit (or transaction) per
                            batch [REDFENCE_GROUP_COMMIT_RECORDS] (2000)
  --allow-eviction          start even if Redis' maxmemory-policy is not noeviction
  --shutdown-timeout <ms>   graceful shutdown deadline (15000)
  --log <level>             json logs to stderr at this level: debug|info|warn|error|silent (info)
`;

function flags(args: readonly string[]): { positional: string[]; opts: Map<string, string> } {
  const positional: string[] = [];
  const opts = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (!a.startsWith('--')) positional.push(a);
    else if (a === '--allow-eviction' || a === '--help' || a === '--static') opts.set(a.slice(2), 'true');
    else {
      const v = args[i + 1];
      if (v === undefined) throw new Error(`option ${a} needs a value`);
      opts.set(a.slice(2), v);
      i++;
    }
  }
  return { positional, opts };
}

const LEVELS = ['debug', 'info', 'warn', 'error'] as const;
function jsonLogger(level: string, instance: string): Logger {
  const min = level === 'silent' ? 99 : Math.max(0, LEVELS.indexOf(level as (typeof LEVELS)[number]));
  const at = (i: number) => (obj: object, msg?: string) => {
    if (i >= min)
      process.stderr.write(
        `${JSON.stringify({ time: new Date().toISOString(), level: LEVELS[i], instance, msg, ...obj })}\n`,
      );
  };
  return { debug: at(0), info: at(1), warn: at(2), error: at(3) };
}

export async function run(args: readonly string[], out: (s: string) => void): Promise<number> {
  const { positional, opts } = flags(args);
  const file = positional[0];
  if (opts.has('help')) {
    out(RUN_HELP);
    return 0;
  }
  if (file === undefined) {
    process.stderr.write(RUN_HELP);
    return 2;
  }
  const env = process.env;
  const instance = opts.get('instance') ?? env.REDFENCE_INSTANCE;
  const isStatic = opts.has('static') || env.REDFENCE_STATIC === '1' || env.REDFENCE_STATIC === 'true';
  if (isStatic && instance === undefined)
    throw new Error('--static needs --instance <id> (the id a replacement reuses to take over)');
  const groupCommit = opts.get('group-commit-records') ?? env.REDFENCE_GROUP_COMMIT_RECORDS;
  if (groupCommit !== undefined && !/^\d+$/.test(groupCommit))
    throw new Error(`--group-commit-records must be an integer >= 0, got ${JSON.stringify(groupCommit)}`);
  const groupProtocol = opts.get('group-protocol') ?? env.REDFENCE_GROUP_PROTOCOL;
  if (groupProtocol !== undefined && groupProtocol !== 'classic' && groupProtocol !== 'consumer')
    throw new Error(`--group-protocol must be classic or consumer, got ${JSON.stringify(groupProtocol)}`);
  const mod = (await import(pathToFileURL(resolve(file)).href)) as { default?: unknown; processor?: unknown };
  const definition = (mod.default ?? mod.processor) as ProcessorDefinition | undefined;
  if (definition === undefined)
    throw new Error(`${file} exports no processor (default export or "processor")`);

  const clusterNodes = opts.get('cluster') ?? env.REDIS_CLUSTER_NODES;
  const redis = clusterNodes
    ? new Cluster(
        clusterNodes.split(',').map((hp) => {
          const [host, port] = hp.split(':');
          return { host: host || '127.0.0.1', port: Number(port) };
        }),
        { enableAutoPipelining: true },
      )
    : new Redis(opts.get('redis') ?? env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
        enableAutoPipelining: true,
      });
  const metrics = new RedfenceMetrics();
  const health = new HealthState();
  const logger = jsonLogger(opts.get('log') ?? 'info', instance ?? '-');
  const group = opts.get('group') ?? env.REDFENCE_GROUP;
  const sessionTimeout = opts.get('session-timeout') ?? env.REDFENCE_SESSION_TIMEOUT_MS;
  const processor = new Processor({
    definition,
    redis,
    kafka: {
      brokers: (opts.get('brokers') ?? env.KAFKA_BROKERS ?? '127.0.0.1:9092').split(','),
      ...(sessionTimeout ? { sessionTimeoutMs: Number(sessionTimeout) } : {}),
      ...(isStatic && instance !== undefined ? { groupInstanceId: instance } : {}),
      ...(groupProtocol ? { groupProtocol } : {}),
    },
    mode: (opts.get('mode') ?? env.REDFENCE_MODE ?? 'exactly-once') as ProcessingMode,
    ...(group ? { groupId: group } : {}),
    ...(instance ? { instanceId: instance } : {}),
    requireNoEviction: !opts.has('allow-eviction'),
    ...(groupCommit !== undefined ? { groupCommitRecords: Number(groupCommit) } : {}),
    onFatal: (err) => {
      logger.error({ err: err.message }, 'processor stopped after a fatal error');
      void server?.close();
      redis.disconnect();
      process.exit(1);
    },
    logger,
    metrics,
    health,
  });
  const metricsPort = opts.get('metrics-port') ?? env.REDFENCE_METRICS_PORT;
  const server = metricsPort
    ? await startMetricsServer({ metrics, health, port: Number(metricsPort) })
    : undefined;

  const deadline = Number(opts.get('shutdown-timeout') ?? 15_000);
  let signals = 0;
  const stopped = new Promise<number>((resolveStop) => {
    const onSignal = (sig: string) => {
      signals++;
      if (signals > 1) process.exit(130); // second signal: exit at once
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
  });
  try {
    // Fail fast with a clear message when Redis cannot be reached (ioredis would retry forever).
    let pingTimer: NodeJS.Timeout | undefined;
    await Promise.race([
      redis.ping(),
      new Promise<never>((_, reject) => {
        pingTimer = setTimeout(
          () => reject(new Error('Redis did not answer PING within 10 s (check --redis / --cluster)')),
          10_000,
        );
      }),
    ]).finally(() => clearTimeout(pingTimer));
    await processor.start();
  } catch (err) {
    // A failed start must not leave the process hanging on open clients or the metrics server.
    await processor.close().catch(() => undefined);
    await server?.close().catch(() => undefined);
    redis.disconnect();
    throw err;
  }
  return stopped;
}
