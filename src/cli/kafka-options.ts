/**
 * The Kafka security and pass-through options of `run` and what they resolve to: the security protocol
 * (`--kafka-security-protocol`), SASL/PLAIN or SCRAM (`--kafka-sasl-mechanism`, `--kafka-sasl-username`,
 * the password from REDFENCE_KAFKA_PASSWORD or `--kafka-sasl-password-file`: never a flag, which `ps`
 * would show), TLS (`--kafka-ca`, `--kafka-cert` + `--kafka-key` for mTLS, the key's password from
 * REDFENCE_KAFKA_KEY_PASSWORD or `--kafka-key-password-file`) and any librdkafka property
 * (`--kafka-config key=value`, repeatable; the runtime's own are refused, src/kafka/client-config.ts).
 * Everything, the files included, is read and checked here, before any connection; a failure is
 * RF_INVALID_OPTIONS naming the option. OAUTHBEARER needs code (a token provider): the library only.
 */

import { RedfenceError } from '../errors/index.js';
import {
  impliedProtocol,
  PASSWORD_MECHANISMS,
  REFUSED,
  SECURITY_PROTOCOLS,
  type SecurityProtocol,
} from '../kafka/client-config.js';
import type { KafkaOptions } from '../runtime/kafka-options.js';
import { choiceOption, pairsOption, textOption } from './options.js';
import { readText, secretOf } from './redis-options.js';

const file = (description: string, env: string) => textOption('<file>', { description, env });

/** The Kafka security options shared by `run` and `chaos`. */
export const KAFKA_OPTIONS = {
  'kafka-security-protocol': choiceOption(SECURITY_PROTOCOLS, {
    description:
      'how the clients reach the brokers (SASL_PLAINTEXT sends the password in clear: never implied)',
    env: 'REDFENCE_KAFKA_SECURITY_PROTOCOL',
    defaultText: 'SASL_SSL with --kafka-sasl-mechanism, SSL with --kafka-ca/--kafka-cert, else PLAINTEXT',
  }),
  'kafka-sasl-mechanism': choiceOption(PASSWORD_MECHANISMS, {
    description: 'SASL mechanism (OAUTHBEARER: through the library, with a token provider)',
    env: 'REDFENCE_KAFKA_SASL_MECHANISM',
  }),
  'kafka-sasl-username': textOption('<name>', {
    description: 'SASL user',
    env: 'REDFENCE_KAFKA_USERNAME',
    allowed: 'a user name (no spaces or commas)',
    pattern: /^[^\s,]+$/,
  }),
  'kafka-sasl-password-file': file(
    "a file holding the SASL user's password (or the password itself in REDFENCE_KAFKA_PASSWORD)",
    'REDFENCE_KAFKA_PASSWORD_FILE',
  ),
  'kafka-ca': file(
    "PEM file of the CA(s) that signed the brokers' certificates (default: the system's)",
    'REDFENCE_KAFKA_CA',
  ),
  'kafka-cert': file('PEM client certificate for mutual TLS (with --kafka-key)', 'REDFENCE_KAFKA_CERT'),
  'kafka-key': file('PEM private key of --kafka-cert, plain or encrypted', 'REDFENCE_KAFKA_KEY'),
  'kafka-key-password-file': file(
    'a file holding the password of an encrypted --kafka-key (or the password itself in REDFENCE_KAFKA_KEY_PASSWORD)',
    'REDFENCE_KAFKA_KEY_PASSWORD_FILE',
  ),
  'kafka-config': pairsOption('<key=value>', {
    description:
      'a librdkafka property for all three clients, repeatable (environment: one a line); the ones the runtime owns are refused (docs/operations.md)',
    env: 'REDFENCE_KAFKA_CONFIG',
    key: /^[a-z][a-z0-9._-]*$/,
  }),
};

export type KafkaValues = {
  'kafka-security-protocol': SecurityProtocol | undefined;
  'kafka-sasl-mechanism': (typeof PASSWORD_MECHANISMS)[number] | undefined;
  'kafka-sasl-username': string | undefined;
  'kafka-sasl-password-file': string | undefined;
  'kafka-ca': string | undefined;
  'kafka-cert': string | undefined;
  'kafka-key': string | undefined;
  'kafka-key-password-file': string | undefined;
  'kafka-config': Record<string, string> | undefined;
};

/** What the options add to the processor's `kafka` settings. */
export type KafkaSecurity = Pick<KafkaOptions, 'securityProtocol' | 'sasl' | 'ssl' | 'config'>;

const invalid = (message: string) => new RedfenceError('RF_INVALID_OPTIONS', message);
const CERT = /-----BEGIN CERTIFICATE-----/;
const KEY = /-----BEGIN [A-Z ]*PRIVATE KEY-----/;

