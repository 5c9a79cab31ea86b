/**
 * `redfence console`: the web console (src/console/): instances, lag, processing, the fence inspector, dead
 * letters and the outbox, on 127.0.0.1:8090 by default, read-only unless started with
 * `--allow-actions` and a token. Every option is checked, and the TLS files read, before any
 * connection. Runs until SIGINT/SIGTERM. Exit 0 after a signal; 2 a bad option; 1 a failure.
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { RedfenceError } from '../errors/index.js';
import { CONNECTION_OPTIONS, kafkaClient } from './connection.js';
import type { KafkaValues } from './kafka-options.js';
import {
  helpText,
  hostPort,
  listOption,
  maskUrl,
  numberOption,
  parseOptions,
  switchOption,
  textOption,
} from './options.js';

const TOPIC = (s: string) => (/^[A-Za-z0-9._-]{1,249}$/.test(s) ? s : undefined);
const GROUP = (s: string) => (/^[A-Za-z0-9._:-]{1,249}$/.test(s) ? s : undefined);
const IDENT = /^[a-z_][a-z0-9_]{0,39}$/;

export const CONSOLE_OPTIONS = {
  ...CONNECTION_OPTIONS,
  group: listOption('<list>', {
    description: 'consumer groups whose lag to show (besides the groups of registered instances)',
    env: 'REDFENCE_CONSOLE_GROUPS',
    allowed: 'group[,group...]',
    item: GROUP,
  }),
  'dlq-topic': listOption('<list>', {
    description: 'dead-letter topics to browse (and redrive, with --allow-actions)',
    env: 'REDFENCE_CONSOLE_DLQ_TOPICS',
    allowed: 'topic[,topic...]',
    item: TOPIC,
  }),
  'database-url': textOption('<url>', {
    description: 'PostgreSQL URL of the outbox (the Outbox view is empty without it)',
    env: 'DATABASE_URL',
    allowed: 'a postgres:// or postgresql:// URL',
    pattern: /^postgres(ql)?:\/\/\S+$/,
    show: maskUrl,
  }),
  'outbox-table': textOption('<name>', {
    description: 'outbox table name',
    default: 'redfence_outbox',
    allowed: 'a lower-case identifier of at most 40 characters',
    pattern: IDENT,
  }),
  'outbox-schema': textOption('<name>', {
    description: 'schema of the outbox tables',
    defaultText: "the connection's search_path",
    allowed: 'a lower-case identifier of at most 40 characters',
    pattern: IDENT,
  }),
  host: textOption('<address>', {
    description: 'address to listen on (anything but a loopback address exposes the console)',
    env: 'REDFENCE_CONSOLE_HOST',
    default: '127.0.0.1',
    allowed: 'an IP address or localhost',
    pattern: /^(localhost|[0-9.]+|[0-9a-fA-F:]+)$/,
  }),
  port: numberOption('<n>', {
    description: 'port to listen on (0: any free port)',
    env: 'REDFENCE_CONSOLE_PORT',
    default: 8090,
    min: 0,
    max: 65535,
  }),
  'host-name': listOption('<list>', {
    description: 'more Host header values to answer to (name:port), e.g. behind a reverse proxy',
    allowed: 'name:port[,name:port...]',
    item: (s) => (hostPort(s) ? s.toLowerCase() : undefined),
  }),
  'tls-cert': textOption('<file>', { description: 'PEM certificate: serve HTTPS (with --tls-key)' }),
  'tls-key': textOption('<file>', { description: 'PEM private key of --tls-cert' }),
  'allow-actions': switchOption({
    description: 'enable actions (redrive), each needing the token; off: read-only',
    env: 'REDFENCE_CONSOLE_ALLOW_ACTIONS',
  }),
  token: textOption('<token>', {
    description: 'the action token (at least 16 characters; prefer the environment variable)',
    env: 'REDFENCE_CONSOLE_TOKEN',
    allowed: 'at least 16 characters without spaces',
    pattern: /^\S{16,}$/,
    show: () => '***',
  }),
  'show-values': switchOption({ description: 'show record keys and values (masked by default)' }),
  'lag-interval': numberOption('<ms>', { description: 'time between lag samples', default: 5000, min: 500 }),
  'lag-window': numberOption('<n>', {
    description: 'samples each status is evaluated over (as redfence lag --samples)',
    default: 3,
    min: 1,
    max: 1000,
  }),
  'lag-history': numberOption('<n>', {
    description: 'lag samples kept per group and topic for the trend graph',
    default: 360,
    min: 2,
    max: 100_000,
  }),
  'slow-lag': numberOption('<n>', {
    description: 'lag above which a partition still consuming is "slow" (WARN)',
    default: 10_000,
    min: 0,
  }),
  'scrape-timeout': numberOption('<ms>', {
    description: "the longest one instance's metrics scrape may take (the Processing view)",
    default: 2000,
    min: 100,
    max: 60_000,
  }),
  refresh: numberOption('<s>', {
    description: "the page's auto-refresh period",
    default: 10,
    min: 1,
    max: 3600,
  }),
  prometheus: textOption('<url>', {
    description:
      "the Prometheus that evaluates redfence's alert rules: their state on the Instances view (credentials in the URL are sent, never shown)",
    env: 'REDFENCE_CONSOLE_PROMETHEUS',
    allowed: 'an http:// or https:// URL',
    pattern: /^https?:\/\/\S+$/,
    show: maskUrl,
  }),
  'prometheus-timeout': numberOption('<ms>', {
    description: "the longest a read of Prometheus' rules may take (then: unreachable)",
    default: 2000,
    min: 100,
    max: 60_000,
  }),
  timeout: numberOption('<ms>', {
    description: 'Kafka connect and metadata timeout, and the most a read may go without progress',
    default: 30_000,
    min: 100,
  }),
};

export const CONSOLE_HELP = helpText(
  'redfence console [--group g] [--dlq-topic t] [options]',
  'Serves the web console: instances (with the alert rules\' state, given --prometheus), lag, processing,\nthe fence inspector, dead letters and the outbox (docs/operations.md, "Console"). Read-only unless\n--allow-actions with a token. Runs until SIGINT/SIGTERM.',
  CONSOLE_OPTIONS,
);

const invalid = (m: string) => new RedfenceError('RF_INVALID_OPTIONS', m);
const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1']);

function readPem(option: string, path: string): Buffer {
  try {
    const b = readFileSync(path);
    if (!b.toString('latin1').includes('-----BEGIN ')) throw new Error('not PEM');
    return b;
  } catch (err) {
    throw invalid(`--${option}: cannot read a PEM file at ${path} (${(err as Error).message})`);
  }
}

export async function consoleCommand(args: readonly string[], out: (s: string) => void): Promise<number> {
  const { values: o, sources, positionals, help } = parseOptions(CONSOLE_OPTIONS, args);
  if (help) {
    out(CONSOLE_HELP);
    return 0;
  }
  if (positionals.length > 0) throw invalid(`unexpected arguments ${positionals.join(' ')}`);
  if (o.host !== 'localhost' && isIP(o.host) === 0)
    throw invalid(`--host must be an IP address or localhost, got "${o.host}"`);
  if (o['allow-actions'] && o.token === undefined)
    throw invalid('--allow-actions needs --token <token> (or REDFENCE_CONSOLE_TOKEN)');
  if ((o['tls-cert'] === undefined) !== (o['tls-key'] === undefined))
    throw invalid('--tls-cert and --tls-key go together');
  const tls =
    o['tls-cert'] === undefined || o['tls-key'] === undefined
      ? undefined
      : { cert: readPem('tls-cert', o['tls-cert']), key: readPem('tls-key', o['tls-key']) };
  if (o['allow-actions'] && !LOOPBACK.has(o.host) && tls === undefined)
    throw invalid(`--allow-actions on --host ${o.host} (not loopback) needs --tls-cert and --tls-key`);
  if (o.prometheus !== undefined) {
    const { checkPrometheusUrl } = await import('../console/prometheus.js');
    checkPrometheusUrl('--prometheus', o.prometheus);
  }
  const { redisTarget } = await import('./redis-options.js');
  const target = redisTarget(o, sources);
  const client = kafkaClient(o as typeof o & KafkaValues, 'redfence-console');
  const outboxWhere = {
    table: o['outbox-table'],
    ...(o['outbox-schema'] === undefined ? {} : { schema: o['outbox-schema'] }),
  };
  // every option checked: now the connections
  const { connectRedis, redisClient } = await import('./redis.js');
  const { jsonLogger } = await import('./log.js');
  const redis = await redisClient(target, jsonLogger('error', '-'));
  let pool: { end(): Promise<void> } | undefined;
  let server: import('../console/server.js').ConsoleServer | undefined;
  const stopped = new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  try {
    await connectRedis(redis, target, o['connect-timeout']);
    let outbox: import('../console/view.js').OutboxSource | undefined;
    if (o['database-url'] !== undefined) {
      const { loadPg } = await import('../outbox/pg.js');
      const pg = await loadPg();
      const p = new pg.Pool({ connectionString: o['database-url'], max: 2, connectionTimeoutMillis: 10_000 });
      p.on('error', () => undefined);
      pool = p;
      const { outboxNames } = await import('../outbox/schema.js');
      const { outboxSource } = await import('../console/outbox-source.js');
      outbox = outboxSource(p, outboxNames(outboxWhere));
    }
    const { startConsole } = await import('../console/server.js');
    server = await startConsole({
      redis,
      fenceMode: target.kind === 'cluster' ? 'cluster' : 'strict',
      kafka: client,
      groups: o.group ?? [],
      dlqTopics: o['dlq-topic'] ?? [],
      ...(outbox === undefined ? {} : { outbox }),
      host: o.host,
      port: o.port,
      hostNames: o['host-name'] ?? [],
      ...(tls === undefined ? {} : { tls }),
      ...(o['allow-actions'] && o.token !== undefined ? { actionToken: o.token } : {}),
      showValues: o['show-values'],
      lagIntervalMs: o['lag-interval'],
      lagWindow: o['lag-window'],
      lagHistory: o['lag-history'],
      slowLag: o['slow-lag'],
      refreshSeconds: o.refresh,
      timeoutMs: o.timeout,
      scrapeTimeoutMs: o['scrape-timeout'],
      ...(o.prometheus === undefined ? {} : { prometheus: o.prometheus }),
      prometheusTimeoutMs: o['prometheus-timeout'],
    });
    out(
      `redfence console: ${server.url} (${o['allow-actions'] ? 'actions enabled' : 'read-only'}; SIGINT or SIGTERM stops it)\n`,
    );
    await stopped;
    return 0;
  } finally {
    await server?.close();
    await pool?.end().catch(() => undefined);
    redis.disconnect();
  }
}
