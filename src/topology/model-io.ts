/**
 * What the model's aggregation processors share: the record they get, the way they forward, report late
 * and dropped records, and the store codec (every aggregate is stored as its serde's bytes and read back,
 * as a Kafka Streams store does, so a user aggregate that does not survive its serde shows it here);
 * and the check of runModel's input.
 */
import { RedfenceError } from '../errors/index.js';
import type { ModelHeaders, ModelInput, WindowBounds } from './model-types.js';
import { readStored } from './threw.js';
import type { AggregateParams, TopologyNode } from './types.js';

export type { WindowBounds };

/** Kafka Streams' ConsumerRecord.NO_TIMESTAMP: the stream time before any record. */
export const NO_TIMESTAMP = -1;

export type AggregateNode = Extract<TopologyNode, { kind: 'aggregate' }>;

/** A record inside the model: deserialized key and value, its timestamp. */
export interface ModelRecord {
  readonly key: unknown;
  readonly value: unknown;
  readonly timestamp: number;
}

/** How an aggregation processor talks to the rest of the model. */
export interface AggIO {
  readonly node: AggregateNode;
  /**
   * Forwards a table update (a windowed key is `{ key, start, end }`; value null: a tombstone); `bare`:
   * without the record's headers (a session window's updates, as Kafka Streams forwards them).
   */
  forward(key: unknown, value: unknown, timestamp: number, bare?: true): void;
  /** The record was too late for these windows. */
  late(windows: readonly WindowBounds[]): void;
  /** The record was dropped (null key, or null value where Kafka Streams drops it). */
  drop(reason: 'null-key' | 'null-value'): void;
}

/** A stored aggregate: its bytes and the timestamp Kafka Streams keeps beside it. */
export interface Stored {
  readonly bytes: Buffer;
  readonly timestamp: number;
}

/** The key's store bytes (the store's order is the order of these bytes) and their map key. */
export function storeKey(p: AggregateParams, key: unknown): { bytes: Buffer; id: string } {
  const bytes = p.keySerde.serialize(key, changelog(p));
  return { bytes, id: bytes.toString('hex') };
}

/** Kafka Streams' store topic name, given to the store serdes. */
export function changelog(p: AggregateParams): string {
  return `${p.store}-changelog`;
}

/** Writes an aggregate; null means delete (as a Kafka Streams store put of null). */
export function encodeAgg(p: AggregateParams, agg: unknown, timestamp: number): Stored | null {
  if (agg === null || agg === undefined) return null;
  return { bytes: p.valueSerde.serialize(agg, changelog(p)), timestamp };
}

/** Reads a stored aggregate; a serde that cannot is a StoredUnreadable (threw.ts). */
export function decodeAgg(p: AggregateParams, s: Stored): unknown {
  return readStored(() => p.valueSerde.deserialize(s.bytes, changelog(p)));
}

/** Reads a stored key; a serde that cannot is a StoredUnreadable (threw.ts). */
export function decodeKey(p: AggregateParams, bytes: Buffer): unknown {
  return readStored(() => p.keySerde.deserialize(bytes, changelog(p)));
}

/** Unsigned lexicographic byte order (RocksDB's default comparator). */
export function compareBytes(a: Buffer, b: Buffer): number {
  return Buffer.compare(a, b);
}

/** Kafka Streams' default segment interval of a window or session store: max(retention / 2, 60 s). */
export function segmentInterval(retentionMs: number): number {
  return Math.max(Math.floor(retentionMs / 2), 60_000);
}

/**
 * A store's entries by key id, then by entry id: lookups of one key scan that key's entries only. Entries
 * below a bound no fetch can reach again (the store's retention only moves forward) can be pruned, which
 * keeps a long model run from growing without end; pruning scans everything, so callers do it once per
 * retention period of store time.
 */
export class KeyedEntries<E> {
  private readonly byKey = new Map<string, Map<string, E>>();
  private prunedAt = Number.NEGATIVE_INFINITY;

  ofKey(keyId: string): E[] {
    return [...(this.byKey.get(keyId)?.values() ?? [])];
  }

  all(): E[] {
    const out: E[] = [];
    for (const m of this.byKey.values()) out.push(...m.values());
    return out;
  }

  set(keyId: string, id: string, entry: E): void {
    let m = this.byKey.get(keyId);
    if (m === undefined) {
      m = new Map();
      this.byKey.set(keyId, m);
    }
    m.set(id, entry);
  }

  delete(keyId: string, id: string): void {
    const m = this.byKey.get(keyId);
    if (m === undefined) return;
    m.delete(id);
    if (m.size === 0) this.byKey.delete(keyId);
  }

  /** Deletes the entries `gone` says can never be fetched again, at most once per `every` of `now`. */
  prune(now: number, every: number, gone: (e: E) => boolean): void {
    if (now - this.prunedAt < Math.max(every, 1)) return;
    this.prunedAt = now;
    for (const [keyId, m] of this.byKey) {
      for (const [id, e] of m) if (gone(e)) m.delete(id);
      if (m.size === 0) this.byKey.delete(keyId);
    }
  }
}

/** `o` with `headers` when there are any (an output without headers has no `headers` field). */
export function withHeaders<T extends object>(
  o: T,
  headers: ModelHeaders | undefined,
): T & { headers?: ModelHeaders } {
  return headers === undefined ? o : { ...o, headers };
}

const isHeaderValue = (v: unknown) => typeof v === 'string' || Buffer.isBuffer(v);

function isHeaders(h: unknown): boolean {
  if (h === null || typeof h !== 'object' || Array.isArray(h)) return false;
  return Object.values(h).every((v) => isHeaderValue(v) || (Array.isArray(v) && v.every(isHeaderValue)));
}

/**
 * Checks runModel's input; gives each input topic's partition count (its largest partition plus one).
 *
 * @example
 * checkInput([{ topic: 'in', partition: 2, offset: 0, key: null, value: null, timestamp: 0 }]); // Map { 'in' => 3 }
 */
export function checkInput(input: readonly ModelInput[]): Map<string, number> {
  const counts = new Map<string, number>();
  input.forEach((r, i) => {
    const ok =
      typeof r.topic === 'string' &&
      Number.isSafeInteger(r.partition) &&
      r.partition >= 0 &&
      Number.isSafeInteger(r.offset) &&
      Number.isSafeInteger(r.timestamp) &&
      r.timestamp >= 0 &&
      (r.key === null || Buffer.isBuffer(r.key)) &&
      (r.value === null || Buffer.isBuffer(r.value)) &&
      (r.headers === undefined || isHeaders(r.headers));
    if (!ok) {
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        `runModel: input[${i}] needs a topic, a partition >= 0, an offset, a timestamp >= 0, Buffer|null key and value, and headers (if any) of Buffer or string values`,
      );
    }
    counts.set(r.topic, Math.max(counts.get(r.topic) ?? 0, r.partition + 1));
  });
  return counts;
}
