/**
 * What a refused record's error code means for its row (docs/outbox.md, "Poison rows and parking"):
 * - `retriable`: not the record's fault (a broker away, a leader moving, a timeout, an aborted
 *   transaction's purged records, a producer fenced or bumping its epoch): the row counts nothing and is
 *   tried again;
 * - `permanent`: the broker refuses this record for itself (too large, a topic that is not valid, does not
 *   exist or may not be written, an invalid record or timestamp, a policy): the row counts an attempt;
 * - `unknown`: any other code. It counts an attempt too, so a code the relay does not know parks its row
 *   after `maxAttempts` instead of holding its aggregate for ever; `redfence outbox retry` puts it back.
 * Only errors about a record (a delivery report's, or librdkafka refusing the record when handed over)
 * are classified; a transaction's own failure (begin, commit) is never a row's fault.
 */

export type ProduceErrorClass = 'retriable' | 'permanent' | 'unknown';

/** librdkafka's (negative) and Kafka's error codes that say nothing about the record itself. */
const RETRIABLE: Readonly<Record<number, string>> = {
  [-197]: 'DESTROY',
  [-195]: 'TRANSPORT',
  [-193]: 'RESOLVE',
  [-192]: 'MSG_TIMED_OUT',
  [-187]: 'ALL_BROKERS_DOWN',
  [-185]: 'TIMED_OUT',
  [-184]: 'QUEUE_FULL',
  [-183]: 'ISR_INSUFF',
  [-182]: 'NODE_UPDATE',
  [-180]: 'WAIT_COORD',
  [-178]: 'IN_PROGRESS',
  [-177]: 'PREV_IN_PROGRESS',
  [-172]: 'STATE',
  [-166]: 'TIMED_OUT_QUEUE',
  [-164]: 'WAIT_CACHE',
  [-163]: 'INTR',
  [-153]: 'RETRY',
  [-152]: 'PURGE_QUEUE',
  [-151]: 'PURGE_INFLIGHT',
  [-150]: 'FATAL',
  [-149]: 'INCONSISTENT',
  [-148]: 'GAPLESS_GUARANTEE',
  [-146]: 'UNKNOWN_BROKER',
  [-144]: 'FENCED',
  [-137]: 'DESTROY_BROKER',
  5: 'LEADER_NOT_AVAILABLE',
  6: 'NOT_LEADER_OR_FOLLOWER',
  7: 'REQUEST_TIMED_OUT',
  8: 'BROKER_NOT_AVAILABLE',
  9: 'REPLICA_NOT_AVAILABLE',
  13: 'NETWORK_EXCEPTION',
  14: 'COORDINATOR_LOAD_IN_PROGRESS',
  15: 'COORDINATOR_NOT_AVAILABLE',
  16: 'NOT_COORDINATOR',
  19: 'NOT_ENOUGH_REPLICAS',
  20: 'NOT_ENOUGH_REPLICAS_AFTER_APPEND',
  45: 'OUT_OF_ORDER_SEQUENCE_NUMBER',
  46: 'DUPLICATE_SEQUENCE_NUMBER',
  47: 'INVALID_PRODUCER_EPOCH',
  48: 'INVALID_TXN_STATE',
  49: 'INVALID_PRODUCER_ID_MAPPING',
  51: 'CONCURRENT_TRANSACTIONS',
  52: 'TRANSACTION_COORDINATOR_FENCED',
  56: 'KAFKA_STORAGE_ERROR',
  59: 'UNKNOWN_PRODUCER_ID',
  74: 'FENCED_LEADER_EPOCH',
  75: 'UNKNOWN_LEADER_EPOCH',
  89: 'THROTTLING_QUOTA_EXCEEDED',
  90: 'PRODUCER_FENCED',
  129: 'REBOOTSTRAP_REQUIRED',
};

/** Codes that refuse one record for itself. */
const PERMANENT: Readonly<Record<number, string>> = {
  [-199]: 'BAD_MSG',
  [-190]: 'UNKNOWN_PARTITION',
  [-188]: 'UNKNOWN_TOPIC',
  [-186]: 'INVALID_ARG',
  [-162]: 'KEY_SERIALIZATION',
  [-161]: 'VALUE_SERIALIZATION',
  2: 'CORRUPT_MESSAGE',
  3: 'UNKNOWN_TOPIC_OR_PARTITION',
  4: 'INVALID_MSG_SIZE',
  10: 'MESSAGE_TOO_LARGE',
  17: 'INVALID_TOPIC_EXCEPTION',
  18: 'RECORD_LIST_TOO_LARGE',
  21: 'INVALID_REQUIRED_ACKS',
  29: 'TOPIC_AUTHORIZATION_FAILED',
  32: 'INVALID_TIMESTAMP',
  43: 'UNSUPPORTED_FOR_MESSAGE_FORMAT',
  44: 'POLICY_VIOLATION',
  76: 'UNSUPPORTED_COMPRESSION_TYPE',
  87: 'INVALID_RECORD',
  100: 'UNKNOWN_TOPIC_ID',
};

export function classifyCode(code: number): ProduceErrorClass {
  if (Object.hasOwn(RETRIABLE, code)) return 'retriable';
  if (Object.hasOwn(PERMANENT, code)) return 'permanent';
  return 'unknown';
}

/** The code's name, for `last_error` (`code 42` when the relay does not know it). */
export function codeName(code: number): string {
  return RETRIABLE[code] ?? PERMANENT[code] ?? `code ${code}`;
}

/** The first numeric librdkafka/Kafka `code` on the error or its causes. */
export function errorCode(err: unknown): number | undefined {
  for (
    let e = err, i = 0;
    e !== undefined && e !== null && i < 5;
    e = (e as { cause?: unknown }).cause, i++
  ) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'number' && Number.isInteger(code)) return code;
  }
  return undefined;
}

/** A record the broker (or librdkafka) refused, with its code: the rows' business, unlike a transaction's failure. */
export class RecordRefusal extends Error {
  readonly code: number;
  constructor(message: string, code: number, cause: unknown) {
    super(message, { cause });
    this.name = 'RecordRefusal';
    this.code = code;
  }

  get kind(): ProduceErrorClass {
    return classifyCode(this.code);
  }
}

/** A record-level error as a RecordRefusal (undefined: no librdkafka code on it). */
export function refusalOf(err: unknown): RecordRefusal | undefined {
  if (err === undefined) return undefined;
  if (err instanceof RecordRefusal) return err;
  const code = errorCode(err);
  return code === undefined ? undefined : new RecordRefusal(errorText(err), code, err);
}

/** The error's message without anything after a newline (never record contents: librdkafka names codes). */
export function errorText(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).split('\n')[0]?.slice(0, 500) ?? '';
}
