/**
 * How the Kafka adapter's security settings and pass-through properties become librdkafka properties,
 * the same for its three clients (consumer, producer, admin): the security protocol, SASL (PLAIN,
 * SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER through a token callback), TLS (CA, client certificate and
 * key, the key's password), and `kafka.config` (any librdkafka property but the ones the runtime owns,
 * REFUSED below). Also what librdkafka's refusals and connection failures mean: a property it does not
 * know becomes RF_INVALID_OPTIONS naming the key; a refused password, an untrusted certificate or a
 * listener of another protocol becomes RF_KAFKA_AUTH. Pure (no client is loaded here), so the CLI can
 * check its options with it before loading the runtime.
 */
import { RedfenceError } from '../errors/index.js';

/** librdkafka properties: every value a string, a finite number or a boolean. */
export type ClientConfig = Record<string, string | number | boolean>;

export const SECURITY_PROTOCOLS = ['PLAINTEXT', 'SSL', 'SASL_PLAINTEXT', 'SASL_SSL'] as const;
export type SecurityProtocol = (typeof SECURITY_PROTOCOLS)[number];
export const PASSWORD_MECHANISMS = ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512'] as const;
export type PasswordMechanism = (typeof PASSWORD_MECHANISMS)[number];

/** An OAUTHBEARER token: `lifetime` is when it expires, in milliseconds since the epoch. */
export interface OAuthBearerToken {
  value: string;
  /** Default: empty (the broker takes the principal from the token). */
  principal?: string;
  lifetime: number;
  /** SASL extensions sent with the token. */
  extensions?: Record<string, string>;
}
export type OAuthBearerProvider = () => Promise<OAuthBearerToken>;

export type SaslSettings =
  | { mechanism: PasswordMechanism; username: string; password: string }
  | { mechanism: 'OAUTHBEARER'; oauthBearerProvider: OAuthBearerProvider };

/** TLS settings, PEM text (not file names): `key` may be encrypted, with `keyPassword`. */
export interface SslSettings {
  ca?: string;
  cert?: string;
  key?: string;
  keyPassword?: string;
}

export interface SecuritySettings {
  protocol: SecurityProtocol;
  sasl?: SaslSettings;
  ssl?: SslSettings;
}

/**
 * Properties `kafka.config` (and `--kafka-config`) may not set, and why: the runtime sets them for its
 * guarantees, an option of its own sets them, or they carry a secret that has a dedicated option (whose
 * value is kept out of every message). docs/operations.md lists the same table.
 */
export const REFUSED: Readonly<Record<string, string>> = {
  'bootstrap.servers': 'use kafka.brokers (--brokers)',
  'metadata.broker.list': 'use kafka.brokers (--brokers)',
  'group.id': 'use the groupId option (--group)',
  'group.instance.id': 'use kafka.groupInstanceId (--static with --instance)',
  'group.protocol': 'use kafka.groupProtocol (--group-protocol)',
  'session.timeout.ms': 'use kafka.sessionTimeoutMs (--session-timeout)',
  'js.consumer.max.batch.size': 'use kafka.maxBatchSize (--max-batch-size)',
  'transaction.timeout.ms': 'use kafka.transactionTimeoutMs (--transaction-timeout)',
  'enable.auto.commit': 'offsets are committed only after the outputs are produced',
  'enable.auto.offset.store': 'offsets are committed only after the outputs are produced',
  'isolation.level': 'read_committed keeps aborted input records out of the state',
  'auto.offset.reset': 'a group without committed offsets starts at the earliest record, so none is skipped',
  'partition.assignment.strategy':
    'the adapter serves rebalances incrementally (cooperative-sticky, or the consumer protocol)',
  partitioner: 'outputs are placed by murmur2, co-partitioned with the input',
  'enable.idempotence': 'the idempotent producer keeps retried outputs single',
  acks: 'outputs must be on every in-sync replica before offsets are committed',
  'request.required.acks': 'outputs must be on every in-sync replica before offsets are committed',
  'transactional.id': 'exactly-once sets one per instance (groupId and instanceId)',
  rebalance_cb: 'the adapter serves rebalances itself',
  offset_commit_cb: 'the adapter confirms commits itself',
  dr_cb: 'the adapter tracks deliveries itself',
  dr_msg_cb: 'the adapter tracks deliveries itself',
  'delivery.report.only.error': 'the adapter tracks deliveries itself (it hears failed records only)',
  oauthbearer_token_refresh_cb: 'use kafka.sasl.oauthBearerProvider',
  'security.protocol': 'use kafka.securityProtocol (--kafka-security-protocol)',
  'sasl.mechanism': 'use kafka.sasl.mechanism (--kafka-sasl-mechanism)',
  'sasl.mechanisms': 'use kafka.sasl.mechanism (--kafka-sasl-mechanism)',
  'sasl.username': 'use kafka.sasl.username (--kafka-sasl-username)',
  'sasl.password': 'use kafka.sasl.password (--kafka-sasl-password-file or REDFENCE_KAFKA_PASSWORD)',
  'ssl.ca.pem': 'use kafka.ssl.ca (--kafka-ca)',
  'ssl.ca.location': 'use kafka.ssl.ca (--kafka-ca)',
  'ssl.certificate.pem': 'use kafka.ssl.cert (--kafka-cert)',
  'ssl.certificate.location': 'use kafka.ssl.cert (--kafka-cert)',
  'ssl.key.pem': 'use kafka.ssl.key (--kafka-key)',
  'ssl.key.location': 'use kafka.ssl.key (--kafka-key)',
  'ssl.key.password': 'use kafka.ssl.keyPassword (--kafka-key-password-file)',
};

