/**
 * The `kafka` option of the processor: connection settings for the default adapter (brokers, group
 * settings, security, librdkafka pass-through) or any KafkaPort. Checked once, at construction, before
 * any connection; an error is RF_INVALID_OPTIONS naming the path (`kafka.sasl.password`), never a
 * secret's value.
 */
import {
  type ClientConfig,
  type ClientSettings,
  impliedProtocol,
  type OAuthBearerProvider,
  PASSWORD_MECHANISMS,
  passThrough,
  REFUSED,
  type SaslSettings,
  SECURITY_PROTOCOLS,
  type SecurityProtocol,
  type SecuritySettings,
  type SslSettings,
} from '../kafka/client-config.js';
import type { KafkaPort } from '../kafka/types.js';
import {
  checkKeys,
  integer,
  invalid,
  isObject,
  MAX_TIMER_MS,
  oneOf,
  shown,
  text,
  withMethods,
} from '../options/checks.js';

export type {
  ClientConfig,
  OAuthBearerProvider,
  OAuthBearerToken,
  SecurityProtocol,
} from '../kafka/client-config.js';

/** SASL: a user and password (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), or an OAUTHBEARER token provider. */
export type KafkaSasl = SaslSettings;
/** TLS: PEM text of the CA(s) that signed the brokers' certificates, and a client certificate + key (mTLS). */
export type KafkaSsl = SslSettings;

/** Connection settings for the default Kafka adapter (@confluentinc/kafka-javascript). */
export interface KafkaOptions {
  brokers: string[];
  /**
   * PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL. Default: SASL_SSL with `sasl` (with the system's CAs
   * unless `ssl.ca`: a hosted Kafka needs nothing more), SSL with `ssl` only, else PLAINTEXT.
   * SASL_PLAINTEXT (a password sent in clear) is never implied.
   */
  securityProtocol?: SecurityProtocol;
  /**
   * `{ mechanism: 'PLAIN' | 'SCRAM-SHA-256' | 'SCRAM-SHA-512', username, password }`, or
   * `{ mechanism: 'OAUTHBEARER', oauthBearerProvider: async () => ({ value, principal?, lifetime }) }`
   * (`lifetime`: the token's expiry in ms since the epoch; librdkafka calls the provider again before then).
   */
  sasl?: KafkaSasl;
  /** TLS settings: `ca`, `cert` + `key` (mutual TLS), `keyPassword` for an encrypted key; PEM text. */
  ssl?: KafkaSsl;
  /** 'classic' (cooperative-sticky, default) or 'consumer' (KIP-848). */
  groupProtocol?: 'classic' | 'consumer';
  /** Static membership (`group.instance.id`). */
  groupInstanceId?: string;
  /** Classic protocol only. Default 10000. */
  sessionTimeoutMs?: number;
  /** Most records per delivered batch. Default 500. */
  maxBatchSize?: number;
  /** Exactly-once: the broker aborts a dead instance's open transaction after this long. Default 10000. */
  transactionTimeoutMs?: number;
  /**
   * librdkafka properties for all three clients (consumer, producer, admin), passed through as given.
   * Properties the runtime owns or that have an option above are refused (docs/operations.md lists them).
   */
  config?: ClientConfig;
  /** Extra librdkafka properties for the consumer only (refused: as `config`). */
  consumerConfig?: ClientConfig;
  /** Extra librdkafka properties for the producer only (refused: as `config`). */
  producerConfig?: ClientConfig;
}

const KAFKA_NAMES: Record<keyof KafkaOptions, true> = {
  brokers: true,
  securityProtocol: true,
  sasl: true,
  ssl: true,
  groupProtocol: true,
  groupInstanceId: true,
  sessionTimeoutMs: true,
  maxBatchSize: true,
  transactionTimeoutMs: true,
  config: true,
  consumerConfig: true,
  producerConfig: true,
};
const SSL_NAMES: Record<keyof KafkaSsl, true> = { ca: true, cert: true, key: true, keyPassword: true };
// committedWithMetadata, deleteRecords, lowWatermarks, listTopics, resubscribe, positions, unwritableTopics and authorizedOperations are optional (a port of one's own written before them still works)
const PORT_METHODS: Record<
  Exclude<
    keyof KafkaPort,
    | 'committedWithMetadata'
    | 'deleteRecords'
    | 'lowWatermarks'
    | 'listTopics'
    | 'resubscribe'
    | 'positions'
    | 'unwritableTopics'
    | 'authorizedOperations'
  >,
  true
> = {
  start: true,
  produce: true,
  commit: true,
  produceTransactionally: true,
  committed: true,
  partitionCount: true,
  describeTopics: true,
  createTopics: true,
  highWatermarks: true,
  seek: true,
  pause: true,
  resume: true,
  stop: true,
};

/** A secret: a non-empty string, never shown. */
function secret(path: string, v: unknown): string {
  if (typeof v !== 'string' || v === '') throw invalid(`option "${path}" must be a non-empty string`);
  return v;
}

