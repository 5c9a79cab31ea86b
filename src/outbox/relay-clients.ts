/**
 * The relay's clients, as its options make them: the PostgreSQL pool (named in pg_stat_activity) with
 * the outbox's role count and identity read through it, and one producer per role (idempotent, or
 * transactional with the role's transactional id).
 */
import { RedfenceError } from '../errors/index.js';
import { DeliveryProducer } from '../kafka/producer.js';
import { type OutboxIdentity, outboxIdentity } from './identity.js';
import { Leases } from './leases.js';
import type { ResolvedRelayOptions } from './options.js';
import { loadPg, maskUrl, missingObject, type PgPool } from './pg.js';
import type { OutboxNames } from './schema.js';

export interface RelayDatabase {
  readonly pool: PgPool;
  readonly leases: Leases;
  readonly roles: number;
  readonly identity: OutboxIdentity;
}

/**
 * Opens the pool and reads the outbox's role count and identity. The pool is handed to `opened` at once,
 * so the caller ends it also when a read fails (RF_OUTBOX_MISSING, RF_POSTGRES_UNAVAILABLE).
 */
export async function openDatabase(
  o: ResolvedRelayOptions,
  names: OutboxNames,
  opened: (pool: PgPool, leases: Leases) => void,
): Promise<RelayDatabase> {
  const pg = await loadPg();
  const pool = new pg.Pool({
    connectionString: o.databaseUrl,
    max: 12,
    connectionTimeoutMillis: 10_000,
    // pg_stat_activity names the relay (an application_name in the URL wins)
    application_name: `redfence-outbox ${o.relayId}`.slice(0, 63),
  });
  pool.on('error', () => undefined);
  const leases = new Leases(pool, names, o.relayId, o.leaseMs);
  opened(pool, leases);
  try {
    const roles = await leases.roleCount();
    const identity = await outboxIdentity(pool, names);
    return { pool, leases, roles, identity };
  } catch (err) {
    if (RedfenceError.is(err)) throw err;
    if (missingObject(err))
      throw new RedfenceError(
        'RF_OUTBOX_MISSING',
        `no outbox ${names.label} in ${maskUrl(o.databaseUrl)}: run redfence outbox init`,
        { cause: err },
      );
    throw new RedfenceError('RF_POSTGRES_UNAVAILABLE', `PostgreSQL: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/** A role's producer: idempotent (`role` undefined: at-least-once) or transactional for the role. */
export function connectProducer(
  o: ResolvedRelayOptions,
  role: number | undefined,
): Promise<DeliveryProducer> {
  return DeliveryProducer.connect(
    {
      ...o.clientProperties,
      partitioner: 'murmur2_random',
      'enable.idempotence': true,
      acks: -1,
      // a batch is handed over at once: waiting for more records only delays it
      'linger.ms': 1,
      'message.max.bytes': Math.max(1_000_000, o.maxMessageBytes + 65_536),
      ...(role === undefined
        ? {}
        : {
            'transactional.id': `${o.transactionalIdPrefix}-${role}`,
            'transaction.timeout.ms': o.transactionTimeoutMs,
            'socket.timeout.ms': Math.min(60_000, o.transactionTimeoutMs),
          }),
      ...o.producerConfig,
    },
    role === undefined ? undefined : o.transactionTimeoutMs,
  );
}
