/**
 * The relay's options: types, defaults, and their validation (every path named, unknown ones refused).
 * Of the options every runtime shares (src/runtime/options.ts) the relay takes `logger`, checked there
 * with the unknown keys; it has no consumer group, its `metrics` is a registry and its `kafka` the
 * security settings beside `brokers`.
 */
import type { Cluster, Redis } from 'ioredis';
import { RedfenceError } from '../errors/index.js';
import { commonProperties } from '../kafka/client-config.js';
import type { MetricsRegistry } from '../metrics/index.js';
import { checkKeys } from '../options/checks.js';
import { adapterSettings, type KafkaOptions, kafkaOptions } from '../runtime/kafka-options.js';
import { type RuntimeOptions, resolveRuntimeOptions } from '../runtime/options.js';
import { checkTopicTemplate, DEFAULT_TOPIC_TEMPLATE } from './routing.js';
import { type OutboxLocation, outboxNames } from './schema.js';
import type { RelayMode } from './worker.js';

/**
 * How the relay's Kafka clients connect: the processor's `kafka` security settings (docs/outbox.md):
 * `securityProtocol`, `sasl` (PLAIN, SCRAM or OAUTHBEARER), `ssl` (PEM text) and `config` (librdkafka
 * properties for every client of the relay; the ones the runtime owns are refused).
 */
export type RelayKafkaOptions = Pick<KafkaOptions, 'securityProtocol' | 'sasl' | 'ssl' | 'config'>;

export interface RelayOptions extends OutboxLocation, Pick<RuntimeOptions, 'logger'> {
  /** postgres://... of the database holding the outbox. */
  databaseUrl: string;
  /** Kafka bootstrap servers, host:port. */
  brokers: string[];
  /** Default `exactly-once`. */
  mode?: RelayMode;
  /** Default `outbox.event.${aggregatetype}` (`${type}` is replaced too). */
  topicTemplate?: string;
  /** Rows per batch and role. Default 1000. */
  batchSize?: number;
  /** Poll interval when no NOTIFY arrives (ms). Default 1000. */
  pollIntervalMs?: number;
  /** Role lease (ms); renewed every third. Default 10000. */
  leaseMs?: number;
  /** Attempts before a row that cannot be produced is parked. Default 5. */
  maxAttempts?: number;
  /** Largest record (key + value + headers) the relay produces; bigger rows are parked. Default 1000000. */
  maxMessageBytes?: number;
  /** Published rows older than this are deleted (ms); 0 keeps them. Default 86400000 (one day). */
  retentionMs?: number;
  /** Rows per retention DELETE. Default 1000. */
  retentionBatch?: number;
  /** This relay's id in the role table. Default random. */
  relayId?: string;
  /** Exactly-once: transactional ids are `<prefix>-<role>`. Default `redfence-outbox-<schema>.<table>`. */
  transactionalIdPrefix?: string;
  /** Exactly-once progress topic. Default `redfence-outbox-progress.<schema>.<table>`. */
  progressTopic?: string;
  /** Exactly-once: the broker aborts a dead relay's open transaction after this long (ms). Default 10000. */
  transactionTimeoutMs?: number;
  /**
   * Exactly-once: least time (ms) between the starts of two transactions of one role when the first was
   * not full: fewer, larger transactions under a trickle, for up to that much more lag. Default 50.
   */
  transactionIntervalMs?: number;
  /** Security and librdkafka properties of every Kafka client of the relay. */
  kafka?: RelayKafkaOptions;
  /** Extra librdkafka producer properties. */
  producerConfig?: Record<string, string | number | boolean>;
  /** Registry of the relay's metrics (docs/outbox.md). Default: a private one. */
  metrics?: MetricsRegistry;
  /**
   * A Redis to register the relay in (`rf:instances:<id>`, src/runtime/registry.ts), so `redfence
   * console` lists it; nothing else is kept there. Default: not registered.
   *
   * ```ts
   * new OutboxRelay({ databaseUrl, brokers, redis: new Redis(process.env.REDIS_URL) });
   * ```
   */
  redis?: Redis | Cluster;
}

export type ResolvedRelayOptions = Required<
  Omit<RelayOptions, 'metrics' | 'logger' | 'schema' | 'table' | 'kafka' | 'redis'>
> &
  Pick<RelayOptions, 'metrics' | 'logger' | 'schema' | 'table' | 'redis'> & {
    kafka: RelayKafkaOptions;
    /** librdkafka properties every client starts from: brokers, client id, security, `kafka.config`. */
    clientProperties: Record<string, unknown>;
  };

// Every option, checked by the compiler against the interface so the list cannot drift.
const SHARED: Record<'logger', true> = { logger: true };
const KNOWN: Record<Exclude<keyof RelayOptions, 'logger'>, true> = {
  databaseUrl: true,
  brokers: true,
  mode: true,
  topicTemplate: true,
  batchSize: true,
  pollIntervalMs: true,
  leaseMs: true,
  maxAttempts: true,
  maxMessageBytes: true,
  retentionMs: true,
  retentionBatch: true,
  relayId: true,
  transactionalIdPrefix: true,
  progressTopic: true,
  transactionTimeoutMs: true,
  transactionIntervalMs: true,
  kafka: true,
  producerConfig: true,
  metrics: true,
  redis: true,
  table: true,
  schema: true,
};

