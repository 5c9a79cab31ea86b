/**
 * The outbox's names and its SQL: the migration shipped in `sql/` is written with the default names
 * (`redfence_outbox...`, current search_path); `outboxSql` renders it for another table name or schema,
 * and every query the outbox runs names its objects through {@link OutboxNames}.
 */
import { readFileSync } from 'node:fs';
import { RedfenceError } from '../errors/index.js';
import type { Queryable } from './pg.js';

export const DEFAULT_TABLE = 'redfence_outbox';
/** A lower-case identifier short enough for the longest derived name (`<table>_published`) to fit 63 bytes. */
const NAME = /^[a-z_][a-z0-9_]{0,39}$/;

export interface OutboxLocation {
  /** Table name (default `redfence_outbox`); the tables, sequence, functions and channel beside it share it as a prefix. */
  table?: string;
  /** Schema; default: the connection's search_path. */
  schema?: string;
}

/** Quoted, schema-qualified names of every outbox object. */
export interface OutboxNames {
  readonly base: string;
  readonly schema: string | undefined;
  readonly table: string;
  readonly aggregate: string;
  readonly role: string;
  readonly relay: string;
  /** The LISTEN/NOTIFY channel (not schema-qualified: channels are per database). */
  readonly channel: string;
  /** `<schema>.<table>` or `<table>`, for messages and ids. */
  readonly label: string;
}

function checkName(what: string, v: string): string {
  if (!NAME.test(v))
    throw new RedfenceError(
      'RF_INVALID_OPTIONS',
      `outbox ${what} must be a lower-case identifier ([a-z_][a-z0-9_]*, at most 40 characters), got ${JSON.stringify(v)}`,
    );
  return v;
}

export function outboxNames(loc: OutboxLocation = {}): OutboxNames {
  const base = checkName('table', loc.table ?? DEFAULT_TABLE);
  const schema = loc.schema === undefined ? undefined : checkName('schema', loc.schema);
  const q = (n: string) => (schema === undefined ? `"${n}"` : `"${schema}"."${n}"`);
  return {
    base,
    schema,
    table: q(base),
    aggregate: q(`${base}_aggregate`),
    role: q(`${base}_role`),
    relay: q(`${base}_relay`),
    channel: base,
    label: schema === undefined ? base : `${schema}.${base}`,
  };
}

const MIGRATIONS = ['001_outbox.sql'] as const;

function migrationText(file: string): string {
  return readFileSync(new URL(`./sql/${file}`, import.meta.url), 'utf8');
}

/**
 * The migrations as SQL for one table name and schema: what `redfence outbox init` runs and
 * `--print-sql` prints. With a schema it starts with `SET LOCAL search_path`, so it must run in a
 * transaction (init does).
 */
export function outboxSql(loc: OutboxLocation = {}): string {
  const n = outboxNames(loc);
  const body = MIGRATIONS.map(migrationText)
    .join('\n')
    .replace(/\bredfence_outbox/g, n.base);
  return n.schema === undefined
    ? body
    : `CREATE SCHEMA IF NOT EXISTS "${n.schema}";\nSET LOCAL search_path TO "${n.schema}";\n${body}`;
}

/** Creates (or brings up to date) the outbox tables in one transaction. */
export async function initOutbox(client: Queryable, loc: OutboxLocation = {}): Promise<void> {
  const sql = outboxSql(loc);
  await client.query('BEGIN');
  try {
    // Two concurrent inits would race on CREATE ... IF NOT EXISTS; one waits for the other instead.
    await client.query("SELECT pg_advisory_xact_lock(hashtext('redfence_outbox_init'))");
    await client.query(sql);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
