/**
 * The outbox's view of PostgreSQL: a narrow query port that any pg-like client fits (pg's Client,
 * PoolClient and Pool), and the lazy load of `pg` itself, an optional peer dependency: only the relay and
 * the CLI open connections, and they fail with RF_PG_MISSING when it is not installed.
 */
import { RedfenceError } from '../errors/index.js';

/** What the outbox calls on a client: pg's `query(text, values)`. */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[]; rowCount: number | null }>;
}

/** A pool the relay owns: clients for LISTEN and for its queries. */
export interface PgPool extends Queryable {
  connect(): Promise<PgPoolClient>;
  end(): Promise<void>;
  on(event: 'error', listener: (err: Error) => void): unknown;
}

export interface PgPoolClient extends Queryable {
  release(err?: Error | boolean): void;
  on(event: 'notification', listener: (msg: { channel: string; payload?: string }) => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
}

export interface PgModule {
  Pool: new (config: {
    connectionString: string;
    max?: number;
    connectionTimeoutMillis?: number;
    application_name?: string;
  }) => PgPool;
}

/** Loads `pg` on first use. */
export async function loadPg(): Promise<PgModule> {
  try {
    const mod = (await import('pg')) as unknown as { default?: PgModule } & PgModule;
    return mod.default ?? mod;
  } catch (err) {
    throw new RedfenceError(
      'RF_PG_MISSING',
      'the outbox needs the PostgreSQL client "pg" (an optional peer dependency): npm install pg',
      { cause: err },
    );
  }
}

/** PostgreSQL's SQLSTATE of an error, if it has one. */
export function sqlState(err: unknown): string | undefined {
  const code = (err as { code?: unknown })?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** undefined_table / undefined_function: the outbox was not initialised (or under another name). */
export function missingObject(err: unknown): boolean {
  const s = sqlState(err);
  return s === '42P01' || s === '42883';
}

/** A connection URL with its password masked, for messages. */
export function maskUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return '<unparsable URL>';
  }
}
