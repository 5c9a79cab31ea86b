/**
 * The console's audit trail: every action (a dry run included) appended to the Redis stream
 * `rf:console:audit` (capped near 100,000 entries) with who (the remote address and the `actor` the
 * form names), what (the action and its parameters, never the token) and when, and what it did.
 * Read it with `XREVRANGE rf:console:audit + - COUNT 20`.
 */
import type { Cluster, Redis } from 'ioredis';
import { CONSOLE_AUDIT_KEY } from '../keys/instances.js';

export interface AuditEntry {
  action: string;
  actor: string;
  remote: string;
  params: Record<string, string>;
  result: unknown;
}

export const AUDIT_MAX_LEN = 100_000;

/** Appends one entry; returns its stream id. */
export async function audit(redis: Redis | Cluster, e: AuditEntry): Promise<string> {
  const id = await redis.xadd(
    CONSOLE_AUDIT_KEY,
    'MAXLEN',
    '~',
    AUDIT_MAX_LEN,
    '*',
    'at',
    new Date().toISOString(),
    'action',
    e.action,
    'actor',
    e.actor,
    'remote',
    e.remote,
    'params',
    JSON.stringify(e.params),
    'result',
    JSON.stringify(e.result),
  );
  return String(id);
}
