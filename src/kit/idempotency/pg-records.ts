/**
 * The durable side of the idempotency store: one PostgreSQL row per (tenant, store, key hash) is the
 * claim and then the record. `INSERT ... ON CONFLICT DO NOTHING` decides which request runs; a claim
 * whose `claimed_until` has passed, or a record whose `expires_at` has passed, is taken over by a
 * conditional UPDATE (one winner). Times are PostgreSQL's `now()`, never a client's clock. Only
 * `query(text, values)` is called, so a pg Pool, Client or PoolClient fits; `pg` is never imported here.
 */
import { RedfenceError } from '../../errors/index.js';

/** What the store calls on PostgreSQL: pg's `query(text, values)`. */
export interface PgQueryable {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[]; rowCount: number | null }>;
}

/** A pool: `connect()` hands out a client for one transaction (`runInTransaction`). */
export interface PgPool extends PgQueryable {
  connect(): Promise<PgQueryable & { release(err?: Error | boolean): void }>;
}

export type PgClaim =
  | { verdict: 'claimed' }
  | { verdict: 'mismatch' }
  | { verdict: 'inflight' }
  | { verdict: 'done'; response: string; remainingMs: number };

interface Row {
  fingerprint: string;
  state: string;
  response: string | null;
  claim_over: boolean;
  expired: boolean;
  remaining_ms: string;
}

const PK = 'tenant = $1 AND store = $2 AND key_hash = $3';

export class PgRecords {
  /** `name` or `schema.name`, lower case: safe to put in SQL text as it is. */
  static readonly TABLE = /^[a-z_][a-z0-9_]{0,62}(\.[a-z_][a-z0-9_]{0,62})?$/;
  readonly #pg: PgQueryable;
  readonly #t: string;

  constructor(pg: PgQueryable, table: string) {
    this.#pg = pg;
    this.#t = table;
  }

