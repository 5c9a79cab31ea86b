/**
 * The SQL of one role's rows (worker.ts runs it): its oldest pending rows, skipping aggregates that have
 * a parked row; marking rows published; counting an attempt on refused rows (parked after the last).
 */
import type { Queryable } from './pg.js';
import type { OutboxRow } from './routing.js';
import type { OutboxNames } from './schema.js';

/** The role's oldest pending rows in `pos` order, at most `limit`. */
export async function pendingRows(
  db: Queryable,
  n: OutboxNames,
  roles: number,
  role: number,
  limit: number,
): Promise<OutboxRow[]> {
  const { rows } = await db.query(
    `SELECT o.id, o.pos, o.aggregatetype, o.aggregateid, o.type, o.payload::text AS payload, o.headers, o.attempts
     FROM ${n.table} o
     WHERE o.state = 'pending' AND o.bucket % $1 = $2
       AND NOT EXISTS (SELECT 1 FROM ${n.table} p WHERE p.state = 'parked'
                       AND p.aggregatetype = o.aggregatetype AND p.aggregateid = o.aggregateid)
     ORDER BY o.pos LIMIT $3`,
    [roles, role, limit],
  );
  return rows as OutboxRow[];
}

/** Marks rows published (those still pending). */
export async function markPublished(db: Queryable, n: OutboxNames, ids: readonly string[]): Promise<void> {
  await db.query(
    `UPDATE ${n.table} SET state = 'published', published_at = clock_timestamp()
     WHERE id = ANY($1::uuid[]) AND state = 'pending'`,
    [ids],
  );
}

/** Counts an attempt on each refused row with its reason; returns the reasons of the rows now parked. */
export async function refuseRows(
  db: Queryable,
  n: OutboxNames,
  refused: ReadonlyArray<{ id: string; why: string }>,
  maxAttempts: number,
): Promise<string[]> {
  const { rows } = await db.query(
    `UPDATE ${n.table} o SET attempts = o.attempts + 1, last_error = f.why,
       state = CASE WHEN o.attempts + 1 >= $3 THEN 'parked' ELSE o.state END
     FROM unnest($1::uuid[], $2::text[]) AS f(id, why)
     WHERE o.id = f.id AND o.state = 'pending' RETURNING o.state, f.why`,
    [refused.map((r) => r.id), refused.map((r) => r.why), maxAttempts],
  );
  return (rows as Array<{ state: string; why: string }>)
    .filter((r) => r.state === 'parked')
    .map((r) => r.why);
}
