/**
 * The assignment check of the default adapter: a group's committed offset that the partition's log no
 * longer holds. librdkafka fetches from the committed offset; when the log starts above it (retention
 * or DeleteRecords removed records the group never processed) or ends below it (the topic was deleted
 * and made again, or its log truncated), the fetch is out of range and librdkafka moves to
 * `auto.offset.reset` (earliest) without telling the application. This check tells it: on each
 * assignment it reads the committed offsets and each assigned topic's watermarks (one admin call per
 * topic) and reports every partition whose committed offset lies outside [log start, log end].
 *
 * Read-only and bounded: it never commits, seeks or pauses, and never fails the assignment (a read that
 * fails or has not answered by its deadline is reported as such and the assignment goes on). A
 * partition the group never committed is never reported (its start at the log start is by design), and
 * a log start equal to the committed offset is not a skip (a topology purges its repartition topics up
 * to the committed offset, never past it).
 */
import type { OffsetResetReason } from '../metrics/metrics.js';
import type { CommittedOffset, TopicPartition } from './types.js';
import { tpKey } from './types.js';

export type { OffsetResetReason };

/** A partition whose committed offset lies outside its log, found when it was assigned. */
export interface OffsetReset {
  readonly group: string;
  readonly topic: string;
  readonly partition: number;
  /**
   * `retention`: the log starts above the committed offset (records deleted unprocessed);
   * `beyond_end`: the log ends below it (the topic was made again, or its log truncated).
   */
  readonly reason: OffsetResetReason;
  /** The group's committed offset (the next record it was to process). */
  readonly committed: number;
  /** The partition's log start offset (low watermark) and log end (high watermark). */
  readonly logStart: number;
  readonly logEnd: number;
  /**
   * `retention`: the records between the committed offset and the log start, deleted before the group
   * processed them (logStart - committed). `beyond_end`: 0 (what the old log held past its end is not
   * known).
   */
  readonly skipped: number;
}

/** Where an adapter reports what its assignment check found. */
export interface OffsetResetReport {
  /** A partition whose committed offset its log no longer holds (see {@link OffsetReset}). */
  reset(r: OffsetReset): void;
  /** The check could not be made for `topics` (a failed or slow read); the assignment went on. */
  failed(topics: readonly string[], err: unknown): void;
}

/** Watermarks of a topic's partitions, by partition. */
export type Watermarks = ReadonlyMap<number, { readonly low: number; readonly high: number }>;

/**
 * The partitions of `tps` whose committed offset lies below their log start or above their log end
 * (pure). A partition without a committed offset (-1) or without watermarks is left out.
 */
export function offsetResets(
  group: string,
  tps: readonly TopicPartition[],
  committed: ReadonlyMap<string, CommittedOffset>,
  watermarks: ReadonlyMap<string, Watermarks>,
): OffsetReset[] {
  const out: OffsetReset[] = [];
  for (const { topic, partition } of tps) {
    const c = committed.get(tpKey(topic, partition))?.offset ?? -1;
    const w = watermarks.get(topic)?.get(partition);
    if (c < 0 || w === undefined) continue;
    const at = { group, topic, partition, committed: c, logStart: w.low, logEnd: w.high };
    if (c < w.low) out.push({ ...at, reason: 'retention', skipped: w.low - c });
    else if (c > w.high) out.push({ ...at, reason: 'beyond_end', skipped: 0 });
  }
  return out;
}

/** What {@link checkAssigned} reads with. */
export interface OffsetResetReads {
  readonly group: string;
  committed(tps: readonly TopicPartition[]): Promise<ReadonlyMap<string, CommittedOffset>>;
  /** One admin call for all of a topic's partitions. */
  watermarks(topic: string): Promise<Watermarks>;
}

/**
 * Reads the committed offsets of `tps` and their topics' watermarks (all at once) and reports each
 * partition outside its log to `report`. Never rejects; settles by `deadline` at the latest: a read
 * that has not answered by then is reported as failed and its result, when it comes, is dropped (the
 * partitions may be processing by then, and a commit read late is no longer the one the fetch started
 * from).
 */
export async function checkAssigned(
  reads: OffsetResetReads,
  tps: readonly TopicPartition[],
  report: OffsetResetReport,
  deadline: Promise<unknown>,
): Promise<void> {
  const topics = [...new Set(tps.map((tp) => tp.topic))];
  if (topics.length === 0) return;
  const late = deadline.then(() => 'late' as const);
  try {
    const reading = Promise.all([
      reads.committed(tps),
      Promise.all(topics.map(async (t) => [t, await reads.watermarks(t)] as const)),
    ]);
    reading.catch(() => undefined); // a read that fails after the deadline is not left unhandled
    const got = await Promise.race([reading, late]);
    if (got === 'late') {
      report.failed(topics, new Error('no answer in time'));
      return;
    }
    const [committed, marks] = got;
    for (const r of offsetResets(reads.group, tps, committed, new Map(marks))) report.reset(r);
  } catch (err) {
    report.failed(topics, err);
  }
}