  async #q(text: string, values: unknown[] = []): Promise<{ rows: unknown[]; rowCount: number | null }> {
    try {
      return await this.#pg.query(text, values);
    } catch (err) {
      throw new RedfenceError(
        'RF_POSTGRES_UNAVAILABLE',
        `idempotency store: PostgreSQL failed a query on ${this.#t}`,
        { cause: err },
      );
    }
  }

  /** BEGIN, with a lock wait bound: a duplicate's INSERT waits at most `lockWaitMs` for an open claim. */
  async begin(lockWaitMs: number): Promise<void> {
    await this.#q('BEGIN');
    await this.#q(`SET LOCAL lock_timeout = ${Math.trunc(lockWaitMs)}`);
  }

  async unboundLockWait(): Promise<void> {
    await this.#q('SET LOCAL lock_timeout TO DEFAULT');
  }

  async commit(): Promise<void> {
    await this.#q('COMMIT');
  }

  async rollback(): Promise<void> {
    await this.#q('ROLLBACK');
  }

  /** Whether `err` is PostgreSQL's lock_timeout (SQLSTATE 55P03) under one of this module's errors. */
  static lockTimedOut(err: unknown): boolean {
    const cause = (err as { cause?: { code?: unknown } } | undefined)?.cause;
    return RedfenceError.is(err, 'RF_POSTGRES_UNAVAILABLE') && cause?.code === '55P03';
  }

  async init(): Promise<void> {
    await this.#q(`CREATE TABLE IF NOT EXISTS ${this.#t} (
      tenant text NOT NULL,
      store text NOT NULL,
      key_hash text NOT NULL,
      fingerprint text NOT NULL,
      state text NOT NULL CHECK (state IN ('inflight', 'done')),
      owner text NOT NULL,
      response text,
      claimed_until timestamptz NOT NULL,
      expires_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      completed_at timestamptz,
      PRIMARY KEY (tenant, store, key_hash))`);
  }

  /** Claims the key for `owner`, or answers why not (the stored response when done). */
  async claim(
    tenant: string,
    store: string,
    keyHash: string,
    fp: string,
    owner: string,
    inFlightTtlMs: number,
    ttlMs: number,
  ): Promise<PgClaim> {
    const pk = [tenant, store, keyHash];
    // Three rounds cover a row deleted or taken over between two statements.
    for (let round = 0; round < 3; round++) {
      const ins = await this.#q(
        `INSERT INTO ${this.#t} (tenant, store, key_hash, fingerprint, state, owner, claimed_until, expires_at)
         VALUES ($1, $2, $3, $4, 'inflight', $5, now() + $6 * interval '1 millisecond', now() + $7 * interval '1 millisecond')
         ON CONFLICT DO NOTHING`,
        [...pk, fp, owner, inFlightTtlMs, ttlMs],
      );
      if (ins.rowCount === 1) return { verdict: 'claimed' };
      const row = await this.#select(pk);
      if (row === undefined) continue;
      const dead = row.state === 'done' ? row.expired : row.claim_over;
      if (dead) {
        const up = await this.#q(
          `UPDATE ${this.#t} SET fingerprint = $4, state = 'inflight', owner = $5, response = NULL,
             claimed_until = now() + $6 * interval '1 millisecond', expires_at = now() + $7 * interval '1 millisecond',
             created_at = now(), completed_at = NULL
           WHERE ${PK} AND ((state = 'done' AND expires_at <= now()) OR (state = 'inflight' AND claimed_until <= now()))`,
          [...pk, fp, owner, inFlightTtlMs, ttlMs],
        );
        if (up.rowCount === 1) return { verdict: 'claimed' };
        continue;
      }
      if (row.fingerprint !== fp) return { verdict: 'mismatch' };
      if (row.state === 'done') {
        return { verdict: 'done', response: row.response ?? 'null', remainingMs: Number(row.remaining_ms) };
      }
      return { verdict: 'inflight' };
    }
    return { verdict: 'inflight' };
  }

  /**
   * What the row says, without claiming: for a Redis claim that may be a leftover (a claim script that
   * reached Redis after its caller gave up on it, or a response that reached PostgreSQL but not Redis).
   */
  async peek(tenant: string, store: string, keyHash: string, fp: string): Promise<PgClaim | undefined> {
    const row = (await this.#select([tenant, store, keyHash])) as Row | undefined;
    if (row === undefined || (row.state === 'done' ? row.expired : row.claim_over)) return undefined;
    if (row.fingerprint !== fp) return { verdict: 'mismatch' };
    if (row.state === 'done') {
      return { verdict: 'done', response: row.response ?? 'null', remainingMs: Number(row.remaining_ms) };
    }
    return { verdict: 'inflight' };
  }

  async #select(pk: string[]): Promise<Row | undefined> {
    const sel = await this.#q(
      `SELECT fingerprint, state, response, claimed_until <= now() AS claim_over, expires_at <= now() AS expired,
         GREATEST(1, ceil(extract(epoch FROM expires_at - now()) * 1000))::bigint AS remaining_ms
       FROM ${this.#t} WHERE ${PK}`,
      pk,
    );
    return sel.rows[0] as Row | undefined;
  }

  /** Stores the response when the claim is still `owner`'s; false when it expired and was taken over. */
  async complete(
    tenant: string,
    store: string,
    keyHash: string,
    owner: string,
    response: string,
    ttlMs: number,
  ): Promise<boolean> {
    const r = await this.#q(
      `UPDATE ${this.#t} SET state = 'done', response = $5, completed_at = now(),
         expires_at = now() + $6 * interval '1 millisecond'
       WHERE ${PK} AND owner = $4 AND state = 'inflight'`,
      [tenant, store, keyHash, owner, response, ttlMs],
    );
    return r.rowCount === 1;
  }

  /** Gives up `owner`'s unfinished claim (its command failed). */
  async release(tenant: string, store: string, keyHash: string, owner: string): Promise<void> {
    await this.#q(`DELETE FROM ${this.#t} WHERE ${PK} AND owner = $4 AND state = 'inflight'`, [
      tenant,
      store,
      keyHash,
      owner,
    ]);
  }

  async purgeExpired(): Promise<number> {
    const r = await this.#q(
      `DELETE FROM ${this.#t} WHERE (state = 'done' AND expires_at <= now()) OR (state = 'inflight' AND claimed_until <= now())`,
    );
    return r.rowCount ?? 0;
  }
}
