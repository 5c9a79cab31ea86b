/**
 * PostgreSQL idempotency for side effects (`ctx.transaction`), the pattern "check + process + mark in
 * one DB transaction": BEGIN; INSERT the id into the processed-ids table (ON CONFLICT DO NOTHING);
 * no row inserted -> ROLLBACK, skipped; else run the user's writes on the same connection and COMMIT
 * both. Inserting first (rather than SELECT, then INSERT) makes two concurrent deliveries of one id
 * (a zombie and the new owner) safe: the second waits on the first's row lock and then skips.
 * A crash anywhere before COMMIT leaves neither write; after it, both, and the replay skips.
 *
 * The pool is the caller's (pg's Pool fits the narrow port below); this module imports no driver.
 */

import type { OnceResult, SqlClient } from '../definition/handler.js';
import { RedfenceError } from '../errors/index.js';

/** A connection pool: pg's `Pool` fits. */
export interface SqlPool {
  connect(): Promise<SqlClient & { release(err?: Error | boolean): void }>;
}

const IDENT = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/** `table` or `schema.table`, each part a plain identifier; returned double-quoted. */
export function quotedTable(name: string): string {
  const parts = name.split('.');
  if (parts.length > 2 || !parts.every((p) => IDENT.test(p)))
    throw new RedfenceError(
      'RF_INVALID_OPTIONS',
      `option "postgres.table" must be <table> or <schema>.<table> of [A-Za-z_][A-Za-z0-9_]*, got ${JSON.stringify(name)}`,
    );
  return parts.map((p) => `"${p}"`).join('.');
}

/** The documented table (docs/handlers.md): run it once, or let `createProcessedTable` do it. */
export function processedTableSql(table = 'redfence_processed'): string {
  return `CREATE TABLE IF NOT EXISTS ${quotedTable(table)} (id text PRIMARY KEY, processed_at timestamptz NOT NULL DEFAULT now())`;
}

/** Creates the processed-ids table if it does not exist. */
export async function createProcessedTable(pool: SqlPool, table = 'redfence_processed'): Promise<void> {
  const c = await pool.connect();
  try {
    await c.query(processedTableSql(table));
  } finally {
    c.release();
  }
}

export class SqlOnce {
  readonly #pool: SqlPool;
  readonly #insert: string;

  constructor(pool: SqlPool, table: string) {
    this.#pool = pool;
    this.#insert = `INSERT INTO ${quotedTable(table)} (id, processed_at) VALUES ($1, now()) ON CONFLICT (id) DO NOTHING`;
  }

  async run<R>(id: string, fn: (db: SqlClient) => Promise<R>, signal: AbortSignal): Promise<OnceResult<R>> {
    const c = await this.#pool.connect();
    let broken: Error | undefined;
    try {
      await c.query('BEGIN');
      try {
        const ins = await c.query(this.#insert, [id]);
        if ((ins.rowCount ?? 0) === 0) {
          await c.query('ROLLBACK');
          return { ran: false };
        }
        const value = await fn(c);
        // abandoned meanwhile (revocation, close): roll back rather than commit work nobody will commit
        if (signal.aborted) throw signal.reason;
        await c.query('COMMIT');
        return { ran: true, value };
      } catch (err) {
        await c.query('ROLLBACK').catch((e: unknown) => {
          broken = e instanceof Error ? e : new Error(String(e));
        });
        throw err;
      }
    } finally {
      c.release(broken ?? false);
    }
  }
}
