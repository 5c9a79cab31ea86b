/**
 * `redfence outbox <init|relay|status|retry>`: the transactional outbox from the command line
 * (docs/outbox.md). One option table per subcommand, on the shared parser; every option is checked
 * before any connection. `relay` runs until SIGTERM/SIGINT (finishes the batches in flight, gives its
 * roles back); a second signal exits at once.
 */
import { createServer } from 'node:http';
import { RedfenceError } from '../errors/index.js';
import { UUID } from '../outbox/event-id.js';
import { DEFAULT_TOPIC_TEMPLATE } from '../outbox/routing.js';
import { BROKERS_OPTION } from './connection.js';
import { KAFKA_OPTIONS, type KafkaValues, kafkaSecurity } from './kafka-options.js';
import { jsonLogger, LOG_LEVELS } from './log.js';
import {
  choiceOption,
  helpText,
  maskUrl,
  numberOption,
  parseOptions,
  switchOption,
  type Table,
  textOption,
} from './options.js';
import { showRedisUrl } from './redis-options.js';

const IDENT = /^[a-z_][a-z0-9_]{0,39}$/;

const WHERE = {
  'database-url': textOption('<url>', {
    description: 'PostgreSQL connection URL of the database holding the outbox',
    env: 'DATABASE_URL',
    allowed: 'a postgres:// or postgresql:// URL',
    pattern: /^postgres(ql)?:\/\/\S+$/,
    show: maskUrl,
  }),
  table: textOption('<name>', {
    description: 'outbox table name (the tables beside it share it as a prefix)',
    env: 'REDFENCE_OUTBOX_TABLE',
    default: 'redfence_outbox',
    allowed: 'a lower-case identifier of at most 40 characters',
    pattern: IDENT,
  }),
  schema: textOption('<name>', {
    description: 'schema of the outbox tables',
    env: 'REDFENCE_OUTBOX_SCHEMA',
    defaultText: "the connection's search_path",
    allowed: 'a lower-case identifier of at most 40 characters',
    pattern: IDENT,
  }),
};

export const OUTBOX_INIT_OPTIONS = {
  ...WHERE,
  roles: numberOption('<n>', {
    description:
      'relay roles of a new outbox (at most this many relays publish at once); an existing one must already have this many',
    env: 'REDFENCE_OUTBOX_ROLES',
    defaultText: '4',
    min: 1,
    max: 64,
  }),
  'print-sql': switchOption({
    description:
      'print the migration SQL (for your own migration tool) instead of running it; needs no database',
  }),
};