function pem(path: string, v: unknown, what: 'certificate' | 'private key'): string {
  const s = Buffer.isBuffer(v) ? v.toString('utf8') : v;
  const re = what === 'certificate' ? /-----BEGIN CERTIFICATE-----/ : /-----BEGIN [A-Z ]*PRIVATE KEY-----/;
  if (typeof s !== 'string' || !re.test(s))
    throw invalid(`option "${path}" must be PEM text of a ${what} (-----BEGIN ...), not a file name`);
  return s;
}

function saslOptions(v: unknown): KafkaSasl | undefined {
  if (v === undefined) return undefined;
  if (!isObject(v)) throw invalid(`option "kafka.sasl" must be an object, got ${shown(v)}`);
  const mechanisms = [...PASSWORD_MECHANISMS, 'OAUTHBEARER'] as const;
  if (!(mechanisms as readonly unknown[]).includes(v.mechanism))
    throw invalid(
      `option "kafka.sasl.mechanism" must be ${mechanisms.map((m) => `'${m}'`).join(', ')}, got ${shown(v.mechanism)}`,
    );
  if (v.mechanism === 'OAUTHBEARER') {
    checkKeys('kafka.sasl', v, { mechanism: true, oauthBearerProvider: true });
    if (typeof v.oauthBearerProvider !== 'function')
      throw invalid(
        'option "kafka.sasl.oauthBearerProvider" must be a function returning a promise of { value, principal?, lifetime } (OAUTHBEARER)',
      );
    return { mechanism: 'OAUTHBEARER', oauthBearerProvider: v.oauthBearerProvider as OAuthBearerProvider };
  }
  checkKeys('kafka.sasl', v, { mechanism: true, username: true, password: true });
  return {
    mechanism: v.mechanism as (typeof PASSWORD_MECHANISMS)[number],
    username: secret('kafka.sasl.username', v.username),
    password: secret('kafka.sasl.password', v.password),
  };
}

function sslOptions(v: unknown): KafkaSsl | undefined {
  if (v === undefined) return undefined;
  if (!isObject(v)) throw invalid(`option "kafka.ssl" must be an object { ca?, cert?, key?, keyPassword? }`);
  checkKeys('kafka.ssl', v, SSL_NAMES);
  const out: KafkaSsl = {};
  if (v.ca !== undefined) out.ca = pem('kafka.ssl.ca', v.ca, 'certificate');
  if ((v.cert === undefined) !== (v.key === undefined))
    throw invalid(
      `option "kafka.ssl.${v.cert === undefined ? 'key" needs "kafka.ssl.cert"' : 'cert" needs "kafka.ssl.key"'} (mutual TLS takes both)`,
    );
  if (v.cert !== undefined) {
    out.cert = pem('kafka.ssl.cert', v.cert, 'certificate');
    out.key = pem('kafka.ssl.key', v.key, 'private key');
  }
  if (v.keyPassword !== undefined) {
    if (out.key === undefined) throw invalid('option "kafka.ssl.keyPassword" needs "kafka.ssl.key"');
    out.keyPassword = secret('kafka.ssl.keyPassword', v.keyPassword);
  } else if (out.key !== undefined && /-----BEGIN ENCRYPTED PRIVATE KEY-----/.test(out.key))
    throw invalid('option "kafka.ssl.key" is an encrypted key: give its password as "kafka.ssl.keyPassword"');
  return out;
}

function securityOptions(v: Record<string, unknown>, settings: KafkaOptions): void {
  const sasl = saslOptions(v.sasl);
  const ssl = sslOptions(v.ssl);
  const protocol =
    v.securityProtocol === undefined
      ? impliedProtocol(sasl !== undefined, ssl !== undefined)
      : oneOf('kafka.securityProtocol', v.securityProtocol, SECURITY_PROTOCOLS, 'PLAINTEXT');
  const saslOn = protocol.startsWith('SASL_');
  const tlsOn = protocol.endsWith('SSL');
  if (saslOn && sasl === undefined)
    throw invalid(
      `option "kafka.securityProtocol" is ${protocol}: give "kafka.sasl" (mechanism and credentials)`,
    );
  if (!saslOn && sasl !== undefined)
    throw invalid(
      `option "kafka.sasl" needs a SASL protocol, and "kafka.securityProtocol" is ${protocol}: use ${tlsOn ? 'SASL_SSL' : 'SASL_PLAINTEXT or SASL_SSL'}`,
    );
  if (!tlsOn && ssl !== undefined)
    throw invalid(
      `option "kafka.ssl" needs TLS, and "kafka.securityProtocol" is ${protocol}: use ${saslOn ? 'SASL_SSL' : 'SSL or SASL_SSL'}`,
    );
  if (v.securityProtocol !== undefined || protocol !== 'PLAINTEXT') settings.securityProtocol = protocol;
  if (sasl !== undefined) settings.sasl = sasl;
  if (ssl !== undefined) settings.ssl = ssl;
}