/**
 * Resolves the Kafka options, reading the CA, certificate, key and password files. Throws
 * RF_INVALID_OPTIONS naming the option for every contradiction, refused property or unreadable file.
 */
export function kafkaSecurity(v: KafkaValues, env: NodeJS.ProcessEnv = process.env): KafkaSecurity {
  const out: KafkaSecurity = {};
  const config = v['kafka-config'];
  if (config !== undefined) {
    for (const key of Object.keys(config))
      if (Object.hasOwn(REFUSED, key))
        throw invalid(`--kafka-config may not set "${key}": ${REFUSED[key]} (see docs/operations.md)`);
    out.config = { ...config };
  }
  const mechanism = v['kafka-sasl-mechanism'];
  const password = secretOf(
    'kafka-sasl-password-file',
    'REDFENCE_KAFKA_PASSWORD',
    v['kafka-sasl-password-file'],
    env,
  );
  const username = v['kafka-sasl-username'];
  if (mechanism === undefined && (username !== undefined || password !== undefined))
    throw invalid(
      `${username !== undefined ? '--kafka-sasl-username' : 'a SASL password (REDFENCE_KAFKA_PASSWORD or --kafka-sasl-password-file)'} needs --kafka-sasl-mechanism PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512`,
    );
  if (mechanism !== undefined && (username === undefined || password === undefined))
    throw invalid(
      `--kafka-sasl-mechanism ${mechanism} needs ${username === undefined ? '--kafka-sasl-username <name>' : 'a password: REDFENCE_KAFKA_PASSWORD or --kafka-sasl-password-file <file>'}`,
    );
  if ((v['kafka-cert'] === undefined) !== (v['kafka-key'] === undefined))
    throw invalid(
      `--${v['kafka-cert'] === undefined ? 'kafka-key needs --kafka-cert' : 'kafka-cert needs --kafka-key'} (mutual TLS takes both)`,
    );
  const tlsGiven = v['kafka-ca'] !== undefined || v['kafka-cert'] !== undefined;
  const protocol = v['kafka-security-protocol'] ?? impliedProtocol(mechanism !== undefined, tlsGiven);
  if (protocol.startsWith('SASL_') && mechanism === undefined)
    throw invalid(
      `--kafka-security-protocol ${protocol} needs --kafka-sasl-mechanism, --kafka-sasl-username and a password`,
    );
  if (!protocol.startsWith('SASL_') && mechanism !== undefined)
    throw invalid(
      `--kafka-sasl-mechanism needs a SASL protocol, and --kafka-security-protocol is ${protocol}: use SASL_SSL${protocol === 'PLAINTEXT' ? ' or SASL_PLAINTEXT' : ''}`,
    );
  if (!protocol.endsWith('SSL') && (tlsGiven || v['kafka-key-password-file'] !== undefined))
    throw invalid(
      `--kafka-ca, --kafka-cert and --kafka-key need TLS, and --kafka-security-protocol is ${protocol}: use ${protocol === 'SASL_PLAINTEXT' ? 'SASL_SSL' : 'SSL or SASL_SSL'}`,
    );
  if (v['kafka-security-protocol'] !== undefined || protocol !== 'PLAINTEXT') out.securityProtocol = protocol;
  if (mechanism !== undefined)
    out.sasl = { mechanism, username: username as string, password: password as string };

  const keyPassword = secretOf(
    'kafka-key-password-file',
    'REDFENCE_KAFKA_KEY_PASSWORD',
    v['kafka-key-password-file'],
    env,
  );
  if (keyPassword !== undefined && v['kafka-key'] === undefined)
    throw invalid(
      'the key password (REDFENCE_KAFKA_KEY_PASSWORD or --kafka-key-password-file) needs --kafka-key',
    );
  if (tlsGiven) {
    const ssl: NonNullable<KafkaSecurity['ssl']> = {};
    if (v['kafka-ca'] !== undefined) ssl.ca = readText('kafka-ca', v['kafka-ca'], 'certificate', CERT);
    if (v['kafka-cert'] !== undefined) {
      ssl.cert = readText('kafka-cert', v['kafka-cert'], 'certificate', CERT);
      ssl.key = readText('kafka-key', v['kafka-key'] as string, 'private key', KEY);
      if (/-----BEGIN ENCRYPTED PRIVATE KEY-----/.test(ssl.key) && keyPassword === undefined)
        throw invalid(
          `--kafka-key ${v['kafka-key']}: an encrypted key; give its password in REDFENCE_KAFKA_KEY_PASSWORD or --kafka-key-password-file`,
        );
      if (keyPassword !== undefined) ssl.keyPassword = keyPassword;
    }
    out.ssl = ssl;
  }
  return out;
}
