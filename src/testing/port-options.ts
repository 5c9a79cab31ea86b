/**
 * A memory port's options (checked once, at construction), the record of its Kafka steps, and the
 * count of its calls per KafkaPort method.
 */
import { RedfenceError } from '../errors/index.js';
import type { CommitOffset, KafkaPort } from '../kafka/types.js';
import type { KafkaStep } from './faults.js';

export interface MemoryPortOptions {
  /** The consumer group; give the processor the same `groupId`. */
  groupId: string;
  /**
   * The transactional id: a port started later with the same id fences this one (its next
   * transaction fails with RF_KAFKA_FATAL). Default: an id of its own.
   */
  transactionalId?: string;
  /** Records per batch, at most. Default 500. */
  maxBatchSize?: number;
  /** Names the port in its step records. Default: the group id and a random suffix. */
  name?: string;
}

/** One Kafka step as the port ran it (the offsets with their metadata, as given). */
export interface StepRecord {
  readonly kind: KafkaStep;
  readonly records: number;
  readonly offsets: readonly CommitOffset[];
  readonly outcome: 'ok' | 'failed';
}

/**
 * How many times each KafkaPort method of a port was called (failed and refused calls included);
 * deleteRecords and lowWatermarks are not ones the memory port has (its logs never lose records:
 * repartition topics there are never purged), nor positions (it writes no transaction markers), nor
 * unwritableTopics and authorizedOperations (it has no ACLs).
 */
export type PortCalls = Record<
  Exclude<
    keyof KafkaPort,
    'deleteRecords' | 'lowWatermarks' | 'positions' | 'unwritableTopics' | 'authorizedOperations'
  >,
  number
>;

export function noCalls(): PortCalls {
  return {
    start: 0,
    resubscribe: 0,
    produce: 0,
    commit: 0,
    produceTransactionally: 0,
    committed: 0,
    committedWithMetadata: 0,
    partitionCount: 0,
    describeTopics: 0,
    listTopics: 0,
    createTopics: 0,
    highWatermarks: 0,
    seek: 0,
    pause: 0,
    resume: 0,
    stop: 0,
  };
}

const OPTION_NAMES = new Set(['groupId', 'transactionalId', 'maxBatchSize', 'name']);

function invalid(message: string): RedfenceError {
  return new RedfenceError('RF_INVALID_OPTIONS', `memory Kafka port: ${message}`);
}

/** Refuses unknown or ill-typed options (RF_INVALID_OPTIONS naming the option); returns the batch size. */
export function checkPortOptions(options: MemoryPortOptions): { maxBatchSize: number } {
  if (typeof options !== 'object' || options === null) throw invalid('options must be an object');
  for (const k of Object.keys(options))
    if (!OPTION_NAMES.has(k)) throw invalid(`unknown option "${k}"; known: ${[...OPTION_NAMES].join(', ')}`);
  if (typeof options.groupId !== 'string' || options.groupId.length === 0)
    throw invalid('"groupId" must be a non-empty string');
  const max = options.maxBatchSize ?? 500;
  if (!Number.isSafeInteger(max) || max < 1)
    throw invalid(`"maxBatchSize" must be an integer >= 1, got ${JSON.stringify(options.maxBatchSize)}`);
  for (const k of ['transactionalId', 'name'] as const) {
    const v = options[k];
    if (v !== undefined && (typeof v !== 'string' || v.length === 0))
      throw invalid(`"${k}" must be a non-empty string`);
  }
  return { maxBatchSize: max };
}
