/**
 * Relay roles, leased in PostgreSQL. The outbox's rows are split into a fixed number of roles (a row's
 * role is its bucket modulo the role count); a relay publishes only the rows of the roles it holds, so
 * one aggregate is only ever published by one relay at a time. A lease is renewed every third of its
 * length; a relay that stops renewing (killed, frozen, cut off) loses its roles when the lease runs
 * out, and the next holder raises the role's epoch. Relays share the roles evenly: each one's share is
 * the role count divided by the live relays (heartbeat rows), rounded up; a relay over its share gives
 * the extra roles back, one under it claims free or expired ones.
 */
import type { Queryable } from './pg.js';
import type { OutboxNames } from './schema.js';

export interface Role {
  readonly role: number;
  readonly epoch: number;
}

export interface LeaseTick {
  /** Roles this relay still holds with the epoch it believed (renewed). */
  readonly kept: Role[];
  /** Roles it believed it held and no longer does (another relay took them). */
  readonly lost: Role[];
  /** Roles claimed by this tick. */
  readonly gained: Role[];
  /** How many roles this relay holds beyond its share: the caller releases that many. */
  readonly surplus: number;
  /** Live relays, this one included. */
  readonly relays: number;
}

const role = (r: { role: number; epoch: string | number }): Role => ({
  role: r.role,
  epoch: Number(r.epoch),
});

export class Leases {
  readonly #db: Queryable;
  readonly #n: OutboxNames;
  readonly #owner: string;
  readonly #leaseMs: number;
  #roles = 0;

  constructor(db: Queryable, names: OutboxNames, owner: string, leaseMs: number) {
    this.#db = db;
    this.#n = names;
    this.#owner = owner;
    this.#leaseMs = leaseMs;
  }

  /** How many roles the outbox has (rows of the role table). */
  async roleCount(): Promise<number> {
    const { rows } = await this.#db.query(`SELECT count(*)::int AS n FROM ${this.#n.role}`);
    this.#roles = (rows[0] as { n: number }).n;
    return this.#roles;
  }

  /** Heartbeat, renewal, claim: one round of the lease protocol. `held` is what the caller runs. */
  async tick(held: readonly Role[]): Promise<LeaseTick> {
    const n = this.#n;
    const lease = `${this.#leaseMs} * interval '1 millisecond'`;
    await this.#db.query(
      `WITH gone AS (DELETE FROM ${n.relay} WHERE seen_at < clock_timestamp() - ${lease} AND owner <> $1)
       INSERT INTO ${n.relay} (owner, seen_at) VALUES ($1, clock_timestamp())
       ON CONFLICT (owner) DO UPDATE SET seen_at = EXCLUDED.seen_at`,
      [this.#owner],
    );
    const renewed = await this.#db.query(
      `UPDATE ${n.role} SET expires_at = clock_timestamp() + ${lease}
       WHERE owner = $1 AND role = ANY($2::int[]) RETURNING role, epoch`,
      [this.#owner, held.map((r) => r.role)],
    );
    const now = new Map(
      (renewed.rows as Array<{ role: number; epoch: string }>).map((r) => [r.role, role(r)]),
    );
    const kept: Role[] = [];
    const lost: Role[] = [];
    for (const r of held) (now.get(r.role)?.epoch === r.epoch ? kept : lost).push(r);
    const { rows } = await this.#db.query(`SELECT count(*)::int AS n FROM ${n.relay}`);
    const relays = Math.max(1, (rows[0] as { n: number }).n);
    const share = Math.ceil(this.#roles / relays);
    let gained: Role[] = [];
    if (kept.length < share) {
      const claimed = await this.#db.query(
        `UPDATE ${n.role} SET owner = $1, epoch = epoch + 1, expires_at = clock_timestamp() + ${lease}
         WHERE role IN (SELECT role FROM ${n.role}
                        WHERE owner IS NULL OR expires_at < clock_timestamp()
                        ORDER BY role LIMIT $2 FOR UPDATE SKIP LOCKED)
         RETURNING role, epoch`,
        [this.#owner, share - kept.length],
      );
      gained = (claimed.rows as Array<{ role: number; epoch: string }>).map(role);
    }
    return { kept, lost, gained, surplus: Math.max(0, kept.length - share), relays };
  }

  /** Gives a role back (after its publishing stopped): free at once for another relay. */
  async release(r: Role): Promise<void> {
    await this.#db.query(
      `UPDATE ${this.#n.role} SET owner = NULL, expires_at = '-infinity' WHERE role = $1 AND owner = $2 AND epoch = $3`,
      [r.role, this.#owner, r.epoch],
    );
  }

  /** Leaves the relay table (close): the others' shares grow at their next tick. */
  async leave(): Promise<void> {
    await this.#db.query(`DELETE FROM ${this.#n.relay} WHERE owner = $1`, [this.#owner]);
  }
}
