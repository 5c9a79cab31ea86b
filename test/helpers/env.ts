/**
 * Where the tests find real services. Defaults are the ports `dev/up` starts; the same variables
 * point the tests at a user's own services.
 */
import { randomBytes } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';

export const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:16379';
export const REDIS_CLUSTER_NODES = (
  process.env.REDIS_CLUSTER_NODES ||
  '127.0.0.1:17001,127.0.0.1:17002,127.0.0.1:17003,127.0.0.1:17004,127.0.0.1:17005,127.0.0.1:17006'
)
  .split(',')
  .map((hp) => {
    const [host, port] = hp.trim().split(':');
    return { host: host || '127.0.0.1', port: Number(port) };
  });
export const KAFKA_BROKERS = process.env.KAFKA_BROKERS || '127.0.0.1:19092';
export const DATABASE_URL = process.env.DATABASE_URL || 'postgres://postgres@127.0.0.1:15432/redfence_test';

/** A short random name for one test's namespace (topic, group, store). */
export function uniqueName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
}

/** A standalone Redis client; the caller disconnects it (register `after`/`t.after` next to creation). */
export function standalone(): Redis {
  return new Redis(REDIS_URL, { enableAutoPipelining: true, maxRetriesPerRequest: 2 });
}

/** A Redis Cluster client over the test cluster. */
export function cluster(): Cluster {
  return new Cluster(REDIS_CLUSTER_NODES, {
    enableAutoPipelining: true,
    redisOptions: { maxRetriesPerRequest: 2 },
  });
}
