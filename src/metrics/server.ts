/**
 * A small HTTP server for Prometheus scrapes and Kubernetes-style probes:
 *
 * - `GET /metrics`: the registry in its exposition format, with the registry's content type;
 * - `GET /livez`:   200 `{"live":true}` or 503 `{"live":false}`;
 * - `GET /readyz`:  200 or 503, with the {@link HealthState.snapshot} as JSON;
 * - `GET /status`:  200, the lag status of each owned partition as JSON (docs/operations.md, "Lag status");
 * - with a {@link MetricsMount} (`mount`): its prefix and every path under it go to the mount (the
 *   console, read-only: `consoleMount` in src/console/mount.ts, `redfence run --console`);
 * - any other path: 404; a known path with another method than GET: 405.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { RedfenceError } from '../errors/index.js';
import { DEFAULT_MAX_STALL_MS, type HealthState } from './health.js';
import { lagBoardOf, type RedfenceMetrics } from './metrics.js';

/** Options for {@link startMetricsServer}. */
export interface MetricsServerOptions {
  /** Metrics served on `/metrics`. */
  metrics: RedfenceMetrics;
  /** Health served on `/livez` and `/readyz`. */
  health: HealthState;
  /** TCP port; `0` picks a free one (read it back from the result). */
  port: number;
  /** Interface to listen on. Default `'127.0.0.1'`: expose it wider on purpose only. */
  host?: string;
  /** Longest time without poll-loop progress before `/livez` answers 503. Default 30000. */
  maxStallMs?: number;
  /** More pages under a path prefix (the console); closed with the server. */
  mount?: MetricsMount;
}

/**
 * Pages served beside the metrics under a path prefix: the server hands it every request to `prefix`
 * or under `prefix/`, tells it the address it listens on, and closes it on {@link MetricsServer.close}.
 *
 * @example
 * ```ts
 * const mount: MetricsMount = {
 *   prefix: '/hello',
 *   handle: (req, res) => res.end('hello\n'),
 *   close: async () => {},
 * };
 * await startMetricsServer({ metrics, health, port: 9464, mount }); // GET /hello/anything: hello
 * ```
 */
export interface MetricsMount {
  /** `/name` (no trailing slash). */
  readonly prefix: string;
  /** Called once listening, with the bound host and port (before any request). */
  listening?(host: string, port: number): void;
  handle(req: IncomingMessage, res: ServerResponse): void;
  close(): Promise<void>;
}

/** A running metrics server. */
export interface MetricsServer {
  /** The interface listened on (the `host` option). */
  readonly host: string;
  /** The port actually listened on (the chosen one when `port` was 0). */
  readonly port: number;
  /** Stops listening and drops open connections. Idempotent: every call returns the same promise. */
  close(): Promise<void>;
}

const ROUTES = new Set(['/metrics', '/livez', '/readyz', '/status']);
const JSON_TYPE = 'application/json; charset=utf-8';
const TEXT_TYPE = 'text/plain; charset=utf-8';

function send(
  res: ServerResponse,
  status: number,
  type: string,
  body: string,
  extra: Record<string, string> = {},
) {
  res.writeHead(status, {
    'Content-Type': type,
    'Content-Length': Buffer.byteLength(body),
    'Cache-Control': 'no-store',
    ...extra,
  });
  res.end(body);
}

