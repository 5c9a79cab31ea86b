/**
 * The Redis options of `run` and `inspect` and what they resolve to: a standalone URL (`--redis`), Redis
 * Cluster seeds (`--cluster`) or Sentinels (`--sentinels` + `--sentinel-name`), each with the same TLS
 * (`rediss://` or `--redis-tls`, `--redis-ca`, `--redis-cert`/`--redis-key` for mTLS, `--redis-servername`)
 * and ACL credentials (`rediss://user:pass@...`, `--redis-user`, the password from REDFENCE_REDIS_PASSWORD or
 * `--redis-password-file`: never a flag, which `ps` would show). The Sentinels themselves take TLS with
 * `--sentinel-tls` (the same CA, certificate and name) and an ACL user with `--sentinel-user` and its
 * password from REDFENCE_SENTINEL_PASSWORD or `--sentinel-password-file`. Everything, the files included, is read
 * and checked here, before any connection; a failure is RF_INVALID_OPTIONS naming the option. Passwords
 * are kept out of every message: `showRedisUrl` masks a URL's.
 */
import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import { RedfenceError } from '../errors/index.js';
import {
  hostPort,
  listOption,
  numberOption,
  RANK,
  type Source,
  switchOption,
  textOption,
} from './options.js';

/** Masks the password (and only it) of a Redis URL; text that is not a URL is shown as `<unparsable>`. */
export function showRedisUrl(raw: string): string {
  try {
    const u = new URL(raw);
    if (u.password) u.password = '***';
    return u.href;
  } catch {
    return raw.includes('@') ? '<unparsable URL>' : raw;
  }
}

const file = (description: string, env: string) => textOption('<file>', { description, env });

/** The Redis options shared by `run` and `inspect`. */
export const REDIS_OPTIONS = {
  redis: textOption('<url>', {
    description: 'standalone Redis URL (redis://[user:password@]host:port[/db] or rediss:// for TLS)',
    env: 'REDIS_URL',
    default: 'redis://127.0.0.1:6379',
    allowed: 'a redis:// or rediss:// URL',
    pattern: /^rediss?:\/\/[^/]/,
    show: showRedisUrl,
  }),
  cluster: listOption('<list>', {
    description: 'Redis Cluster seed nodes host:port,...; used instead of --redis',
    env: 'REDIS_CLUSTER_NODES',
    allowed: 'host:port[,host:port...]',
    item: hostPort,
  }),
  sentinels: listOption('<list>', {
    description:
      'Redis Sentinels host:port,... that name the primary of --sentinel-name; used instead of --redis',
    env: 'REDIS_SENTINELS',
    allowed: 'host:port[,host:port...]',
    item: hostPort,
  }),
  'sentinel-name': textOption('<name>', {
    description: 'the master name the Sentinels monitor (with --sentinels)',
    env: 'REDIS_SENTINEL_NAME',
    allowed: 'letters, digits, ".", "_" or "-"',
    pattern: /^[A-Za-z0-9._-]+$/,
  }),
  'sentinel-user': textOption('<name>', {
    description: "the Sentinels' ACL user (with --sentinels; its password as for --sentinel-password-file)",
    env: 'REDFENCE_SENTINEL_USER',
    allowed: 'a user name (no spaces or commas)',
    pattern: /^[^\s,]+$/,
  }),
  'sentinel-tls': switchOption({
    description:
      'TLS to the Sentinels too (with --sentinels), with the same --redis-ca, --redis-cert/--redis-key and --redis-servername',
    env: 'REDFENCE_SENTINEL_TLS',
  }),
  'sentinel-password-file': file(
    "a file holding the Sentinels' password (or the password itself in REDFENCE_SENTINEL_PASSWORD)",
    'REDFENCE_SENTINEL_PASSWORD_FILE',
  ),
  'redis-tls': switchOption({
    description: 'TLS to the --cluster or --sentinels nodes (with --redis: a rediss:// URL)',
    env: 'REDFENCE_REDIS_TLS',
  }),
  'redis-ca': file(
    "PEM file of the CA(s) that signed Redis' certificate (default: the system's)",
    'REDFENCE_REDIS_CA',
  ),
  'redis-cert': file('PEM client certificate for mutual TLS (with --redis-key)', 'REDFENCE_REDIS_CERT'),
  'redis-key': file('PEM private key of --redis-cert', 'REDFENCE_REDIS_KEY'),
  'redis-servername': textOption('<name>', {
    description: "the name Redis' certificate must carry (SNI), when not the host connected to",
    env: 'REDFENCE_REDIS_SERVERNAME',
    allowed: 'a host name',
    pattern: /^[A-Za-z0-9.-]+$/,
  }),
  'redis-user': textOption('<name>', {
    description: 'ACL user (with --redis: or in the URL)',
    env: 'REDFENCE_REDIS_USER',
    allowed: 'a user name (no spaces or commas)',
    pattern: /^[^\s,]+$/,
  }),
  'redis-password-file': file(
    "a file holding the Redis user's password (or the password itself in REDFENCE_REDIS_PASSWORD; with --redis: or in the URL)",
    'REDFENCE_REDIS_PASSWORD_FILE',
  ),
  'connect-timeout': numberOption('<ms>', {
    description: 'give up when Redis is not ready after this long at start-up',
    env: 'REDFENCE_CONNECT_TIMEOUT_MS',
    default: 5000,
    min: 1,
    max: 600_000,
  }),
};