export const OUTBOX_RELAY_OPTIONS = {
  ...WHERE,
  brokers: BROKERS_OPTION,
  mode: choiceOption(['exactly-once', 'at-least-once'] as const, {
    description: 'exactly-once: one Kafka transaction per batch; at-least-once: rows marked after acks',
    env: 'REDFENCE_MODE',
    default: 'exactly-once',
  }),
  'topic-template': textOption('<t>', {
    description: 'topic of a row, $' + '{aggregatetype} and $' + '{type} replaced',
    env: 'REDFENCE_OUTBOX_TOPIC_TEMPLATE',
    defaultText: DEFAULT_TOPIC_TEMPLATE,
  }),
  'batch-size': numberOption('<n>', {
    description: 'rows per batch and role',
    env: 'REDFENCE_OUTBOX_BATCH_SIZE',
    defaultText: '1000',
    min: 1,
    max: 5000,
  }),
  'poll-interval': numberOption('<ms>', {
    description: 'poll interval when no NOTIFY arrives',
    env: 'REDFENCE_OUTBOX_POLL_INTERVAL_MS',
    defaultText: '1000',
    min: 10,
  }),
  lease: numberOption('<ms>', {
    description: 'role lease, renewed every third',
    env: 'REDFENCE_OUTBOX_LEASE_MS',
    defaultText: '10000',
    min: 300,
    max: 600_000,
  }),
  'max-attempts': numberOption('<n>', {
    description: 'attempts before a row that cannot be produced is parked',
    env: 'REDFENCE_OUTBOX_MAX_ATTEMPTS',
    defaultText: '5',
    min: 1,
    max: 1000,
  }),
  'max-message-bytes': numberOption('<n>', {
    description: "largest record produced (set it to the broker's limit); bigger rows are parked",
    env: 'REDFENCE_OUTBOX_MAX_MESSAGE_BYTES',
    defaultText: '1000000',
    min: 1024,
  }),
  retention: numberOption('<ms>', {
    description: 'published rows older than this are deleted; 0 keeps them',
    env: 'REDFENCE_OUTBOX_RETENTION_MS',
    defaultText: '86400000',
    min: 0,
  }),
  'retention-batch': numberOption('<n>', {
    description: 'rows per retention DELETE',
    env: 'REDFENCE_OUTBOX_RETENTION_BATCH',
    defaultText: '1000',
    min: 1,
    max: 100_000,
  }),
  'transaction-timeout': numberOption('<ms>', {
    description: "exactly-once: the broker aborts a dead relay's open transaction after this long",
    env: 'REDFENCE_TRANSACTION_TIMEOUT_MS',
    defaultText: '10000',
    min: 1000,
    max: 900_000,
  }),
  'progress-topic': textOption('<topic>', {
    description: 'exactly-once progress topic; set it with --transactional-id-prefix, once, and keep both',
    env: 'REDFENCE_OUTBOX_PROGRESS_TOPIC',
    defaultText: 'redfence-outbox-progress.<schema.table>',
    allowed: 'a Kafka topic name (letters, digits, ".", "_" or "-", at most 249)',
    pattern: /^[A-Za-z0-9._-]{1,249}$/,
  }),
  'transactional-id-prefix': textOption('<prefix>', {
    description: 'exactly-once: role r uses the transactional id <prefix>-<r>',
    env: 'REDFENCE_OUTBOX_TRANSACTIONAL_ID_PREFIX',
    defaultText: 'redfence-outbox-<schema.table>',
    allowed: 'letters, digits, ".", "_" or "-" (at most 200)',
    pattern: /^[A-Za-z0-9._-]{1,200}$/,
  }),
  'relay-id': textOption('<id>', {
    description: "this relay's id in the role table",
    env: 'REDFENCE_OUTBOX_RELAY_ID',
    defaultText: 'random',
    allowed: 'letters, digits, ".", "_" or "-" (at most 100)',
    pattern: /^[A-Za-z0-9._-]{1,100}$/,
  }),
  'metrics-port': numberOption('<n>', {
    description: 'serve /metrics on 127.0.0.1:<n>',
    env: 'REDFENCE_METRICS_PORT',
    min: 1,
    max: 65535,
  }),
  'registry-redis': textOption('<url>', {
    description:
      'a Redis to register this relay in (rf:instances:<id>, listed by redfence console); default: none',
    env: 'REDFENCE_REGISTRY_REDIS',
    allowed: 'a redis:// or rediss:// URL',
    pattern: /^rediss?:\/\/[^/]/,
    show: showRedisUrl,
  }),
  log: choiceOption(LOG_LEVELS, {
    description: 'JSON logs to stderr at this level',
    env: 'REDFENCE_LOG',
    default: 'info',
  }),
  ...KAFKA_OPTIONS,
};

export const OUTBOX_STATUS_OPTIONS = WHERE;
export const OUTBOX_RETRY_OPTIONS = {
  ...WHERE,
  all: switchOption({ description: 'retry every parked row (instead of the ids given)' }),
};

