/**
 * The Redis clients the CLI makes: `--redis <url>` (standalone) or `--cluster <seeds>` (Redis Cluster).
 * Every client gets its error listeners before it connects (an ioredis client without one prints
 * "[ioredis] Unhandled error event" on every reconnect attempt), connects lazily, and must be ready
 * within --connect-timeout or the verb fails with RF_REDIS_UNAVAILABLE. A URL's password never appears
 * in a message: `showRedisUrl` masks it.
 */
import type { Cluster, Redis } from 'ioredis';
import { RedfenceError } from '../errors/index.js';
import type { Logger } from '../index.js';
import { hostPort, listOption, numberOption, RANK, type Source, textOption } from './options.js';

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
  'connect-timeout': numberOption('<ms>', {
    description: 'give up when Redis is not ready after this long at start-up',
    env: 'REDFENCE_CONNECT_TIMEOUT_MS',
    default: 5000,
    min: 1,
    max: 600_000,
  }),
};

export type RedisTarget =
  | { kind: 'standalone'; url: string }
  | { kind: 'cluster'; nodes: Array<{ host: string; port: number }> };

/**
 * `--redis` or `--cluster`: the one from the stronger source wins (a `--redis` flag beats
 * REDIS_CLUSTER_NODES in the environment); both from the same source is refused.
 */
export function redisTarget(
  values: { redis: string; cluster: Array<{ host: string; port: number }> | undefined },
  sources: { redis?: Source; cluster?: Source },
): RedisTarget {
  const url: RedisTarget = { kind: 'standalone', url: values.redis };
  if (values.cluster === undefined) return url;
  const r = RANK[sources.redis ?? 'default'];
  const c = RANK[sources.cluster ?? 'default'];
  if (r === c)
    throw new RedfenceError(
      'RF_INVALID_OPTIONS',
      `--redis and --cluster exclude each other, and both are given (${sources.cluster === 'env' ? 'REDIS_URL and REDIS_CLUSTER_NODES' : `in the ${sources.cluster === 'flag' ? 'flags' : 'config file'}`}); keep one`,
    );
  return r > c ? url : { kind: 'cluster', nodes: values.cluster };
}

export function describeTarget(t: RedisTarget): string {
  return t.kind === 'standalone'
    ? `Redis at ${showRedisUrl(t.url)}`
    : `Redis Cluster at ${t.nodes.map((n) => `${n.host}:${n.port}`).join(',')}`;
}

const message = (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? '';

/**
 * A client for `target` that has not connected yet, with its error events handled: once it has been
 * ready, logged once per outage (at `warn`; the processor's own guard pauses and retries), then quiet
 * until it is ready again.
 */
export async function redisClient(target: RedisTarget, logger: Logger): Promise<Redis | Cluster> {
  const ioredis = await import('ioredis');
  const client =
    target.kind === 'standalone'
      ? new ioredis.Redis(target.url, { lazyConnect: true, enableAutoPipelining: true })
      : new ioredis.Cluster(target.nodes, { lazyConnect: true, enableAutoPipelining: true });
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
  return client;
}

/** Connects `client`, or fails with RF_REDIS_UNAVAILABLE (and disconnects it) after `timeoutMs`. */
export async function connectRedis(
  client: Redis | Cluster,
  target: RedisTarget,
  timeoutMs: number,
): Promise<void> {
  let last: unknown;
  const onError = (err: unknown) => {
    last = err;
  };
  client.on('error', onError);
  let timer: NodeJS.Timeout | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      client.once('ready', () => resolve());
      timer = setTimeout(() => {
        client.disconnect();
        reject(
          new RedfenceError(
            'RF_REDIS_UNAVAILABLE',
            `${describeTarget(target)} was not ready within ${timeoutMs} ms` +
              (last === undefined ? '' : ` (${message(last)})`) +
              '; check --redis / --cluster',
            { cause: last },
          ),
        );
      }, timeoutMs);
      // connect() rejects on the first failed attempt while the client keeps retrying: the deadline decides.
      client.connect().catch(() => undefined);
    });
  } finally {
    clearTimeout(timer);
    client.off('error', onError);
  }
}