const fail = (m: string) => new RedfenceError('RF_INVALID_OPTIONS', m);

function int(o: RelayOptions, k: keyof RelayOptions, def: number, min: number, max: number): number {
  const v = o[k] ?? def;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max)
    throw fail(`relay.${k} must be an integer >= ${min} and <= ${max}, got ${JSON.stringify(v)}`);
  return v;
}

export function resolveRelayOptions(o: RelayOptions): ResolvedRelayOptions {
  const shared = resolveRuntimeOptions(o, { what: 'outbox relay', fields: SHARED, own: KNOWN });
  if (typeof o.databaseUrl !== 'string' || !/^postgres(ql)?:\/\//.test(o.databaseUrl))
    throw fail('relay.databaseUrl must be a postgres:// or postgresql:// URL');
  if (!Array.isArray(o.brokers) || o.brokers.length === 0 || o.brokers.some((b) => typeof b !== 'string'))
    throw fail('relay.brokers must list at least one host:port');
  const mode = o.mode ?? 'exactly-once';
  if (mode !== 'exactly-once' && mode !== 'at-least-once')
    throw fail(`relay.mode must be exactly-once or at-least-once, got ${JSON.stringify(mode)}`);
  const names = outboxNames(o);
  const leaseMs = int(o, 'leaseMs', 10_000, 300, 600_000);
  const kafka = relayKafka(o.brokers, o.kafka);
  const relayId = o.relayId ?? `relay-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  if (typeof relayId !== 'string' || !/^[A-Za-z0-9._-]{1,100}$/.test(relayId))
    throw fail('relay.relayId must be letters, digits, ".", "_" or "-" (at most 100)');
  const r: ResolvedRelayOptions = {
    databaseUrl: o.databaseUrl,
    brokers: [...o.brokers],
    mode,
    topicTemplate: checkTopicTemplate(o.topicTemplate ?? DEFAULT_TOPIC_TEMPLATE),
    batchSize: int(o, 'batchSize', 1000, 1, 5000),
    pollIntervalMs: int(o, 'pollIntervalMs', 1000, 10, 600_000),
    leaseMs,
    maxAttempts: int(o, 'maxAttempts', 5, 1, 1000),
    maxMessageBytes: int(o, 'maxMessageBytes', 1_000_000, 1024, 100_000_000),
    retentionMs: int(o, 'retentionMs', 86_400_000, 0, 3650 * 86_400_000),
    retentionBatch: int(o, 'retentionBatch', 1000, 1, 100_000),
    relayId,
    transactionalIdPrefix: o.transactionalIdPrefix ?? `redfence-outbox-${names.label}`,
    progressTopic: o.progressTopic ?? `redfence-outbox-progress.${names.label}`,
    transactionTimeoutMs: int(o, 'transactionTimeoutMs', 10_000, 1000, 900_000),
    transactionIntervalMs: int(o, 'transactionIntervalMs', 50, 0, 60_000),
    producerConfig: o.producerConfig ?? {},
    kafka,
    clientProperties: commonProperties({
      ...adapterSettings({ ...kafka, brokers: [...o.brokers] }, { clientId: 'redfence-outbox' }),
      groupId: '',
    }),
  };
  if (o.table !== undefined) r.table = o.table;
  if (o.schema !== undefined) r.schema = o.schema;
  if (o.metrics !== undefined) r.metrics = o.metrics;
  if (o.redis !== undefined) {
    if (typeof o.redis !== 'object' || o.redis === null || typeof o.redis.hset !== 'function')
      throw fail('relay.redis must be an ioredis Redis or Cluster client');
    r.redis = o.redis;
  }
  if (o.logger !== undefined) r.logger = shared.logger;
  return r;
}

const KAFKA_KEYS: Record<keyof RelayKafkaOptions, true> = {
  securityProtocol: true,
  sasl: true,
  ssl: true,
  config: true,
};

/** The `kafka` option, checked as the processor checks its own (errors name `kafka.<path>`). */
function relayKafka(brokers: readonly string[], v: unknown): RelayKafkaOptions {
  if (v === undefined) return {};
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw fail('relay.kafka must be an object { securityProtocol?, sasl?, ssl?, config? }');
  checkKeys('kafka', v as Record<string, unknown>, KAFKA_KEYS, 'outbox relay');
  const r = kafkaOptions({ ...(v as object), brokers: [...brokers] }, 'outbox relay');
  if (!('settings' in r)) throw fail('relay.kafka must be security settings, not a KafkaPort');
  const s = r.settings;
  return {
    ...(s.securityProtocol === undefined ? {} : { securityProtocol: s.securityProtocol }),
    ...(s.sasl === undefined ? {} : { sasl: s.sasl }),
    ...(s.ssl === undefined ? {} : { ssl: s.ssl }),
    ...(s.config === undefined ? {} : { config: s.config }),
  };
}