const PREFIX = /^\/[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/;

function checkOptions(
  options: MetricsServerOptions,
): Required<Omit<MetricsServerOptions, 'mount'>> & Pick<MetricsServerOptions, 'mount'> {
  if (typeof options !== 'object' || options === null) {
    throw new RedfenceError('RF_INVALID_OPTIONS', 'metrics server options must be an object');
  }
  const { metrics, health, port, host = '127.0.0.1', maxStallMs = DEFAULT_MAX_STALL_MS } = options;
  if (typeof metrics?.metricsText !== 'function') {
    throw new RedfenceError('RF_INVALID_OPTIONS', 'metricsServer.metrics must be a RedfenceMetrics');
  }
  if (typeof health?.live !== 'function' || typeof health.snapshot !== 'function') {
    throw new RedfenceError('RF_INVALID_OPTIONS', 'metricsServer.health must be a HealthState');
  }
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new RedfenceError(
      'RF_INVALID_OPTIONS',
      `metricsServer.port must be an integer 0..65535, got ${String(port)}`,
    );
  }
  if (typeof host !== 'string' || host === '') {
    throw new RedfenceError('RF_INVALID_OPTIONS', 'metricsServer.host must be a non-empty string');
  }
  if (typeof maxStallMs !== 'number' || !Number.isFinite(maxStallMs) || !(maxStallMs > 0)) {
    throw new RedfenceError(
      'RF_INVALID_OPTIONS',
      `metricsServer.maxStallMs must be a finite number > 0, got ${String(maxStallMs)}`,
    );
  }
  const { mount } = options;
  if (mount !== undefined) {
    if (typeof mount?.handle !== 'function' || typeof mount.close !== 'function')
      throw new RedfenceError('RF_INVALID_OPTIONS', 'metricsServer.mount must be a MetricsMount');
    if (typeof mount.prefix !== 'string' || !PREFIX.test(mount.prefix) || ROUTES.has(mount.prefix))
      throw new RedfenceError(
        'RF_INVALID_OPTIONS',
        `metricsServer.mount.prefix must be /name (not a metrics route), got ${String(mount.prefix)}`,
      );
  }
  return { metrics, health, port, host, maxStallMs, mount };
}

/**
 * Starts the metrics and health server. Resolves once listening; rejects with `RF_INVALID_OPTIONS`
 * on bad options or when the address cannot be listened on (the `cause` says why, e.g. `EADDRINUSE`).
 *
 * @example
 * ```ts
 * const metrics = new RedfenceMetrics();
 * const health = new HealthState();
 * const server = await startMetricsServer({ metrics, health, port: 9464 });
 * // curl http://127.0.0.1:9464/metrics
 * await server.close();
 * ```
 */
export async function startMetricsServer(options: MetricsServerOptions): Promise<MetricsServer> {
  const { metrics, health, port, host, maxStallMs, mount } = checkOptions(options);

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?', 1)[0] ?? '/';
    if (mount !== undefined && (path === mount.prefix || path.startsWith(`${mount.prefix}/`))) {
      mount.handle(req, res);
      return;
    }
    req.resume(); // Bodies are never read; drain them so the connection can be reused.
    if (!ROUTES.has(path)) {
      send(res, 404, TEXT_TYPE, 'not found\n');
      return;
    }
    if (req.method !== 'GET') {
      send(res, 405, TEXT_TYPE, 'method not allowed\n', { Allow: 'GET' });
      return;
    }
    if (path === '/metrics') {
      const text = await metrics.metricsText();
      send(res, 200, metrics.registry.contentType, text);
    } else if (path === '/livez') {
      const live = health.live(undefined, maxStallMs);
      send(res, live ? 200 : 503, JSON_TYPE, JSON.stringify({ live }));
    } else if (path === '/status') {
      send(res, 200, JSON_TYPE, JSON.stringify(lagBoardOf(metrics).report()));
    } else {
      const snapshot = health.snapshot();
      send(res, snapshot.ready ? 200 : 503, JSON_TYPE, JSON.stringify(snapshot));
    }
  };

  const server = createServer((req, res) => {
    handle(req, res).catch(() => {
      // A failing collect callback in the registry, say. Never logged: the library does not write to
      // the console; the scraper sees the 500.
      if (!res.headersSent) send(res, 500, TEXT_TYPE, 'internal error\n');
      else res.destroy();
    });
  });

  await new Promise<void>((resolve, reject) => {
    const onError = (err: Error): void => {
      reject(
        new RedfenceError('RF_INVALID_OPTIONS', `metrics server could not listen on ${host}:${port}`, {
          cause: err,
          details: { host, port, errno: (err as NodeJS.ErrnoException).code },
        }),
      );
    };
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  // Errors after listening (rare) must not crash the process through an unhandled 'error' event.
  server.on('error', () => {});

  const actualPort = (server.address() as AddressInfo).port;
  mount?.listening?.(host, actualPort);
  let closing: Promise<void> | undefined;
  return {
    host,
    port: actualPort,
    close(): Promise<void> {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Scrapers keep connections alive; drop them so close() does not wait for their timeout.
        server.closeAllConnections();
      }).then(() => mount?.close().catch(() => undefined));
      return closing;
    },
  };
}