const invalid = (message: string) => new RedfenceError('RF_INVALID_OPTIONS', message);

/**
 * Checks a block of librdkafka properties: an object, no refused key, every value a string, a finite
 * number or a boolean. Values are never shown (they may be credentials, e.g. sasl.oauthbearer.client.secret).
 */
export function passThrough(
  path: string,
  v: unknown,
  refused: Readonly<Record<string, string>> = REFUSED,
): ClientConfig | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw invalid(`option "${path}" must be an object of librdkafka properties`);
  const out: ClientConfig = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    if (Object.hasOwn(refused, k))
      throw invalid(`option "${path}" may not set "${k}": ${refused[k]} (see docs/operations.md)`);
    if (typeof x !== 'string' && typeof x !== 'boolean' && !(typeof x === 'number' && Number.isFinite(x)))
      throw invalid(
        `option "${path}.${k}" must be a string, a finite number or a boolean, got a ${typeof x}`,
      );
    out[k] = x;
  }
  return out;
}

/**
 * The protocol a security setting implies when none is named: SASL_SSL with `sasl` (a password is never
 * sent in clear unless SASL_PLAINTEXT is asked for), SSL with `ssl` only, else PLAINTEXT.
 */
export function impliedProtocol(sasl: boolean, ssl: boolean): SecurityProtocol {
  return sasl ? 'SASL_SSL' : ssl ? 'SSL' : 'PLAINTEXT';
}

/** The token librdkafka's callback wants, from the provider's; a bad token is an error naming the field. */
export function librdkafkaToken(t: unknown): {
  tokenValue: string;
  lifetime: number;
  principal: string;
  extensions?: Record<string, string>;
} {
  const o = (typeof t === 'object' && t !== null ? t : {}) as Record<string, unknown>;
  if (typeof o.value !== 'string' || o.value === '')
    throw new Error('the oauthBearerProvider returned no token "value" (a non-empty string)');
  if (typeof o.lifetime !== 'number' || !Number.isFinite(o.lifetime))
    throw new Error('the oauthBearerProvider returned no "lifetime" (expiry, ms since the epoch)');
  if (o.principal !== undefined && typeof o.principal !== 'string')
    throw new Error('the oauthBearerProvider returned a "principal" that is not a string');
  const token = { tokenValue: o.value, lifetime: o.lifetime, principal: (o.principal as string) ?? '' };
  return o.extensions === undefined
    ? token
    : { ...token, extensions: o.extensions as Record<string, string> };
}

/** The librdkafka properties of the security settings (the OAUTHBEARER callback included). */
export function securityProperties(s: SecuritySettings | undefined): Record<string, unknown> {
  if (s === undefined) return {};
  const out: Record<string, unknown> = { 'security.protocol': s.protocol.toLowerCase() };
  const sasl = s.sasl;
  if (sasl !== undefined) {
    out['sasl.mechanism'] = sasl.mechanism;
    if (sasl.mechanism === 'OAUTHBEARER') {
      const provider = sasl.oauthBearerProvider;
      out.oauthbearer_token_refresh_cb = async () => librdkafkaToken(await provider());
    } else {
      out['sasl.username'] = sasl.username;
      out['sasl.password'] = sasl.password;
    }
  }
  const ssl = s.ssl;
  if (ssl !== undefined) {
    if (ssl.ca !== undefined) out['ssl.ca.pem'] = ssl.ca;
    if (ssl.cert !== undefined) out['ssl.certificate.pem'] = ssl.cert;
    if (ssl.key !== undefined) out['ssl.key.pem'] = ssl.key;
    if (ssl.keyPassword !== undefined) out['ssl.key.password'] = ssl.keyPassword;
  }
  return out;
}

