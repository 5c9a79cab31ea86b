/**
 * The redfence console's web server (node:http or node:https, no framework): the views of the
 * registry (views/index.ts) rendered on the server, the shipped CSS and JS, and the one action
 * (POST /actions/redrive). Bound to 127.0.0.1 by default; read-only unless given an action token.
 *
 * ```ts
 * const c = await startConsole({ redis, kafka: { brokers: ['127.0.0.1:9092'], clientId: 'console' },
 *   groups: ['redfence-totals'], dlqTopics: ['orders.dlt'] });
 * console.log(c.url); // http://127.0.0.1:8090/
 * await c.close();
 * ```
 */
import { createServer as createHttp, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttps } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Cluster, Redis } from 'ioredis';
import { type ClientSettings, commonProperties } from '../kafka/client-config.js';
import { integer } from '../options/checks.js';
import { lazyProducer } from './actions.js';
import { DlqPager } from './dlq-page.js';
import { RegistryReader } from './instances.js';
import { LagHistory } from './lag-history.js';
import { checkPrometheusUrl, prometheusSource } from './prometheus.js';
import { consoleListener } from './routes.js';
import { MetricsScrapes } from './scrape.js';
import { allowedHosts } from './security.js';
import type { ConsoleView, OutboxSource, ViewContext } from './view.js';
import { VIEWS } from './views/index.js';

export interface ConsoleOptions {
  redis: Redis | Cluster;
  fenceMode?: 'strict' | 'cluster';
  /** Brokers, client id and security of the console's Kafka clients. */
  kafka: Omit<ClientSettings, 'groupId'>;
  groups?: readonly string[];
  dlqTopics?: readonly string[];
  outbox?: OutboxSource;
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 8090; 0 picks a free port. */
  port?: number;
  /** Extra Host header values to answer to (`name:port`), e.g. behind a proxy. */
  hostNames?: readonly string[];
  tls?: { cert: string | Buffer; key: string | Buffer };
  /** Enables actions (with the token). */
  actionToken?: string;
  showValues?: boolean;
  lagIntervalMs?: number;
  lagWindow?: number;
  lagHistory?: number;
  slowLag?: number;
  timeoutMs?: number;
  /** The longest a scrape of one instance's metrics may take (the Processing view). Default 2000. */
  scrapeTimeoutMs?: number;
  /** The page's auto-refresh period in seconds. Default 10. */
  refreshSeconds?: number;
  /**
   * The Prometheus that evaluates redfence's alert rules (http:// or https://, credentials sent as basic
   * auth, never shown): the Instances view shows each rule's state and the alerts beside their instances.
   */
  prometheus?: string;
  /** The longest a read of Prometheus' rules may take. Default 2000. */
  prometheusTimeoutMs?: number;
  views?: readonly ConsoleView[];
}

export interface ConsoleServer {
  readonly url: string;
  readonly lag: LagHistory;
  close(): Promise<void>;
}

/** What the console reads and shows: its options but where and how it listens. */
export type ConsoleSources = Omit<ConsoleOptions, 'host' | 'port' | 'hostNames' | 'tls' | 'actionToken'>;

/** The console without its server: a request listener, its lag sampler, and what they hold open. */
export interface ConsoleCore {
  readonly listener: (req: IncomingMessage, res: ServerResponse) => void;
  readonly lag: LagHistory;
  /** Once listening: the Host values to answer to, and the lag sampling starts. */
  listening(hosts: Set<string> | 'any'): void;
  /** Idempotent. */
  close(): Promise<void>;
}

/**
 * The console's pages under `base` ('' on its own server), actions only with a token; the server
 * (its own, or a metrics server's: src/console/mount.ts) is the caller's.
 */
export function consoleCore(
  o: ConsoleSources,
  serve: { base: string; tls: boolean; token: string | undefined },
): ConsoleCore {
  // checked before anything connects
  const scrapeTimeoutMs = integer('scrapeTimeoutMs', o.scrapeTimeoutMs, 100, 60_000, 2000);
  const prometheusTimeoutMs = integer('prometheusTimeoutMs', o.prometheusTimeoutMs, 100, 60_000, 2000);
  if (o.prometheus !== undefined) checkPrometheusUrl('option "prometheus"', o.prometheus);
  const views = o.views ?? VIEWS;
  const timeoutMs = o.timeoutMs ?? 30_000;
  const properties = commonProperties({ ...o.kafka, groupId: 'redfence-console' });
  // bounded like every registry read: a Redis that does not answer never holds the sampling (or close)
  const registry = new RegistryReader(o.redis, scrapeTimeoutMs);
  const lag = new LagHistory({
    properties,
    groups: o.groups ?? [],
    discover: async () =>
      (await registry.read()).rows.flatMap((i) => (i.group === undefined ? [] : [i.group])),
    intervalMs: o.lagIntervalMs ?? 5000,
    window: o.lagWindow ?? 3,
    history: o.lagHistory ?? 360,
    slowLag: o.slowLag ?? 10_000,
  });
  const pager = new DlqPager(o.kafka, timeoutMs);
  const producer = lazyProducer(o.kafka);
  const ctx: ViewContext = {
    redis: o.redis,
    fenceMode: o.fenceMode ?? 'strict',
    lag,
    registry,
    prometheus:
      o.prometheus === undefined
        ? undefined
        : prometheusSource({ url: o.prometheus, timeoutMs: prometheusTimeoutMs }),
    dlq: pager,
    dlqTopics: o.dlqTopics ?? [],
    outbox: o.outbox,
    scrapes: new MetricsScrapes({ timeoutMs: scrapeTimeoutMs }),
    showValues: o.showValues === true,
    actions: serve.token !== undefined,
    base: serve.base,
  };
  const deps = { ctx, pager, client: o.kafka, timeoutMs, producer: producer.get };
  let hosts: Set<string> | 'any' = new Set();
  const listener = consoleListener({
    views,
    ctx,
    actions: deps,
    tls: serve.tls,
    token: serve.token,
    refreshSeconds: o.refreshSeconds ?? 10,
    hosts: () => hosts,
  });
  let closing: Promise<void> | undefined;
  return {
    listener,
    lag,
    listening(h) {
      hosts = h;
      lag.start();
    },
    close() {
      closing ??= (async () => {
        await lag.close();
        await pager.close();
        await producer.close();
      })();
      return closing;
    },
  };
}

export async function startConsole(o: ConsoleOptions): Promise<ConsoleServer> {
  const tls = o.tls !== undefined;
  const core = consoleCore(o, { base: '', tls, token: o.actionToken });
  const server = o.tls === undefined ? createHttp(core.listener) : createHttps({ ...o.tls }, core.listener);
  const host = o.host ?? '127.0.0.1';
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port ?? 8090, host, () => {
      server.off('error', reject);
      resolve();
    });
  }).catch(async (err: unknown) => {
    await core.close();
    throw err;
  });
  const port = (server.address() as AddressInfo).port;
  core.listening(allowedHosts(host, port, o.hostNames ?? []));
  const shownHost = host.includes(':') ? `[${host}]` : host;
  let closing: Promise<void> | undefined;
  return {
    url: `${tls ? 'https' : 'http'}://${shownHost}:${port}/`,
    lag: core.lag,
    close() {
      closing ??= (async () => {
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        await core.close();
      })();
      return closing;
    },
  };
}