/** Checks the `kafka` option (settings or a KafkaPort); shared with the handler's options (`what`). */
export function kafkaOptions(
  v: unknown,
  what = 'processor',
): { port: KafkaPort } | { settings: KafkaOptions } {
  if (!isObject(v)) throw invalid('option "kafka" must be connection settings ({ brokers }) or a KafkaPort');
  if (typeof v.start === 'function') {
    const port = withMethods<KafkaPort>('kafka', v, Object.keys(PORT_METHODS), 'a KafkaPort');
    return { port: port as KafkaPort };
  }
  checkKeys('kafka', v, KAFKA_NAMES, what);
  const brokers = v.brokers;
  if (
    !Array.isArray(brokers) ||
    brokers.length === 0 ||
    !brokers.every((b) => typeof b === 'string' && b !== '')
  )
    throw invalid('option "kafka.brokers" must list at least one host:port');
  const groupProtocol =
    v.groupProtocol === undefined
      ? undefined
      : oneOf('kafka.groupProtocol', v.groupProtocol, ['classic', 'consumer'], 'classic');
  const settings: KafkaOptions = { brokers: [...brokers] as string[] };
  securityOptions(v, settings);
  if (groupProtocol !== undefined) settings.groupProtocol = groupProtocol;
  const groupInstanceId = text('kafka.groupInstanceId', v.groupInstanceId);
  if (groupInstanceId !== undefined) settings.groupInstanceId = groupInstanceId;
  // librdkafka's ranges: session.timeout.ms 1..3600000, transaction.timeout.ms 1000..2^31-1
  if (v.sessionTimeoutMs !== undefined)
    settings.sessionTimeoutMs = integer('kafka.sessionTimeoutMs', v.sessionTimeoutMs, 1, 3_600_000, 0);
  if (v.maxBatchSize !== undefined)
    settings.maxBatchSize = integer('kafka.maxBatchSize', v.maxBatchSize, 1, 1_000_000, 0);
  if (v.transactionTimeoutMs !== undefined)
    settings.transactionTimeoutMs = integer(
      'kafka.transactionTimeoutMs',
      v.transactionTimeoutMs,
      1000,
      MAX_TIMER_MS,
      0,
    );
  for (const block of ['config', 'consumerConfig', 'producerConfig'] as const) {
    const c = passThrough(`kafka.${block}`, v[block], REFUSED);
    if (c !== undefined) settings[block] = c;
  }
  return { settings };
}

/**
 * The security fields of the settings as the adapter's client settings take them: one `security`
 * object (none when no protocol is set). Prefer `adapterSettings`, which resolves the whole option.
 */
export function clientSecurity(k: Pick<KafkaOptions, 'securityProtocol' | 'sasl' | 'ssl'>): {
  security?: SecuritySettings;
} {
  if (k.securityProtocol === undefined) return {};
  return {
    security: {
      protocol: k.securityProtocol,
      ...(k.sasl === undefined ? {} : { sasl: k.sasl }),
      ...(k.ssl === undefined ? {} : { ssl: k.ssl }),
    },
  };
}

/** What a runtime adds to the user's Kafka option: its client id and, exactly-once, its transactional id. */
export interface AdapterIds {
  clientId: string;
  transactionalId?: string;
}

/**
 * The one translation of the user's (checked) Kafka option into what the adapter takes, security
 * included (the adapter reads one `security` object; top-level `securityProtocol`, `sasl` and `ssl`
 * would be ignored, and the client would connect without them). Every runtime and CLI verb builds its
 * clients from this; the group id is the caller's (`{ ...adapterSettings(k, ids), groupId }`).
 */
export function adapterSettings(
  k: Partial<KafkaOptions> & Pick<KafkaOptions, 'brokers'>,
  ids: AdapterIds,
): Omit<ClientSettings, 'groupId'> & { maxBatchSize?: number } {
  return {
    brokers: [...k.brokers],
    clientId: ids.clientId,
    ...(ids.transactionalId === undefined ? {} : { transactionalId: ids.transactionalId }),
    ...(k.groupProtocol === undefined ? {} : { groupProtocol: k.groupProtocol }),
    ...(k.groupInstanceId === undefined ? {} : { groupInstanceId: k.groupInstanceId }),
    ...(k.sessionTimeoutMs === undefined ? {} : { sessionTimeoutMs: k.sessionTimeoutMs }),
    ...(k.maxBatchSize === undefined ? {} : { maxBatchSize: k.maxBatchSize }),
    ...(k.transactionTimeoutMs === undefined ? {} : { transactionTimeoutMs: k.transactionTimeoutMs }),
    ...clientSecurity(k),
    ...(k.config === undefined ? {} : { config: k.config }),
    ...(k.consumerConfig === undefined ? {} : { consumerConfig: k.consumerConfig }),
    ...(k.producerConfig === undefined ? {} : { producerConfig: k.producerConfig }),
  };
}
