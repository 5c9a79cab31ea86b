/**
 * Which outbox a relay serves, as written in every exactly-once progress record: the PostgreSQL system
 * (pg_control_system()'s system identifier, one per cluster, kept by its physical replicas), the
 * database, and the schema and table the outbox really is in (the search_path resolved). The relay's
 * default progress topic and transactional ids carry only the schema and table names given, so two
 * services with their own databases and the default settings on one Kafka cluster share them. A relay
 * that finds another outbox's identity in its progress topic refuses to go on (RF_OUTBOX_NAME_CLASH)
 * before it fences anything. Records written before identities were (none in them) belong to anyone.
 */
import { RedfenceError } from '../errors/index.js';
import type { Queryable } from './pg.js';
import type { OutboxNames } from './schema.js';

export interface OutboxIdentity {
  /** The PostgreSQL system identifier; absent when the relay's role may not call pg_control_system(). */
  readonly system?: string;
  readonly database: string;
  readonly schema: string;
  readonly table: string;
}

/** The identity of the outbox named `names` in the database `db` is connected to. */
export async function outboxIdentity(db: Queryable, names: OutboxNames): Promise<OutboxIdentity> {
  const { rows } = await db.query(
    `SELECT current_database() AS database, n.nspname AS schema, c.relname AS table
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass($1)`,
    [names.table],
  );
  const r = rows[0] as { database: string; schema: string; table: string } | undefined;
  // start() has read the role table beside it: a missing table here is a concurrent drop
  if (r === undefined) throw new RedfenceError('RF_OUTBOX_MISSING', `no outbox ${names.label}`);
  let system: string | undefined;
  try {
    const s = await db.query('SELECT system_identifier::text AS system FROM pg_control_system()');
    system = (s.rows[0] as { system: string } | undefined)?.system;
  } catch {
    // EXECUTE revoked from PUBLIC (some managed services): database, schema and table still tell apart
  }
  return {
    ...(system === undefined ? {} : { system }),
    database: r.database,
    schema: r.schema,
    table: r.table,
  };
}

/** Whether a progress record's identity is this outbox's (a record without one is nobody's in particular). */
export function sameOutbox(mine: OutboxIdentity, theirs: unknown): boolean {
  if (theirs === undefined || theirs === null || typeof theirs !== 'object') return true;
  const t = theirs as Partial<OutboxIdentity>;
  if (t.database !== mine.database || t.schema !== mine.schema || t.table !== mine.table) return false;
  return t.system === undefined || mine.system === undefined || t.system === mine.system;
}

/** The known fields of a record's identity, as strings (it comes from a topic anyone may write). */
function known(theirs: unknown): Partial<OutboxIdentity> {
  const t = (typeof theirs === 'object' && theirs !== null ? theirs : {}) as Record<string, unknown>;
  const out: Record<string, string> = {};
  for (const k of ['system', 'database', 'schema', 'table'])
    if (t[k] !== undefined) out[k] = String(t[k]).slice(0, 100);
  return out;
}

function describe(i: Partial<OutboxIdentity>): string {
  const where = `${String(i.database)}.${String(i.schema)}.${String(i.table)}`;
  return i.system === undefined ? where : `${where} on PostgreSQL system ${i.system}`;
}

/** The refusal: names the topic, both outboxes (names only, never rows) and the fix. */
export function nameClash(topic: string, mine: OutboxIdentity, record: unknown): RedfenceError {
  const theirs = known(record);
  return new RedfenceError(
    'RF_OUTBOX_NAME_CLASH',
    `progress topic ${topic} holds the progress of outbox ${describe(theirs)}, ` +
      `not of this outbox ${describe(mine)}: relays of two outboxes sharing a progress topic and ` +
      'transactional ids fence each other and read each other’s progress. Give this relay names of its own: ' +
      'set the relay options progressTopic and transactionalIdPrefix (CLI --progress-topic, ' +
      '--transactional-id-prefix), both, and keep them',
    {
      details: { topic, outbox: { ...mine }, other: theirs },
    },
  );
}
