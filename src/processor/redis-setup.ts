/**
 * What the processor does with Redis besides the fence calls: the start-up checks (eviction policy,
 * AOF), loading the fence's scripts into every master, and WAIT for replicas. On Redis Cluster each
 * runs on every master: WAIT is per connection, so one WAIT on each master covers every write the
 * cycle sent there, and only if the connection that carried them is still the one WAIT runs on (see
 * `connectionCloses`).
 */
import { Cluster, type Redis } from 'ioredis';
import { RedfenceError } from '../errors/index.js';
import { loadScripts } from '../fence/index.js';
import { checkRedisKind } from '../fence/redis-kind.js';
import { wrapRedisError } from '../fence/script-runner.js';
import type { Logger } from '../runtime/logger.js';
import type { WaitReplicasOptions } from './options.js';

/** The nodes that take writes: the client itself, or every master of a cluster. */
async function masters(redis: Redis | Cluster): Promise<Redis[]> {
  if (!(redis instanceof Cluster)) return [redis];
  // a command waits until the cluster client is ready, and the master list is known from then on
  if (redis.status !== 'ready') await redis.ping();
  // A master that died leaves the client's node list, but its successor joins it only when the slot
  // map is refreshed, which a client that sends only WAIT never triggers: WAIT would skip the new
  // master, and with every master gone pass on none. Refresh when a slot's master is not in the list.
  if (!mastersKnown(redis)) {
    await new Promise<void>((resolve, reject) =>
      redis.refreshSlotsCache((err) => (err ? reject(err) : resolve())),
    ).catch((err: unknown) => {
      throw wrapRedisError('CLUSTER SLOTS', err);
    });
    if (!mastersKnown(redis))
      throw new RedfenceError(
        'RF_REDIS_UNAVAILABLE',
        'Redis Cluster: a slot has no known master (failing over)',
      );
  }
  return redis.nodes('master');
}

function mastersKnown(cluster: Cluster): boolean {
  const nodes = cluster.nodes('master');
  if (nodes.length === 0) return false;
  const known = new Set(nodes.map((n) => `${n.options.host}:${n.options.port}`));
  for (const owners of cluster.slots)
    if (owners && owners.length > 0 && !known.has(owners[0] as string)) return false;
  return true;
}

async function call<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw wrapRedisError(what, err);
  }
}

/**
 * An ioredis client keeps a command through this many reconnect attempts before failing it; the
 * processor learns of an outage only from a failed command. Past this, warn.
 */
const MAX_QUIET_RETRIES = 3;

/**
 * A MOVED or ASK that reaches the caller means the cluster client's slot map is stale, and retrying
 * with it fails the same way for as long as it stays stale: with auto-pipelining ioredis hands over the
 * redirects of a pipeline whose slots moved (a failover) instead of following them. The slot map is
 * refreshed before the Redis guard retries.
 */
export function refreshAfterRedirect(redis: Redis | Cluster, err: unknown): void {
  if (!(redis instanceof Cluster)) return;
  let text = '';
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++)
    text += ` ${e.message}`;
  if (/\b(MOVED|ASK) \d+ /.test(text)) redis.refreshSlotsCache();
}

/** Refuses an evicting Redis (unless allowed), warns when AOF is off or the client hides outages. */
export async function checkRedis(
  redis: Redis | Cluster,
  requireNoEviction: boolean,
  log: Logger,
): Promise<void> {
  if (!(redis instanceof Cluster)) {
    const retries = redis.options.maxRetriesPerRequest;
    if (retries === null || retries === undefined || retries > MAX_QUIET_RETRIES)
      log.warn(
        { maxRetriesPerRequest: retries ?? null },
        'the Redis client keeps commands through many reconnects (ioredis maxRetriesPerRequest): an outage is noticed only when they fail, about a minute late with the defaults; set maxRetriesPerRequest: 1 (redfence retries with its own backoff)',
      );
  }
  // a replica or a Cluster node behind a single-node client: READONLY / MOVED on the first write
  await checkRedisKind(redis);
  for (const node of await masters(redis)) {
    const policy = ((await call('CONFIG GET', () => node.config('GET', 'maxmemory-policy'))) as string[])[1];
    if (policy !== 'noeviction') {
      if (requireNoEviction) {
        throw new RedfenceError(
          'RF_UNSAFE_REDIS',
          `Redis maxmemory-policy is ${policy}: eviction silently deletes fences and replays are applied twice. Set it to noeviction (or pass requireNoEviction: false).`,
        );
      }
      log.warn({ policy }, 'Redis maxmemory-policy is not noeviction');
    }
    const aof = ((await call('CONFIG GET', () => node.config('GET', 'appendonly'))) as string[])[1];
    if (aof !== 'yes')
      log.warn(
        { appendonly: aof },
        'Redis AOF is off: a Redis restart loses fences (see docs/operations.md)',
      );
  }
}

/**
 * SCRIPT LOAD of every fence script on every master, checking the SHA each one answers. (The fence
 * still falls back to EVAL on NOSCRIPT, e.g. on a replica promoted later.) Returns the scripts loaded.
 */
export async function loadFenceScripts(redis: Redis | Cluster): Promise<number> {
  const scripts = [...loadScripts().values()];
  for (const node of await masters(redis)) {
    for (const s of scripts) {
      const sha = await call(`SCRIPT LOAD ${s.id}`, () => node.script('LOAD', s.source) as Promise<unknown>);
      if (sha !== s.sha)
        throw new RedfenceError(
          'RF_BAD_REPLY',
          `SCRIPT LOAD of ${s.id} answered ${String(sha)}, expected ${s.sha}`,
        );
    }
  }
  return scripts.length;
}

/**
 * Counts the connection closes of a client (of every node of a cluster). WAIT covers only the writes
 * sent on the connection it runs on: a WAIT that succeeds after a close since the writes says nothing
 * about them. After a failover they may be gone (acknowledged by the old primary, never replicated),
 * and the new primary's replicas acknowledge a WAIT on a fresh connection at once.
 */
export function connectionCloses(redis: Redis | Cluster): () => number {
  let closes = 0;
  const bump = (): void => {
    closes++;
  };
  if (typeof redis.on !== 'function') return () => closes; // a stand-in without events
  if (redis instanceof Cluster) {
    redis.on('+node', (node: Redis) => node.on('close', bump));
    redis.on('-node', bump);
    for (const node of redis.nodes()) node.on('close', bump);
  } else redis.on('close', bump);
  return () => closes;
}

/** WAIT on every master; fewer acknowledgements than asked for is RF_REDIS_UNAVAILABLE (the guard retries). */
export async function waitReplicas(redis: Redis | Cluster, wait: WaitReplicasOptions): Promise<void> {
  const nodes = await masters(redis);
  const acks = await Promise.all(
    nodes.map((node) => call('WAIT', () => node.wait(wait.replicas, wait.timeoutMs)).then(Number)),
  );
  const least = Math.min(...acks);
  if (least < wait.replicas) {
    const which =
      nodes.length > 1
        ? ` on ${acks.filter((a) => a < wait.replicas).length} of ${nodes.length} masters`
        : '';
    throw new RedfenceError(
      'RF_REDIS_UNAVAILABLE',
      `WAIT: ${least} of ${wait.replicas} replicas acknowledged within ${wait.timeoutMs} ms${which}`,
    );
  }
}