/** Why a client cannot connect as configured, from one of librdkafka's log or error lines. */
export interface AuthFailure {
  readonly kind: 'sasl' | 'tls' | 'protocol' | 'token';
  /** librdkafka's words, without the thread prefix (no secret: librdkafka never logs one). */
  readonly detail: string;
}

const FAILURES: ReadonlyArray<[RegExp, AuthFailure['kind']]> = [
  [/SASL authentication error|SASL handshake failed|Authentication failed|authentication failure/i, 'sasl'],
  [/Failed to acquire SASL OAUTHBEARER token|oauthbearer_token_refresh_cb/i, 'token'],
  [
    /SSL handshake failed|certificate verify failed|alert bad certificate|alert unknown ca|alert certificate required|alert handshake failure|ssl error|wrong version number|packet length too long/i,
    'tls',
  ],
  [/incorrect security\.protocol|Unsupported SASL mechanism|No supported SASL mechanisms/i, 'protocol'],
];

/** Classifies a librdkafka line; undefined for anything else (a broker down is not an auth failure). */
export function authFailure(text: string): AuthFailure | undefined {
  for (const [re, kind] of FAILURES) {
    if (re.test(text)) return { kind, detail: text.replace(/^\[thrd:[^\]]*\]:\s*/, '').trim() };
  }
  return undefined;
}

const HINT: Record<AuthFailure['kind'], string> = {
  sasl: 'check the SASL mechanism, user and password (--kafka-sasl-mechanism, --kafka-sasl-username, --kafka-sasl-password-file / REDFENCE_KAFKA_PASSWORD)',
  token: 'the OAUTHBEARER token could not be had or was refused: check kafka.sasl.oauthBearerProvider',
  tls: "the TLS handshake failed: check that --kafka-ca signed the broker's certificate, and the client certificate and key (--kafka-cert, --kafka-key) when the broker requires one",
  protocol:
    'the broker speaks another protocol on that port, or not this SASL mechanism: check --kafka-security-protocol and --kafka-sasl-mechanism',
};

/** RF_KAFKA_AUTH for a classified failure of one client. */
export function authError(client: string, f: AuthFailure): RedfenceError {
  return new RedfenceError(
    'RF_KAFKA_AUTH',
    `Kafka ${client} cannot connect as configured: ${f.detail}; ${HINT[f.kind]}`,
  );
}

/**
 * A line of librdkafka's that says why the brokers cannot be reached (refused, not resolved, timed
 * out), without the thread prefix; undefined for anything else.
 */
export function transportFailure(text: string): string | undefined {
  const detail = text.replace(/^\[thrd:[^\]]*\]:\s*/, '').trim();
  const m =
    /(Connect to \S+ failed: .*|Failed to resolve .*|Connection (?:refused|timed out|reset).*)$/i.exec(
      detail,
    );
  return m?.[1]?.replace(
    /\s*\((?:after \d+ms in state \w+)(?:, \d+ identical error\(s\) suppressed)?\)$/,
    '',
  );
}

/** librdkafka's words for a request or connect that got no answer: a timeout or a transport failure. */
export function isUnreachable(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  // ERR__TIMED_OUT -185, ERR__TRANSPORT -195, ERR__ALL_BROKERS_DOWN -187, ERR__RESOLVE -193
  if (code === -185 || code === -195 || code === -187 || code === -193) return true;
  const m = err instanceof Error ? err.message : String(err);
  return /^(?:Local: )?(?:Timed out|Broker transport failure|All broker connections are down|Host resolution failure)/i.test(
    m,
  );
}

/**
 * RF_KAFKA_UNAVAILABLE for a client whose brokers did not answer: the brokers named, the cause (the
 * last connect failure librdkafka logged, else its error), and the options to check.
 */
