/**
 * Key names of the operations plane: the instance registry (`src/runtime/registry.ts`) and the
 * console's audit trail (`src/console/audit.ts`). Outside any store's slot: read by operators only.
 */

/** The registry hash of one running instance (PX heartbeat TTL). */
export function instanceKey(id: string): string {
  return `rf:instances:${id}`;
}

/** Sorted set of instance ids scored by their heartbeat's expiry (ms): the console lists it. */
export const INSTANCE_INDEX_KEY = 'rf:instances';

/** The console's audit trail: a Redis stream, one entry per action. */
export const CONSOLE_AUDIT_KEY = 'rf:console:audit';
