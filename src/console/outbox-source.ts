/**
 * The console's outbox, read and retried through src/outbox/admin.ts (the home of `redfence outbox
 * status` and `redfence outbox retry`): status, pending and parked counts per aggregate type, and the
 * retry of parked rows.
 *
 * ```ts
 * const outbox = outboxSource(pool, outboxNames({ schema: 'shop' }));
 * await startConsole({ redis, kafka, outbox, actionToken });
 * ```
 */
import { countsByType, retry, status } from '../outbox/admin.js';
import type { Queryable } from '../outbox/pg.js';
import type { OutboxNames } from '../outbox/schema.js';
import type { OutboxSource } from './view.js';

export function outboxSource(db: Queryable, names: OutboxNames): OutboxSource {
  return {
    status: () => status(db, names),
    byType: () => countsByType(db, names),
    retry: (ids) => retry(db, names, ids),
  };
}