export function unavailableError(
  brokers: string,
  client: string,
  err: unknown,
  lastFailure?: string,
): RedfenceError {
  const cause = lastFailure ?? (err instanceof Error ? err.message : String(err));
  return new RedfenceError(
    'RF_KAFKA_UNAVAILABLE',
    `Kafka at ${brokers} did not answer the ${client} (${cause}); check --brokers / KAFKA_BROKERS (kafka.brokers) and that the brokers are up and reachable`,
    { cause: err, details: { brokers } },
  );
}

/**
 * librdkafka's refusal of a property at client creation as RF_INVALID_OPTIONS naming the key (its value
 * never shown), or undefined when the error is something else.
 */
export function configError(err: unknown, client: string): RedfenceError | undefined {
  const m = err instanceof Error ? err.message : String(err);
  const key = /configuration property "([^"]+)"/.exec(m)?.[1] ?? /property:? "([^"]+)"/.exec(m)?.[1];
  if (key === undefined) return undefined;
  const why = /No such configuration property/.test(m)
    ? 'librdkafka knows no such property'
    : /not supported in this build/.test(m)
      ? 'this build of librdkafka does not support it'
      : /Invalid value/.test(m)
        ? 'librdkafka refuses its value (or the value of a property it is an alias of)'
        : 'librdkafka refuses it';
  return invalid(`Kafka ${client} configuration: "${key}": ${why}`);
}

/** What the adapter's clients are built from (src/kafka/confluent.ts ConfluentOptions). */
export interface ClientSettings {
  brokers: string[];
  groupId: string;
  clientId?: string;
  transactionalId?: string;
  transactionTimeoutMs?: number;
  groupProtocol?: 'classic' | 'consumer';
  groupInstanceId?: string;
  sessionTimeoutMs?: number;
  security?: SecuritySettings;
  config?: ClientConfig;
  consumerConfig?: ClientConfig;
  producerConfig?: ClientConfig;
}

/** What all three clients share: brokers, client id, `config`, security (which `config` cannot override). */
export function commonProperties(o: ClientSettings): Record<string, unknown> {
  return {
    'bootstrap.servers': o.brokers.join(','),
    'client.id': o.clientId ?? 'redfence',
    ...o.config,
    ...securityProperties(o.security),
  };
}

/** The producer's properties: idempotent, acks=all, murmur2; transactional with a transactional id. */
export function producerProperties(o: ClientSettings): Record<string, unknown> {
  const txn = o.transactionTimeoutMs ?? 10_000;
  return {
    ...commonProperties(o),
    'linger.ms': 5,
    // librdkafka requires socket.timeout.ms <= transaction.timeout.ms + 100
    ...(o.transactionalId ? { 'socket.timeout.ms': Math.min(60_000, txn) } : {}),
    ...o.config,
    ...o.producerConfig,
    ...securityProperties(o.security),
    partitioner: 'murmur2_random',
    'enable.idempotence': true,
    acks: -1,
    ...(o.transactionalId ? { 'transactional.id': o.transactionalId, 'transaction.timeout.ms': txn } : {}),
  };
}

/** The consumer's properties: no auto-commit, read_committed, cooperative-sticky or KIP-848. */
export function consumerProperties(o: ClientSettings): Record<string, unknown> {
  const session = o.sessionTimeoutMs ?? 10_000;
  return {
    ...commonProperties(o),
    // Prefetch bounded by bytes (16 MiB, not librdkafka's 64 MiB), so the memory of an instance
    // started on a long backlog stays bounded (docs/benchmarks.md, peak RSS); by count, librdkafka's
    // 100,000 per partition: a prefetch of a few batches left each consume call waiting for a fetch
    // round trip (a third of the exactly-once run's time at 1,000 per partition).
    'queued.min.messages': 100_000,
    'queued.max.messages.kbytes': 16_384,
    ...((o.groupProtocol ?? 'classic') === 'classic'
      ? { 'heartbeat.interval.ms': Math.max(500, Math.floor(session / 5)) }
      : {}),
    ...o.config,
    ...o.consumerConfig,
    ...securityProperties(o.security),
    'group.id': o.groupId,
    'enable.auto.commit': false,
    'enable.auto.offset.store': false,
    'isolation.level': 'read_committed',
    ...((o.groupProtocol ?? 'classic') === 'consumer'
      ? { 'group.protocol': 'consumer' }
      : { 'partition.assignment.strategy': 'cooperative-sticky', 'session.timeout.ms': session }),
    ...(o.groupInstanceId ? { 'group.instance.id': o.groupInstanceId } : {}),
  };
}
