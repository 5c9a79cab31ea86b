/**
 * One partition's batch of invalidation events, read: each record decoded (default JSON.parse) and its
 * cache entries built and checked, all the batch's entries in one list (they go to Redis together). A
 * record that cannot be decoded or names no usable entry is set aside with its reason and error, for
 * the dead-letter topic; it never holds back the others.
 */

import type { DeadLetterReason } from '../dead-letter/build.js';
import type { HandlerRecord } from '../definition/handler.js';
import { type CacheKeys, entriesOf, type InvalidationKey } from '../definition/invalidation.js';
import { RedfenceError } from '../errors/index.js';
import type { InRecord } from '../kafka/types.js';
import type { EntryKeys } from '../kit/invalidation/pipeline.js';

export interface BatchReader {
  readonly caches: CacheKeys;
  readonly keysOf: (record: HandlerRecord<unknown>) => readonly InvalidationKey[];
  readonly decode: ((value: Buffer | null, record: HandlerRecord<Buffer | null>) => unknown) | undefined;
  readonly eventTime: ((record: HandlerRecord<unknown>) => number | undefined) | undefined;
}

export interface BadRecord {
  readonly record: InRecord;
  readonly reason: DeadLetterReason;
  readonly error: RedfenceError;
}

export interface ReadBatch {
  readonly entries: EntryKeys[];
  readonly bad: BadRecord[];
  /** The newest event time of the batch's good records (ms), undefined when none had one. */
  readonly newestEventMs: number | undefined;
}

function jsonDecode(value: Buffer | null): unknown {
  return value === null ? null : JSON.parse(value.toString('utf8'));
}

export function readBatch(reader: BatchReader, records: readonly InRecord[]): ReadBatch {
  const entries: EntryKeys[] = [];
  const bad: BadRecord[] = [];
  let newest: number | undefined;
  for (const r of records) {
    const raw: HandlerRecord<Buffer | null> = {
      topic: r.topic,
      partition: r.partition,
      offset: Number(r.offset),
      key: r.key,
      value: r.value,
      headers: r.headers,
      timestamp: r.timestamp,
    };
    let value: unknown;
    try {
      value = reader.decode ? reader.decode(r.value, raw) : jsonDecode(r.value);
    } catch (err) {
      const at = `${r.topic}/${r.partition}@${r.offset}`;
      const error = new RedfenceError('RF_HANDLER_DECODE', `${at}: decode failed`, { cause: err });
      bad.push({ record: r, reason: 'undecodable', error });
      continue;
    }
    const rec: HandlerRecord<unknown> = { ...raw, value };
    let mine: EntryKeys[];
    try {
      mine = entriesOf(reader.keysOf(rec), reader.caches);
    } catch (err) {
      const error = RedfenceError.is(err, 'RF_KIT_INVALIDATION_KEY')
        ? err
        : new RedfenceError('RF_KIT_INVALIDATION_KEY', 'keys() threw on the event', { cause: err });
      bad.push({ record: r, reason: 'processing-error', error });
      continue;
    }
    for (const e of mine) entries.push(e);
    let t: number | undefined;
    try {
      t = reader.eventTime ? reader.eventTime(rec) : Number(r.timestamp);
    } catch {
      t = undefined; // the lag metric only: a throwing eventTime does not fail the invalidation
    }
    if (typeof t === 'number' && Number.isFinite(t) && t >= 0) newest = Math.max(newest ?? 0, t);
  }
  return { entries, bad, newestEventMs: newest };
}
