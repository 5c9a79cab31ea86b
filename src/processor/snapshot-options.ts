/** The processor's `snapshot` option, checked at construction (RF_INVALID_OPTIONS naming the path). */
import type { ClientSettings } from '../kafka/client-config.js';
import { checkTopic } from '../keys/index.js';
import { checkKeys, integer, invalid, isObject, MAX_TIMER_MS, shown, text } from '../options/checks.js';
import { adapterSettings, type KafkaOptions } from '../runtime/kafka-options.js';

export interface SnapshotOptions {
  /**
   * The compacted topic the snapshots go to (created with `cleanup.policy=compact` and the input's
   * partition count when missing). Default `<store>-snapshot`.
   */
  topic?: string;
  /** Least time between the starts of two snapshot passes. Default 60000. */
  intervalMs?: number;
  /** Keys read (HGETALL) and produced per step of a pass. Default 200. */
  pageSize?: number;
  /** Most keys a pass reads per second (it waits between pages), so it takes a bounded share of Redis. Default 0: no limit. */
  maxKeysPerSecond?: number;
}

export interface ResolvedSnapshot {
  readonly topic: string;
  readonly intervalMs: number;
  readonly pageSize: number;
  /** 0: no limit. */
  readonly maxKeysPerSecond: number;
}

const NAMES: Record<keyof SnapshotOptions, true> = {
  topic: true,
  intervalMs: true,
  pageSize: true,
  maxKeysPerSecond: true,
};

/** The default snapshot topic of a store. */
export function snapshotTopic(store: string): string {
  return `${store}-snapshot`;
}

/** undefined: no snapshots. `portGiven`: the `kafka` option is a KafkaPort (no settings to produce with). */
export function snapshotOptions(v: unknown, store: string, portGiven: boolean): ResolvedSnapshot | undefined {
  if (v === undefined || v === false) return undefined;
  if (!isObject(v)) throw invalid(`option "snapshot" must be an object or false, got ${shown(v)}`);
  checkKeys('snapshot', v, NAMES);
  if (portGiven)
    throw invalid(
      'option "snapshot" needs the "kafka" option as connection settings (the snapshot has its own producer), not a KafkaPort',
    );
  const topic = text('snapshot.topic', v.topic) ?? snapshotTopic(store);
  try {
    checkTopic(topic);
  } catch {
    throw invalid(
      `option "snapshot.topic" must be a Kafka topic name ([A-Za-z0-9._-]{1,249}), got ${shown(topic)}`,
    );
  }
  return {
    topic,
    intervalMs: integer('snapshot.intervalMs', v.intervalMs, 100, MAX_TIMER_MS, 60_000),
    pageSize: integer('snapshot.pageSize', v.pageSize, 1, 10_000, 200),
    maxKeysPerSecond: integer('snapshot.maxKeysPerSecond', v.maxKeysPerSecond, 0, 10_000_000, 0),
  };
}

/** The snapshot producer's client settings: the processor's brokers, security and pass-through. */
export function snapshotClient(k: KafkaOptions, clientId: string): ClientSettings {
  return {
    ...adapterSettings(k, { clientId }),
    groupId: `${clientId}-snapshot`,
  };
}