const SUB = {
  init: [
    'redfence outbox init [options]',
    'Creates the outbox tables (idempotent), or prints their SQL.',
    OUTBOX_INIT_OPTIONS,
  ],
  relay: [
    'redfence outbox relay [options]',
    'Publishes the outbox to Kafka until SIGTERM/SIGINT.',
    OUTBOX_RELAY_OPTIONS,
  ],
  status: [
    'redfence outbox status [options]',
    'Prints pending, parked and published counts, the lag, roles and relays as JSON.',
    OUTBOX_STATUS_OPTIONS,
  ],
  retry: [
    'redfence outbox retry <id>... | --all [options]',
    'Puts parked rows back to pending (their aggregate follows them).',
    OUTBOX_RETRY_OPTIONS,
  ],
} as const satisfies Record<string, readonly [string, string, Table]>;

const HELP = `Usage: redfence outbox <init|relay|status|retry> [options]\n\n${Object.values(SUB)
  .map(([u, a]) => `  ${u}\n      ${a}`)
  .join('\n')}\n\nEach subcommand's --help lists its options.\n`;

const invalid = (m: string) => new RedfenceError('RF_INVALID_OPTIONS', m);

function needUrl(url: string | undefined): string {
  if (url === undefined) throw invalid('missing --database-url <url> (or DATABASE_URL)');
  return url;
}

export async function outbox(args: readonly string[], out: (s: string) => void): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === undefined || sub === '--help' || sub === '-h') {
    out(HELP);
    return sub === undefined ? 2 : 0;
  }
  if (!Object.hasOwn(SUB, sub)) throw invalid(`unknown subcommand "${sub}": init, relay, status or retry`);
  const [usage, about, table] = SUB[sub as keyof typeof SUB];
  const parsed = parseOptions(table, rest);
  if (parsed.help) {
    out(helpText(usage, about, table));
    return 0;
  }
  const o = parsed.values as Record<string, unknown>;
  const where = {
    table: o.table as string,
    ...(o.schema === undefined ? {} : { schema: o.schema as string }),
  };
  if (sub !== 'retry' && parsed.positionals.length > 0)
    throw invalid(`unexpected arguments ${parsed.positionals.join(' ')}`);
  const mod = await import('../outbox/index.js');
  const init = { ...where, ...(o.roles === undefined ? {} : { roles: o.roles as number }) };
  if (sub === 'init' && o['print-sql'] === true) {
    out(mod.outboxSql(init));
    return 0;
  }
  if (sub === 'retry') {
    const bad = parsed.positionals.filter((id) => !UUID.test(id));
    if (bad.length > 0) throw invalid(`not a row id (UUID): ${bad.join(' ')}`);
    if ((o.all === true) === parsed.positionals.length > 0)
      throw invalid('give the ids of parked rows, or --all (not both)');
  }
  const url = needUrl(o['database-url'] as string | undefined);
  if (sub === 'relay') return relay(o, where, url);
  const { loadPg } = await import('../outbox/pg.js');
  const pg = await loadPg();
  const pool = new pg.Pool({ connectionString: url, max: 1, connectionTimeoutMillis: 10_000 });
  pool.on('error', () => undefined);
  try {
    const { outboxNames } = await import('../outbox/schema.js');
    const names = outboxNames(where);
    if (sub === 'init') {
      const client = await pool.connect();
      try {
        await mod.initOutbox(client, init);
      } finally {
        client.release();
      }
      out(`outbox ${names.label} ready\n`);
      return 0;
    }
    if (sub === 'status') {
      out(`${JSON.stringify(await mod.status(pool, names), null, 2)}\n`);
      return 0;
    }
    const n = await mod.retry(pool, names, o.all === true ? 'all' : parsed.positionals);
    out(`${n} row${n === 1 ? '' : 's'} back to pending\n`);
    return n > 0 || o.all === true ? 0 : 3;
  } catch (err) {
    const { missingObject } = await import('../outbox/pg.js');
    if (missingObject(err))
      throw new RedfenceError(
        'RF_OUTBOX_MISSING',
        `no outbox here (${(err as Error).message}): run redfence outbox init`,
        {
          cause: err,
        },
      );
    throw err;
  } finally {
    await pool.end();
  }
}

