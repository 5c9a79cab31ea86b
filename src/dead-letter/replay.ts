/**
 * `dlq` filters, counts and replay. Filtering and counting are pure; replay sends through an injected
 * producer and keeps its idempotency markers in an injected Redis.
 *
 * Idempotency: one marker per dead letter, `rf:dlq:{<dlt-topic>}:<partition>:<offset>` (the hash tag
 * keeps every marker of one dead-letter topic in one Cluster slot, so a batch is one MGET). Per batch:
 * MGET the markers and drop the marked records; produce the rest with an idempotent producer and wait
 * for every delivery report (acks=all); only then SET each marker. A marker is never written for a
 * record that was not delivered, so a failed produce loses nothing: the next run sends it again.
 * The window: a crash (or a lost Redis) after the delivery reports and before the markers are written
 * republishes that batch on the next run, at most `batch` records. The idempotent producer removes
 * only its own retries within one run, not this.
 */
import type { OutRecord } from '../kafka/types.js';
import { isDeadLetterHeader, STATE_APPLIED } from './headers.js';
import type { DltRecord } from './read.js';

/** Lineage headers every replayed record carries (UTF-8 text). */
export const LINEAGE = {
  topic: 'redfence_replay-from-topic',
  partition: 'redfence_replay-from-partition',
  offset: 'redfence_replay-from-offset',
  at: 'redfence_replay-at',
} as const;

/** The marker of one dead letter: written once it was delivered by a replay. */
export function replayMarkerKey(dltTopic: string, partition: number, offset: number): string {
  return `rf:dlq:{${dltTopic}}:${partition}:${offset}`;
}

export interface DlqFilter {
  /** redfence reasons (`redfence-reason`); a record of another writer has none and never matches. */
  reasons?: readonly string[];
  /** Exception classes: the full name, or the simple name (`DataException`). */
  exceptions?: readonly string[];
  /** The dead-letter time (the DLT record's timestamp), ms since the epoch: since <= t < until. */
  since?: number;
  until?: number;
  /** The record key, as UTF-8 text. */
  key?: string;
  /** The source (original) topic. */
  sourceTopic?: string;
  /** The source (original) partition and an inclusive range of source offsets. */
  sourcePartition?: number;
  offsetFrom?: bigint;
  offsetTo?: bigint;
}

function classMatches(name: string | undefined, wanted: readonly string[]): boolean {
  if (name === undefined) return false;
  return wanted.some((w) => name === w || name.endsWith(`.${w}`) || name.endsWith(`$${w}`));
}

/** Whether a dead letter passes every filter given. */
export function matches(r: DltRecord, f: DlqFilter): boolean {
  const info = r.info;
  if (f.reasons !== undefined && (info?.reason === undefined || !f.reasons.includes(info.reason)))
    return false;
  if (f.exceptions !== undefined && !classMatches(info?.exceptionClass, f.exceptions)) return false;
  if (f.since !== undefined && !(r.timestamp >= f.since)) return false;
  if (f.until !== undefined && !(r.timestamp >= 0 && r.timestamp < f.until)) return false;
  if (f.key !== undefined && (r.key === null || r.key.toString('utf8') !== f.key)) return false;
  if (f.sourceTopic !== undefined && info?.originalTopic !== f.sourceTopic) return false;
  if (f.sourcePartition !== undefined && info?.originalPartition !== f.sourcePartition) return false;
  if (f.offsetFrom !== undefined || f.offsetTo !== undefined) {
    const o = info?.originalOffset;
    if (o === undefined) return false;
    if (f.offsetFrom !== undefined && o < f.offsetFrom) return false;
    if (f.offsetTo !== undefined && o > f.offsetTo) return false;
  }
  return true;
}

export interface DlqStats {
  total: number;
  /** Records with none of the four schemes' headers. */
  unrecognised: number;
  byScheme: Record<string, number>;
  byReason: Record<string, number>;
  byException: Record<string, number>;
  /** `<original topic>/<partition>`. */
  bySourcePartition: Record<string, number>;
  /** The UTC hour of the dead-letter time, `YYYY-MM-DDTHH`. */
  byHour: Record<string, number>;
}

const NONE = '(none)';

/** Counts dead letters by scheme, reason, exception class, source partition and hour. */
export class DlqCounter {
  readonly stats: DlqStats = {
    total: 0,
    unrecognised: 0,
    byScheme: {},
    byReason: {},
    byException: {},
    bySourcePartition: {},
    byHour: {},
  };

  add(r: DltRecord): void {
    const s = this.stats;
    const bump = (table: Record<string, number>, k: string) => {
      table[k] = (table[k] ?? 0) + 1;
    };
    s.total++;
    const info = r.info;
    if (info === undefined) s.unrecognised++;
    bump(s.byScheme, info?.scheme ?? NONE);
    bump(s.byReason, info?.reason ?? NONE);
    bump(s.byException, info?.exceptionClass ?? NONE);
    bump(
      s.bySourcePartition,
      info?.originalTopic === undefined ? NONE : `${info.originalTopic}/${info.originalPartition ?? '?'}`,
    );
    bump(s.byHour, r.timestamp >= 0 ? new Date(r.timestamp).toISOString().slice(0, 13) : NONE);
  }
}

/**
 * The record a replay sends: the dead letter's key and value, its headers without the dead-letter
 * writers' own (`kafka_dlt-*`, `redfence-reason`, `__connect.errors.*`, `__streams.errors.*`) and
 * without an earlier replay's lineage, plus this replay's lineage. Placed by the producer's
 * partitioner (murmur2 of the key, like redfence and the Java client), not on the original partition.
 */