type Node = { host: string; port: number };

/** Where Redis is and how to reach it: TLS settings and credentials apply to every node. */
export type RedisTarget = (
  | { kind: 'standalone'; url: string }
  | { kind: 'cluster'; nodes: Node[] }
  | {
      kind: 'sentinel';
      sentinels: Node[];
      name: string;
      sentinelUsername?: string;
      sentinelPassword?: string;
      sentinelTls?: ConnectionOptions;
    }
) & { tls?: ConnectionOptions; username?: string; password?: string };

type RedisValues = {
  redis: string;
  cluster: Node[] | undefined;
  sentinels: Node[] | undefined;
  'sentinel-name': string | undefined;
  'sentinel-password-file': string | undefined;
  'sentinel-user': string | undefined;
  'sentinel-tls': boolean;
  'redis-tls': boolean;
  'redis-ca': string | undefined;
  'redis-cert': string | undefined;
  'redis-key': string | undefined;
  'redis-servername': string | undefined;
  'redis-user': string | undefined;
  'redis-password-file': string | undefined;
};
type RedisSources = Partial<Record<keyof RedisValues, Source>>;

const invalid = (message: string) => new RedfenceError('RF_INVALID_OPTIONS', message);
const where = (s: Source | undefined) =>
  s === 'env' ? 'in the environment' : s === 'config' ? 'in the config file' : 'in the flags';

export function readText(option: string, path: string, what: string, test?: RegExp): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : code;
    throw invalid(`--${option} ${path}: cannot read it (${why ?? 'unreadable'})`);
  }
  if (test !== undefined && !test.test(text)) throw invalid(`--${option} ${path}: not a PEM ${what}`);
  return text;
}

/** A password from its environment variable or its file (never both); trailing newlines are dropped. */
export function secretOf(option: string, envName: string, path: string | undefined, env: NodeJS.ProcessEnv) {
  const fromEnv = env[envName] === '' ? undefined : env[envName];
  if (fromEnv !== undefined && path !== undefined)
    throw invalid(`--${option} and ${envName} both give a password; keep one`);
  if (path === undefined) return fromEnv;
  const text = readText(option, path, 'password').replace(/\r?\n$/, '');
  if (text === '') throw invalid(`--${option} ${path}: the file is empty`);
  return text;
}

/** Which of --redis, --cluster, --sentinels: the stronger source wins over --redis; never two of the others. */
function pickKind(values: RedisValues, sources: RedisSources): 'standalone' | 'cluster' | 'sentinel' {
  if (values.cluster !== undefined && values.sentinels !== undefined)
    throw invalid('--cluster and --sentinels exclude each other, and both are given; keep one');
  const other =
    values.cluster !== undefined ? 'cluster' : values.sentinels !== undefined ? 'sentinels' : undefined;
  if (other === undefined) return 'standalone';
  const r = RANK[sources.redis ?? 'default'];
  const o = RANK[sources[other] ?? 'default'];
  if (r === o)
    throw invalid(
      `--redis and --${other} exclude each other, and both are given (${sources[other] === 'env' ? `REDIS_URL and ${other === 'cluster' ? 'REDIS_CLUSTER_NODES' : 'REDIS_SENTINELS'}` : where(sources[other])}); keep one`,
    );
  if (r > o) return 'standalone';
  return other === 'cluster' ? 'cluster' : 'sentinel';
}

/**
 * Resolves the Redis options to a target, reading the CA, certificate, key and password files. Throws
 * RF_INVALID_OPTIONS naming the option for every contradiction or unreadable file.
 */
