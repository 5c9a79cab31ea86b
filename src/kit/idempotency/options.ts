/**
 * The idempotency store's options (checked by the store's constructor), its codec and result types, and
 * the request fingerprint of the Idempotency-Key draft.
 */
import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import type { KeyEncoding } from '../../keys/keys.js';
import type { MetricsRegistry } from '../../metrics/index.js';
import type { RedisPolicyOptions } from '../common/scripts.js';
import type { PgQueryable } from './pg-records.js';

export interface IdempotencyCodec<R> {
  encode(response: R): string;
  decode(text: string): R;
}

export interface IdempotencyStoreOptions<R> {
  redis: Redis | Cluster;
  /** A pg Pool (or anything with `query(text, values)`); the durable record. Optional: without it Redis alone decides. */
  pg?: PgQueryable;
  /** The PostgreSQL table (`name` or `schema.name`, lower case); needed with `pg`. Create it with `init()`. */
  table?: string;
  /** Names the store in keys and metrics: `[A-Za-z0-9_.-]{1,52}`. Default `'default'`. */
  name?: string;
  /** `[A-Za-z0-9_.-]{1,64}`: the tenant every key belongs to. */
  tenant: string;
  /** How long a stored response is replayed, in ms (then the key is new again). Required. */
  ttlMs: number;
  /** How long an unfinished claim holds its key, in ms; past it the key can be claimed again. Required. */
  inFlightTtlMs: number;
  /** Default JSON. */
  codec?: IdempotencyCodec<R>;
  keyEncoding?: KeyEncoding;
  redisPolicy?: RedisPolicyOptions;
  metrics?: { registry?: MetricsRegistry };
}

export interface IdempotencyResult<R> {
  status: 'done';
  response: R;
  /** true: the stored response of an earlier request (`fn` did not run). */
  replayed: boolean;
}

export const NAMES = [
  'redis',
  'pg',
  'table',
  'name',
  'tenant',
  'ttlMs',
  'inFlightTtlMs',
  'codec',
  'keyEncoding',
  'redisPolicy',
  'metrics',
] as const satisfies readonly (keyof IdempotencyStoreOptions<unknown>)[];

export const JSON_CODEC: IdempotencyCodec<unknown> = {
  encode: (v) => JSON.stringify(v) ?? 'null',
  decode: (t) => JSON.parse(t) as unknown,
};

/** The request fingerprint of the draft: SHA-256 (hex) of the method, the path and the body. */
export function fingerprint(method: string, path: string, body: string | Uint8Array = ''): string {
  return createHash('sha256')
    .update(method.toUpperCase())
    .update('\n')
    .update(path)
    .update('\n')
    .update(body)
    .digest('hex');
}

export const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');
