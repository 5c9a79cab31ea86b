/**
 * What `redfence run` does with every kind of service once it is built (a processor: run.ts; a handler or
 * an invalidation consumer: run-handler.ts; a topology: run-topology.ts), in one place: serve its
 * metrics (and the console) while it connects and starts, then run until SIGTERM/SIGINT: close it within
 * --shutdown-timeout (exit 1 past it), a second signal exits at once, and a worker also stops when its
 * supervisor goes. A failed start closes the service and its clients before the error goes on.
 */
import type { HealthState, RedfenceMetrics, startMetricsServer } from '../index.js';
import type { Logger } from '../runtime/logger.js';
import { setRegistryMetricsAddress } from '../runtime/registry.js';
import { runConsoleMount } from './run-console.js';
import { type WorkerRole, watchSupervisor, workerStarted } from './workers.js';

/** The metrics server `redfence run` serves (--metrics-port). */
export type MetricsServer = Awaited<ReturnType<typeof startMetricsServer>>;

/** A built service as the run verb drives it. */
export interface Service {
  start(): Promise<void>;
  close(): Promise<void>;
  /** The input's partition count, told to the supervisor once started (--workers). */
  readonly inputPartitions: number;
}

export interface ServeOptions {
  readonly service: Service;
  readonly logger: Logger;
  readonly worker: WorkerRole | undefined;
  /** --shutdown-timeout, in ms. */
  readonly deadlineMs: number;
  /** Before `start()`, with the signal handlers in place: connects the clients and serves the metrics. */
  readonly boot: () => Promise<void>;
  /** After `close()`, and after a failed start: closes what `boot` opened (never throws). */
  readonly release: () => Promise<void>;
}

/**
 * Boots and starts `service`, then resolves with the exit code once a signal has closed it (0: closed,
 * 1: its close failed). A failed boot or start rejects, everything closed.
 *
 * @example
 * return serveUntilSignal({ service: processor, logger, worker, deadlineMs: o['shutdown-timeout'],
 *   boot: async () => { await connectRedis(redis, target, timeout); server = await serveMetrics(...); },
 *   release: async () => { await server?.close().catch(() => undefined); redis.disconnect(); } });
 */
export async function serveUntilSignal(s: ServeOptions): Promise<number> {
  const { service, logger, worker, deadlineMs } = s;
  let signals = 0;
  let unwatch: (() => void) | undefined;
  const stopped = new Promise<number>((resolveStop) => {
    const onSignal = (sig: string) => {
      signals++;
      // A second signal exits at once; a worker's supervisor enforces the deadline itself, and a worker
      // may get a signal twice (the supervisor's forward and a terminal's or systemd's to the group).
      if (signals > 1 && worker === undefined) process.exit(130);
      if (signals > 1) return;
      logger.info({ signal: sig }, 'shutting down');
      setTimeout(() => {
        logger.error({ deadline: deadlineMs }, 'graceful shutdown timed out');
        process.exit(1);
      }, deadlineMs).unref();
      service
        .close()
        .then(s.release)
        .then(
          () => resolveStop(0),
          () => resolveStop(1),
        );
    };
    process.on('SIGTERM', () => onSignal('SIGTERM'));
    process.on('SIGINT', () => onSignal('SIGINT'));
    if (worker !== undefined) unwatch = watchSupervisor(() => onSignal('supervisor gone'));
  });
  try {
    await s.boot();
    await service.start();
  } catch (err) {
    // A failed start must not leave the process hanging on open clients or the metrics server.
    await service.close().catch(() => undefined);
    await s.release();
    unwatch?.();
    throw err;
  }
  if (worker !== undefined) workerStarted(service.inputPartitions);
  return stopped.finally(() => unwatch?.());
}

/** What the metrics server shows: the registry and health, and with --console the console's pages. */
export interface MetricsServing {
  readonly metrics: RedfenceMetrics;
  readonly health: HealthState;
  /** The port (undefined: no server). */
  readonly port: number | undefined;
  /** With --console: what the console needs (undefined: no console). */
  readonly console: Parameters<typeof runConsoleMount>[1] | undefined;
}

/**
 * Starts the metrics server when a port is given, the console mounted on it when asked, and writes its
 * address into the instance registry. Returns the server (undefined: none).
 */
export async function serveMetrics(
  o: Parameters<typeof runConsoleMount>[0] & { console: boolean; 'metrics-host': string },
  m: MetricsServing,
): Promise<MetricsServer | undefined> {
  const mount = o.console && m.console !== undefined ? await runConsoleMount(o, m.console) : undefined;
  if (m.port === undefined) return undefined;
  // the runtime loads only now: bad options are refused without it
  const { startMetricsServer } = await import('../index.js');
  const server = await startMetricsServer({
    metrics: m.metrics,
    health: m.health,
    port: m.port,
    host: o['metrics-host'],
    ...(mount ? { mount } : {}),
  });
  setRegistryMetricsAddress(server.host, server.port);
  return server;
}
