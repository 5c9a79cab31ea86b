/**
 * What operators do to an outbox besides relaying it: status (counts, lag, roles), retry of parked rows,
 * and retention (published rows deleted by age, in bounded batches). Used by the relay and by the
 * `redfence outbox` CLI verbs.
 */
import type { Queryable } from './pg.js';
import type { OutboxNames } from './schema.js';

export interface OutboxStatus {
  pending: number;
  parked: number;
  published: number;
  /** Age of the oldest pending row in seconds (0 when none). */
  oldestPendingSeconds: number;
  roles: Array<{ role: number; owner: string | null; epoch: number; expiresInMs: number }>;
  relays: Array<{ owner: string; seenMsAgo: number }>;
  /** Parked rows (at most 20), oldest first: id, aggregate, attempts, error. */
  parkedRows: Array<{
    id: string;
    aggregatetype: string;
    aggregateid: string;
    attempts: number;
    error: string;
  }>;
}

/** The counts the metrics sample (cheap: each one reads a partial index). */
export async function counts(
  db: Queryable,
  n: OutboxNames,
): Promise<{ pending: number; parked: number; oldestPendingSeconds: number }> {
  const { rows } = await db.query(
    `SELECT (SELECT count(*) FROM ${n.table} WHERE state = 'pending')::int AS pending,
            (SELECT count(*) FROM ${n.table} WHERE state = 'parked')::int AS parked,
            coalesce((SELECT extract(epoch FROM clock_timestamp() - created_at) FROM ${n.table}
                      WHERE state = 'pending' ORDER BY pos LIMIT 1), 0)::float8 AS oldest`,
  );
  const r = rows[0] as { pending: number; parked: number; oldest: number };
  return { pending: r.pending, parked: r.parked, oldestPendingSeconds: Math.max(0, r.oldest) };
}

/** Pending and parked rows of one aggregate type. */
export interface AggregateTypeCounts {
  aggregatetype: string;
  pending: number;
  parked: number;
}

/**
 * Pending and parked rows per aggregate type (published rows are not counted), by type; at most
 * `limit` types, those with the most pending and parked rows first.
 *
 * ```ts
 * const perType = await countsByType(pool, outboxNames({ schema: 'shop' }));
 * // [{ aggregatetype: 'order', pending: 12, parked: 1 }]
 * ```
 */
export async function countsByType(
  db: Queryable,
  n: OutboxNames,
  limit = 100,
): Promise<AggregateTypeCounts[]> {
  const { rows } = await db.query(
    `SELECT aggregatetype,
            count(*) FILTER (WHERE state = 'pending')::int AS pending,
            count(*) FILTER (WHERE state = 'parked')::int AS parked
     FROM ${n.table} WHERE state IN ('pending', 'parked')
     GROUP BY aggregatetype ORDER BY count(*) DESC, aggregatetype LIMIT $1`,
    [limit],
  );
  return rows as AggregateTypeCounts[];
}

export async function status(db: Queryable, n: OutboxNames): Promise<OutboxStatus> {
  const c = await counts(db, n);
  const published = await db.query(`SELECT count(*)::int AS n FROM ${n.table} WHERE state = 'published'`);
  const roles = await db.query(
    `SELECT role, owner, epoch::float8 AS epoch,
            CASE WHEN isfinite(expires_at) THEN greatest(-1, extract(epoch FROM expires_at - clock_timestamp()) * 1000)
                 ELSE -1 END::float8 AS ms
     FROM ${n.role} ORDER BY role`,
  );
  const relays = await db.query(
    `SELECT owner, (extract(epoch FROM clock_timestamp() - seen_at) * 1000)::float8 AS ms FROM ${n.relay} ORDER BY owner`,
  );
  const parked = await db.query(
    `SELECT id, aggregatetype, aggregateid, attempts, coalesce(last_error, '') AS error
     FROM ${n.table} WHERE state = 'parked' ORDER BY pos LIMIT 20`,
  );
  return {
    ...c,
    published: (published.rows[0] as { n: number }).n,
    roles: (roles.rows as Array<{ role: number; owner: string | null; epoch: number; ms: number }>).map(
      (r) => ({
        role: r.role,
        owner: r.owner,
        epoch: r.epoch,
        expiresInMs: Math.round(r.ms),
      }),
    ),
    relays: (relays.rows as Array<{ owner: string; ms: number }>).map((r) => ({
      owner: r.owner,
      seenMsAgo: Math.round(r.ms),
    })),
    parkedRows: parked.rows as OutboxStatus['parkedRows'],
  };
}

/**
 * Puts parked rows back to pending with their attempts reset: the given ids, or every parked row.
 * Returns how many rows changed. The aggregate's later rows follow them, in order.
 */
export async function retry(db: Queryable, n: OutboxNames, ids: readonly string[] | 'all'): Promise<number> {
  const where = ids === 'all' ? '' : 'AND id = ANY($1::uuid[])';
  const r = await db.query(
    `UPDATE ${n.table} SET state = 'pending', attempts = 0 WHERE state = 'parked' ${where}`,
    ids === 'all' ? [] : [ids],
  );
  if ((r.rowCount ?? 0) > 0) await db.query('SELECT pg_notify($1, $2)', [n.channel, '']);
  return r.rowCount ?? 0;
}

/**
 * Deletes published rows older than `olderThanMs`, `batch` rows per statement (short locks, bounded
 * WAL per statement), at most `maxBatches` statements. Returns the rows deleted.
 */
export async function purgePublished(
  db: Queryable,
  n: OutboxNames,
  olderThanMs: number,
  batch: number,
  maxBatches = 20,
): Promise<number> {
  let total = 0;
  for (let i = 0; i < maxBatches; i++) {
    const r = await db.query(
      `DELETE FROM ${n.table} WHERE id IN (
         SELECT id FROM ${n.table}
         WHERE state = 'published' AND published_at < clock_timestamp() - $1 * interval '1 millisecond'
         ORDER BY published_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
      [olderThanMs, batch],
    );
    total += r.rowCount ?? 0;
    if ((r.rowCount ?? 0) < batch) break;
  }
  return total;
}
