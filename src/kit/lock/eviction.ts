/**
 * The fenced lock's start-up check of the Redis eviction policy. The fencing counter (`<base>:fence`)
 * has no TTL and must never restart: an evicted counter would hand out fencing numbers the protected
 * store has already seen, and a paused old holder could then write after the new one. So the counters
 * may only live on a Redis that never evicts a key without a TTL: `noeviction`, or a `volatile-*`
 * policy (those evict only keys with a TTL; the counters have none). `allkeys-*` is refused with
 * RF_KIT_EVICTION_POLICY. On a Cluster every master is asked. A Redis where CONFIG is disabled (a
 * managed service, an ACL without it) cannot be checked: the lock goes on, with one process warning
 * (`process.emitWarning`, code RF_KIT_EVICTION_POLICY_UNCHECKED) per lock family.
 */
import type { Cluster, Redis } from 'ioredis';
import { RedfenceError } from '../../errors/index.js';

type Client = Redis | Cluster;

/** Policies under which a key without a TTL is never evicted. */
export function keepsCounters(policy: string): boolean {
  return policy === 'noeviction' || policy.startsWith('volatile-');
}

function nodesOf(redis: Client): Redis[] {
  const c = redis as Cluster & { isCluster?: boolean };
  return c.isCluster === true ? c.nodes('master') : [redis as Redis];
}

/** CONFIG GET within `timeoutMs`; a Redis that does not answer rejects RF_REDIS_UNAVAILABLE. */
async function policyOf(node: Redis, timeoutMs: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const call = node.config('GET', 'maxmemory-policy');
  call.catch(() => undefined); // a rejection after the deadline
  try {
    return await Promise.race([
      call,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new RedfenceError('RF_REDIS_UNAVAILABLE', `CONFIG GET did not answer within ${timeoutMs} ms`),
            ),
          timeoutMs,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

function configDisabled(err: unknown): boolean {
  const m = String((err as Error)?.message ?? '');
  return /unknown command|NOPERM|no permissions|unknown subcommand|disabled|renamed/i.test(m);
}

/**
 * The eviction policies of the nodes holding lock `name`'s counters: resolves when they keep keys
 * without a TTL (or CONFIG cannot be read: warned), rejects RF_KIT_EVICTION_POLICY when a node may
 * evict them, RF_REDIS_UNAVAILABLE when a node did not answer in `timeoutMs` (tried again on the next use).
 */
export async function checkEvictionPolicy(redis: Client, name: string, timeoutMs: number): Promise<void> {
  for (const node of nodesOf(redis)) {
    let reply: unknown;
    try {
      reply = await policyOf(node, timeoutMs);
    } catch (err) {
      if (RedfenceError.is(err)) throw err;
      if (!configDisabled(err))
        throw new RedfenceError(
          'RF_REDIS_UNAVAILABLE',
          `lock "${name}": the eviction policy could not be read`,
          {
            cause: err,
          },
        );
      process.emitWarning(
        `lock "${name}": CONFIG GET maxmemory-policy is not allowed on this Redis; make sure its eviction policy is noeviction or volatile-* (an evicted fencing counter restarts the fencing numbers)`,
        { code: 'RF_KIT_EVICTION_POLICY_UNCHECKED' },
      );
      return;
    }
    const policy = Array.isArray(reply) ? String(reply[1] ?? '') : '';
    if (policy === '') continue; // an old or unusual server: nothing to judge by
    if (!keepsCounters(policy)) {
      const at = `${node.options.host ?? '?'}:${node.options.port ?? '?'}`;
      throw new RedfenceError(
        'RF_KIT_EVICTION_POLICY',
        `lock "${name}": Redis ${at} has maxmemory-policy ${policy}, which may evict the fencing counters (they have no TTL); use noeviction or a volatile-* policy`,
        { details: { policy, node: at } },
      );
    }
  }
}
