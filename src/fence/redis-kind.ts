/**
 * Is this the kind of Redis a single-node client can write to? A standalone client pointed at a
 * read-only replica fails its first write with READONLY (which is also what a failover looks like, so
 * it is retried as RF_REDIS_UNAVAILABLE); pointed at a Redis Cluster node it fails with MOVED on every
 * key of another node's slots. Both are set-up mistakes, found at start-up from INFO (role,
 * cluster_enabled) and refused with RF_REDIS_WRONG_KIND naming the node and the fix. A Redis that
 * refuses INFO (an ACL without it), or does not answer it within 2 s, is not refused: nothing can be told.
 */
import type { Cluster, Redis } from 'ioredis';
import { RedfenceError } from '../errors/index.js';

/** How the caller names its options in the fix (`--cluster` on the CLI, a `Cluster` client in code). */
export interface RedisKindHints {
  readonly cluster: string;
  readonly primary: string;
}

const LIBRARY: RedisKindHints = {
  cluster: 'give a Cluster client (new Cluster([{ host, port }, ...]) from ioredis) instead',
  primary: 'point the client at the primary, or connect through Sentinel (new Redis({ sentinels, name }))',
};

/** The CLI's words for the same fixes. */
export const CLI_HINTS: RedisKindHints = {
  cluster: 'use --cluster host:port,... instead of --redis',
  primary: 'point --redis at the primary, or use --sentinels with --sentinel-name',
};

function field(info: string, name: string): string | undefined {
  return new RegExp(`^${name}:(.*)$`, 'm').exec(info)?.[1]?.trim();
}

/**
 * How long the check waits for INFO. A Redis that does not answer in time (stopped, overloaded) is not
 * judged here: start-up goes on, and the runtime's own Redis handling (pause, retry, outage) takes it
 * from there, as it did before the check existed — a check must never turn a slow Redis into a hang.
 */
const INFO_TIMEOUT_MS = 2000;

async function info(redis: Redis, section: string): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(resolve, INFO_TIMEOUT_MS, undefined);
    timer.unref();
  });
  try {
    const answer = redis.info(section).then(String);
    answer.catch(() => undefined);
    return await Promise.race([answer, late]);
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}

/** RF_REDIS_WRONG_KIND when a standalone client reaches a replica or a Cluster node; nothing for a Cluster client. */
export async function checkRedisKind(
  redis: Redis | Cluster,
  hints: RedisKindHints = LIBRARY,
  /** Only reads (a replica answers those): only a Cluster node is refused. */
  readOnly = false,
): Promise<void> {
  if ((redis as { isCluster?: boolean }).isCluster === true) return;
  const r = redis as Redis;
  const where = `Redis at ${r.options.host ?? '127.0.0.1'}:${r.options.port ?? 6379}`;
  const cluster = await info(r, 'cluster');
  if (cluster !== undefined && field(cluster, 'cluster_enabled') === '1')
    throw new RedfenceError(
      'RF_REDIS_WRONG_KIND',
      `${where} is a Redis Cluster node: a single-node client gets MOVED for the keys of other nodes; ${hints.cluster}`,
      { details: { kind: 'cluster-node' } },
    );
  if (readOnly) return;
  const replication = await info(r, 'replication');
  if (replication !== undefined && field(replication, 'role') === 'slave') {
    const master = `${field(replication, 'master_host') ?? '?'}:${field(replication, 'master_port') ?? '?'}`;
    throw new RedfenceError(
      'RF_REDIS_WRONG_KIND',
      `${where} is a read-only replica (of ${master}): writes fail with READONLY; ${hints.primary}`,
      { details: { kind: 'replica' } },
    );
  }
}