async function relay(o: Record<string, unknown>, where: { table: string; schema?: string }, url: string) {
  // files read and every contradiction refused before anything connects
  const kafka = kafkaSecurity(o as unknown as KafkaValues);
  const { OutboxRelay } = await import('../outbox/index.js');
  const { Registry } = await import('prom-client');
  const relayId = (o['relay-id'] as string | undefined) ?? `relay-${process.pid}`;
  const logger = jsonLogger(o.log as (typeof LOG_LEVELS)[number], relayId);
  const registry = new Registry();
  const opt = <T>(k: string): T | undefined => o[k] as T | undefined;
  const registryUrl = opt<string>('registry-redis');
  // the registry is for operators: its Redis failing never stops the relay (its errors are ignored)
  const registryRedis =
    registryUrl === undefined
      ? undefined
      : new (await import('ioredis')).Redis(registryUrl, { maxRetriesPerRequest: 1 }).on(
          'error',
          () => undefined,
        );
  const relayOptions = {
    ...where,
    databaseUrl: url,
    brokers: o.brokers as string[],
    mode: o.mode as 'exactly-once' | 'at-least-once',
    relayId,
    logger,
    metrics: registry,
    kafka,
    ...(registryRedis === undefined ? {} : { redis: registryRedis }),
    ...(opt('topic-template') === undefined ? {} : { topicTemplate: opt<string>('topic-template') }),
    ...(opt('batch-size') === undefined ? {} : { batchSize: opt<number>('batch-size') }),
    ...(opt('poll-interval') === undefined ? {} : { pollIntervalMs: opt<number>('poll-interval') }),
    ...(opt('lease') === undefined ? {} : { leaseMs: opt<number>('lease') }),
    ...(opt('max-attempts') === undefined ? {} : { maxAttempts: opt<number>('max-attempts') }),
    ...(opt('max-message-bytes') === undefined ? {} : { maxMessageBytes: opt<number>('max-message-bytes') }),
    ...(opt('retention') === undefined ? {} : { retentionMs: opt<number>('retention') }),
    ...(opt('retention-batch') === undefined ? {} : { retentionBatch: opt<number>('retention-batch') }),
    ...(opt('transaction-timeout') === undefined
      ? {}
      : { transactionTimeoutMs: opt<number>('transaction-timeout') }),
    ...(opt('progress-topic') === undefined ? {} : { progressTopic: opt<string>('progress-topic') }),
    ...(opt('transactional-id-prefix') === undefined
      ? {}
      : { transactionalIdPrefix: opt<string>('transactional-id-prefix') }),
  };
  const r = new OutboxRelay(relayOptions);
  const port = opt<number>('metrics-port');
  const server =
    port === undefined
      ? undefined
      : createServer((req, res) => {
          if (req.url !== '/metrics') {
            res.writeHead(404).end();
            return;
          }
          registry.metrics().then(
            (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
            () => res.writeHead(500).end(),
          );
        });
  let signals = 0;
  const stopped = new Promise<number>((resolve) => {
    const onSignal = (sig: string) => {
      if (++signals > 1) process.exit(130);
      logger.info({ signal: sig }, 'shutting down');
      r.close().then(
        () => {
          registryRedis?.disconnect();
          server?.close(() => resolve(0)) ?? resolve(0);
        },
        () => resolve(1),
      );
    };
    process.on('SIGTERM', () => onSignal('SIGTERM'));
    process.on('SIGINT', () => onSignal('SIGINT'));
  });
  if (server && port !== undefined) {
    // loopback only; the registry gets the address listened on (not the hostname, which may not reach it)
    await new Promise<void>((res) => server.listen(port, '127.0.0.1', res));
    const { setRegistryMetricsAddress } = await import('../runtime/registry.js');
    setRegistryMetricsAddress('127.0.0.1', port);
  }
  try {
    await r.start();
  } catch (err) {
    registryRedis?.disconnect();
    server?.close();
    throw err;
  }
  logger.info({ roles: r.roles, mode: relayOptions.mode }, 'outbox relay running');
  return stopped;
}