export function redisTarget(
  values: RedisValues,
  sources: RedisSources,
  env: NodeJS.ProcessEnv = process.env,
): RedisTarget {
  const kind = pickKind(values, sources);
  if (kind !== 'sentinel') {
    for (const o of ['sentinel-name', 'sentinel-password-file', 'sentinel-user'] as const)
      if (values[o] !== undefined)
        throw invalid(`--${o} applies to --sentinels; add --sentinels <host:port,...>`);
    if (values['sentinel-tls'])
      throw invalid('--sentinel-tls applies to --sentinels; add --sentinels <host:port,...>');
  } else if (values['sentinel-name'] === undefined)
    throw invalid('--sentinels needs --sentinel-name <name> (the master name the Sentinels monitor)');

  let url: URL | undefined;
  if (kind === 'standalone') {
    try {
      url = new URL(values.redis);
    } catch {
      throw invalid(`--redis must be a redis:// or rediss:// URL, got "${showRedisUrl(values.redis)}"`);
    }
    if (!/^\/?(\d{1,5})?$/.test(url.pathname) || url.search !== '')
      throw invalid(
        `--redis must be redis[s]://[user:password@]host:port[/db], got "${showRedisUrl(values.redis)}"`,
      );
    if (values['redis-tls'] && url.protocol !== 'rediss:')
      throw invalid('--redis-tls with --redis: use a rediss:// URL instead');
  }
  const tlsOn = url ? url.protocol === 'rediss:' : values['redis-tls'];
  const sentinelTls = kind === 'sentinel' && values['sentinel-tls'];
  for (const o of ['redis-ca', 'redis-cert', 'redis-key', 'redis-servername'] as const)
    if (values[o] !== undefined && !tlsOn && !sentinelTls)
      throw invalid(
        `--${o} needs TLS: ${kind === 'standalone' ? 'a rediss:// URL' : kind === 'sentinel' ? 'add --redis-tls or --sentinel-tls' : 'add --redis-tls'}`,
      );
  if ((values['redis-cert'] === undefined) !== (values['redis-key'] === undefined))
    throw invalid(
      `--${values['redis-cert'] === undefined ? 'redis-key needs --redis-cert' : 'redis-cert needs --redis-key'} (mutual TLS takes both)`,
    );

  const password = secretOf(
    'redis-password-file',
    'REDFENCE_REDIS_PASSWORD',
    values['redis-password-file'],
    env,
  );
  if (url?.password && password !== undefined)
    throw invalid(
      'the --redis URL has a password and REDFENCE_REDIS_PASSWORD or --redis-password-file gives another; keep one',
    );
  if (url?.username && values['redis-user'] !== undefined)
    throw invalid('the --redis URL names a user and --redis-user another; keep one');

  const target: RedisTarget =
    kind === 'standalone'
      ? { kind, url: values.redis }
      : kind === 'cluster'
        ? { kind, nodes: values.cluster as Node[] }
        : { kind, sentinels: values.sentinels as Node[], name: values['sentinel-name'] as string };
  if (target.kind === 'sentinel') {
    const sp = secretOf(
      'sentinel-password-file',
      'REDFENCE_SENTINEL_PASSWORD',
      values['sentinel-password-file'],
      env,
    );
    if (sp !== undefined) target.sentinelPassword = sp;
    if (values['sentinel-user'] !== undefined) {
      if (sp === undefined)
        throw invalid(
          '--sentinel-user needs its password: REDFENCE_SENTINEL_PASSWORD or --sentinel-password-file',
        );
      target.sentinelUsername = values['sentinel-user'];
    }
  }
  if (values['redis-user'] !== undefined) target.username = values['redis-user'];
  if (password !== undefined) target.password = password;
  if (tlsOn || sentinelTls) {
    const tls: ConnectionOptions = {};
    const pem = /-----BEGIN CERTIFICATE-----/;
    if (values['redis-ca'] !== undefined)
      tls.ca = readText('redis-ca', values['redis-ca'], 'certificate', pem);
    if (values['redis-cert'] !== undefined) {
      tls.cert = readText('redis-cert', values['redis-cert'], 'certificate', pem);
      tls.key = readText(
        'redis-key',
        values['redis-key'] as string,
        'private key',
        /-----BEGIN [A-Z ]*PRIVATE KEY-----/,
      );
    }
    if (values['redis-servername'] !== undefined) tls.servername = values['redis-servername'];
    if (tlsOn) target.tls = tls;
    if (sentinelTls && target.kind === 'sentinel') target.sentinelTls = { ...tls };
  }
  return target;
}

export function describeTarget(t: RedisTarget): string {
  const list = (nodes: Node[]) => nodes.map((n) => `${n.host}:${n.port}`).join(',');
  return t.kind === 'standalone'
    ? `Redis at ${showRedisUrl(t.url)}`
    : t.kind === 'cluster'
      ? `Redis Cluster at ${list(t.nodes)}`
      : `Redis primary "${t.name}" of the Sentinels at ${list(t.sentinels)}`;
}
