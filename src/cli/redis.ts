/**
 * The Redis clients the CLI makes: `--redis <url>` (standalone), `--cluster <seeds>` (Redis Cluster) or
 * `--sentinels <list>` (the primary Sentinel names), with the TLS and ACL settings of redis-options.ts.
 * Every client gets its error listeners before it connects (an ioredis client without one prints
 * "[ioredis] Unhandled error event" on every reconnect attempt), connects lazily, and must be ready
 * within --connect-timeout or the verb fails with RF_REDIS_UNAVAILABLE. Refused credentials and TLS
 * handshakes that cannot succeed (an untrusted or mismatched certificate) are not retried: they fail the
 * verb at once with RF_REDIS_AUTH. A URL's password never appears in a message: `showRedisUrl` masks it.
 */
import type { Cluster, Redis, RedisOptions } from 'ioredis';
import { RedfenceError } from '../errors/index.js';
import { CLI_HINTS, checkRedisKind } from '../fence/redis-kind.js';
import type { Logger } from '../index.js';
import { describeTarget, type RedisTarget } from './redis-options.js';

export {
  describeTarget,
  REDIS_OPTIONS,
  type RedisTarget,
  redisTarget,
  showRedisUrl,
} from './redis-options.js';

/** host, port, db and credentials of a redis:// or rediss:// URL (checked by redisTarget). */
function urlOptions(raw: string): RedisOptions {
  const u = new URL(raw);
  const o: RedisOptions = {
    host: u.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: u.port ? Number(u.port) : 6379,
  };
  if (u.username) o.username = decodeURIComponent(u.username);
  if (u.password) o.password = decodeURIComponent(u.password);
  if (u.pathname.length > 1) o.db = Number(u.pathname.slice(1));
  return o;
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? '';

/**
 * A client for `target` that has not connected yet, with its error events handled: once it has been
 * ready, logged once per outage (at `warn`; the processor's own guard pauses and retries), then quiet
 * until it is ready again.
 */
export async function redisClient(target: RedisTarget, logger: Logger): Promise<Redis | Cluster> {
  const ioredis = await import('ioredis');
  // The same TLS settings and credentials on every node (a cluster's, or the primary Sentinel names).
  const node: RedisOptions = {};
  if (target.tls !== undefined) node.tls = target.tls;
  if (target.username !== undefined) node.username = target.username;
  if (target.password !== undefined) node.password = target.password;
  const base = { lazyConnect: true, enableAutoPipelining: true };
  // A single node (standalone or the Sentinels' primary): a command fails after one reconnect attempt
  // instead of ioredis' 20 (about 70 s with its backoff), so the processor's Redis guard sees the outage
  // at once (pause, metric, readiness) and retries with its own backoff; reconnects at most 1 s apart,
  // so work resumes within a second of Redis coming back.
  const single = {
    ...base,
    maxRetriesPerRequest: 1,
    retryStrategy: (times: number) => Math.min(50 * 2 ** (times - 1), 1000),
  };
  const client =
    target.kind === 'standalone'
      ? new ioredis.Redis({ ...single, ...urlOptions(target.url), ...node })
      : target.kind === 'cluster'
        ? new ioredis.Cluster(target.nodes, { ...base, redisOptions: node })
        : new ioredis.Redis({
            ...single,
            ...node,
            sentinels: target.sentinels,
            name: target.name,
            role: 'master',
            ...(target.tls === undefined ? {} : { enableTLSForSentinelMode: true }),
            ...(target.sentinelTls === undefined ? {} : { sentinelTLS: target.sentinelTls }),
            ...(target.sentinelUsername === undefined ? {} : { sentinelUsername: target.sentinelUsername }),
            ...(target.sentinelPassword === undefined ? {} : { sentinelPassword: target.sentinelPassword }),
          });
  // Before the first 'ready', connectRedis reports the failure; afterwards each outage is logged once.
  let reported = true;
  client.on('error', (err: unknown) => {
    if (reported) return;
    reported = true;
    logger.warn({ err: message(err), redis: describeTarget(target) }, 'Redis connection error');
  });
  client.on('ready', () => {
    reported = false;
  });
  // A Cluster also reports each node's errors; they are handled by its own reconnects.
  if (client instanceof ioredis.Cluster) client.on('node error', () => undefined);
  else client.on('sentinelError', () => undefined);
  return client;
}

/** TLS failures no retry can mend: the certificate chain, its names or dates, or an alert from the server. */
const TLS_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_SIGNATURE_FAILURE',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_REVOKED',
  'CERT_UNTRUSTED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/**
 * Why a connection attempt can never succeed as configured, or undefined when a retry may help: Redis
 * (or a Sentinel) refused the credentials, or the TLS handshake failed on a certificate.
 */
export function refusal(err: unknown, target: RedisTarget): string | undefined {
  // a cluster's "Failed to refresh slots cache." carries the last node's error
  const inner = (err as { lastNodeError?: unknown } | null)?.lastNodeError;
  if (inner) return refusal(inner, target);
  const text = message(err);
  const code = (err as { code?: unknown } | null)?.code;
  const sentinel = /sentinel/i.test(text) && target.kind === 'sentinel';
  const m = /\b(WRONGPASS|NOAUTH|NOPERM)\b[^.;]*/.exec(text);
  if (m)
    return sentinel
      ? `the Sentinels refused the credentials (${m[0]}); check --sentinel-password-file / REDFENCE_SENTINEL_PASSWORD (and --sentinel-user)`
      : `refused the credentials (${m[0]}); check the user (--redis-user or the URL) and the password (REDFENCE_REDIS_PASSWORD, --redis-password-file or the URL)`;
  if (typeof code === 'string' && (TLS_CODES.has(code) || code.startsWith('ERR_SSL_')))
    return `failed the TLS handshake: ${text.replace(/^[0-9A-F]+:error:[0-9A-F]+:SSL routines:[^:]*:([^:]+):.*$/, '$1')} (${code}); check --redis-ca${code.includes('ALERT') ? ', --redis-cert and --redis-key' : ''}${code === 'ERR_TLS_CERT_ALTNAME_INVALID' ? ' and --redis-servername' : ''}`;
  return undefined;
}

/** The error of one connection to `node` with the cluster's node settings, if it fails. */
async function probeNode(cluster: Cluster, node: { host: string; port: number }): Promise<unknown> {
  const ioredis = await import('ioredis');
  const r = new ioredis.Redis({
    ...cluster.options.redisOptions,
    ...node,
    lazyConnect: true,
    retryStrategy: () => null,
    maxRetriesPerRequest: 0,
  });
  let failure: unknown;
  r.on('error', (err: unknown) => {
    failure ??= err;
  });
  await r.connect().catch((err: unknown) => {
    failure ??= err;
  });
  r.disconnect();
  return failure;
}

/**
 * Connects `client`, or fails (and disconnects it): at once with RF_REDIS_AUTH when the credentials or
 * the certificate are refused, else with RF_REDIS_UNAVAILABLE after `timeoutMs`.
 */
export async function connectRedis(
  client: Redis | Cluster,
  target: RedisTarget,
  timeoutMs: number,
  /** The verb only reads (inspect): a replica is fine, a Cluster node is still refused. */
  readOnly = false,
): Promise<void> {
  let last: unknown;
  let fail: ((err: RedfenceError) => void) | undefined;
  const onError = (err: unknown) => {
    last = err;
    const why = refusal(err, target);
    if (why !== undefined) fail?.(new RedfenceError('RF_REDIS_AUTH', `${describeTarget(target)} ${why}`));
  };
  // A cluster reports each node's failures as 'node error', the Sentinel connector each Sentinel's as 'sentinelError'.
  const events = ['error', 'node error', 'sentinelError'];
  for (const e of events) client.on(e, onError);
  // A cluster's node clients hide a TLS failure behind "Connection is closed.": one plain connection to
  // the first seed, with the same settings and no retries, tells why.
  let probed = false;
  const probe = () => {
    if (probed || target.kind !== 'cluster' || target.nodes[0] === undefined) return;
    probed = true;
    void probeNode(client as Cluster, target.nodes[0]).then((err) => err !== undefined && onError(err));
  };
  client.on('error', probe);
  let timer: NodeJS.Timeout | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      fail = (err) => {
        client.disconnect();
        reject(err);
      };
      client.once('ready', () => resolve());
      timer = setTimeout(() => {
        fail?.(
          new RedfenceError(
            'RF_REDIS_UNAVAILABLE',
            `${describeTarget(target)} was not ready within ${timeoutMs} ms` +
              (last === undefined ? '' : ` (${message(last)})`) +
              '; check --redis / --cluster / --sentinels',
            { cause: last },
          ),
        );
      }, timeoutMs);
      // connect() rejects on the first failed attempt while the client keeps retrying: the deadline decides.
      client.connect().catch(() => undefined);
    });
  } finally {
    fail = undefined;
    clearTimeout(timer);
    for (const e of events) client.off(e, onError);
    client.off('error', probe);
  }
  // --redis at a replica or a Cluster node: READONLY / MOVED later, refused here with the fix
  if (target.kind === 'standalone')
    await checkRedisKind(client, CLI_HINTS, readOnly).catch((err: unknown) => {
      client.disconnect();
      throw err;
    });
}
