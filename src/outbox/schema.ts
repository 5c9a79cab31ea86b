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

/** Where the outbox goes, and its number of relay roles. */
export interface OutboxInit extends OutboxLocation {
  /**
   * Relay roles (default 4, from 1 to {@link MAX_ROLES}): at most this many relays publish at once, each
   * role's aggregates in order. Set when the outbox is made; an init naming another count for an
   * existing outbox is refused (RF_INVALID_OPTIONS), since it would move aggregates between roles.
   */
  roles?: number;
}

export const DEFAULT_ROLES = 4;
/** Each held role runs its own loop and producer: more roles than this would cost more than they share. */
export const MAX_ROLES = 64;

function checkRoles(roles: number | undefined): number {
  if (roles === undefined) return DEFAULT_ROLES;
  if (!Number.isSafeInteger(roles) || roles < 1 || roles > MAX_ROLES)
    throw new RedfenceError(
      'RF_INVALID_OPTIONS',
      `outbox roles must be an integer from 1 to ${MAX_ROLES}, got ${JSON.stringify(roles)}`,
    );
  return roles;
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
export function outboxSql(loc: OutboxInit = {}): string {
  const n = outboxNames(loc);
  const roles = checkRoles(loc.roles);
  const body = MIGRATIONS.map(migrationText)
    .join('\n')
    .replace(/\bredfence_outbox/g, n.base)
    .replace('generate_series(0, 4 - 1)', `generate_series(0, ${roles} - 1)`);
  return n.schema === undefined
    ? body
    : `CREATE SCHEMA IF NOT EXISTS "${n.schema}";\nSET LOCAL search_path TO "${n.schema}";\n${body}`;
}

/**
 * Creates (or brings up to date) the outbox tables in one transaction. With `roles` given, an existing
 * outbox must have that many roles: otherwise RF_INVALID_OPTIONS and nothing changes.
 */
export async function initOutbox(client: Queryable, loc: OutboxInit = {}): Promise<void> {
  const sql = outboxSql(loc);
  await client.query('BEGIN');
  try {
    // Two concurrent inits would race on CREATE ... IF NOT EXISTS; one waits for the other instead.
    await client.query("SELECT pg_advisory_xact_lock(hashtext('redfence_outbox_init'))");
    await client.query(sql);
    if (loc.roles !== undefined) {
      const n = outboxNames(loc);
      const { rows } = await client.query(`SELECT count(*)::int AS n FROM ${n.role}`);
      const have = (rows[0] as { n: number }).n;
      if (have !== loc.roles)
        throw new RedfenceError(
          'RF_INVALID_OPTIONS',
          `outbox ${n.label} already has ${have} roles, not ${loc.roles}: the role count is set when the outbox is made ` +
            '(changing it would move aggregates to other roles while relays publish them)',
        );
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