export function replayRecord(r: DltRecord, dltTopic: string, topic: string, at: Date): OutRecord {
  const headers: Record<string, Buffer[]> = {};
  for (const [name, v] of r.headerList) {
    if (isDeadLetterHeader(name) || name.startsWith('redfence_replay-')) continue;
    const list = headers[name] ?? [];
    if (list.length === 0) headers[name] = list;
    list.push(v);
  }
  headers[LINEAGE.topic] = [Buffer.from(dltTopic)];
  headers[LINEAGE.partition] = [Buffer.from(String(r.partition))];
  headers[LINEAGE.offset] = [Buffer.from(String(r.offset))];
  headers[LINEAGE.at] = [Buffer.from(at.toISOString())];
  return { topic, key: r.key, value: r.value, headers };
}

/**
 * Whether a dead letter's state changes were made before it failed (its last `redfence-state-applied`
 * is `true`): a replay leaves it out unless told.
 *
 * @example
 * const skipped = records.filter(isStateApplied).length;
 */
export function isStateApplied(r: Pick<DltRecord, 'headers'>): boolean {
  return r.headers.get(STATE_APPLIED)?.at(-1)?.toString('utf8') === 'true';
}

/** What replay needs of Redis (ioredis Redis and Cluster both have these). */
export interface MarkerRedis {
  mget(keys: string[]): Promise<(string | null)[]>;
  set(key: string, value: string, ex: 'EX', seconds: number): Promise<unknown>;
}

export interface ReplayProducer {
  /** Resolves once every record was delivered (acks=all); rejects on the first failure. */
  produce(records: readonly OutRecord[]): Promise<void>;
}

export interface ReplayOptions {
  dltTopic: string;
  redis: MarkerRedis;
  /** Absent with dryRun. */
  producer?: ReplayProducer;
  /** The destination; default each record's original topic. */
  to?: string;
  dryRun: boolean;
  /** Records per second; absent: as fast as delivery allows. */
  rate?: number;
  /**
   * Records per produce call and marker round trip (the duplicate window's size); with `rate`, at most
   * a tenth of a second's worth, so the rate is kept without bursts.
   */
  batch: number;
  /** How long a marker is kept, in seconds. */
  markerTtlSeconds: number;
  onProgress?: (done: number, total: number) => void;
  /**
   * Also send the dead letters whose state changes were made (`redfence-state-applied: true`); left
   * out by default, as sending one back applies its state again (a count counted twice).
   */
  includeStateApplied?: boolean;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

export interface ReplayResult {
  /** The records given (already filtered). */
  matched: number;
  /** Sent now (with dryRun: would be). */
  published: number;
  /** Skipped: their marker says an earlier replay delivered them. */
  alreadyReplayed: number;
  /** Skipped: no --to and the headers name no original topic. */
  noTopic: number;
  /** Skipped: their state changes were made (`redfence-state-applied`), and `includeStateApplied` is off. */
  stateApplied: number;
  /** Destination topic -> records sent (or, with dryRun, to send). */
  byTopic: Record<string, number>;
}

/** Replays `records` (already filtered) in order, batch by batch; see the file comment for the rule. */
export async function replay(records: readonly DltRecord[], o: ReplayOptions): Promise<ReplayResult> {
  const now = o.now ?? Date.now;
  const sleep = o.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const result: ReplayResult = {
    matched: records.length,
    published: 0,
    alreadyReplayed: 0,
    noTopic: 0,
    stateApplied: 0,
    byTopic: {},
  };
  const started = now();
  let sent = 0;
  const size = o.rate === undefined ? o.batch : Math.max(1, Math.min(o.batch, Math.floor(o.rate / 10)));
  for (let i = 0; i < records.length; i += size) {
    const batch = records.slice(i, i + size);
    const keys = batch.map((r) => replayMarkerKey(o.dltTopic, r.partition, r.offset));
    const marks = await o.redis.mget(keys);
    const todo: Array<{ key: string; out: OutRecord }> = [];
    batch.forEach((r, j) => {
      if (marks[j] !== null && marks[j] !== undefined) {
        result.alreadyReplayed++;
        return;
      }
      if (o.includeStateApplied !== true && isStateApplied(r)) {
        result.stateApplied++;
        return;
      }
      const topic = o.to ?? r.info?.originalTopic;
      if (topic === undefined) {
        result.noTopic++;
        return;
      }
      todo.push({ key: keys[j] as string, out: replayRecord(r, o.dltTopic, topic, new Date(now())) });
    });
    if (o.rate !== undefined && todo.length > 0) {
      // the batch starts when the records before it have had their share of the rate
      const wait = started + (sent / o.rate) * 1000 - now();
      if (wait > 0) await sleep(wait);
    }
    if (!o.dryRun && todo.length > 0) {
      if (o.producer === undefined) throw new Error('replay without dryRun needs a producer');
      await o.producer.produce(todo.map((t) => t.out));
      const mark = JSON.stringify({ at: new Date(now()).toISOString() });
      await Promise.all(todo.map((t) => o.redis.set(t.key, mark, 'EX', o.markerTtlSeconds)));
    }
    for (const t of todo) result.byTopic[t.out.topic] = (result.byTopic[t.out.topic] ?? 0) + 1;
    sent += todo.length;
    result.published += todo.length;
    o.onProgress?.(Math.min(i + batch.length, records.length), records.length);
  }
  return result;
}
