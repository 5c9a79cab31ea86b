/**
 * One partition's log, as a broker keeps it: offsets from 0, records written inside a transaction
 * stay invisible to read_committed readers until it ends (the last stable offset stops at the first
 * open one), an aborted transaction's records are skipped, and every transaction end writes a
 * control marker that takes an offset (so a consumer sees holes, as with a real broker).
 */
import type { InRecord, TopicPartition } from '../kafka/types.js';

/** A stored record: bytes as the broker keeps them. */
export interface StoredRecord {
  readonly offset: number;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  readonly headers: Record<string, Buffer | Buffer[]>;
  readonly timestamp: string;
}

/** A transaction's state, shared by every entry it wrote. */
export interface TxnState {
  status: 'open' | 'committed' | 'aborted';
}

type Entry = { kind: 'data'; record: StoredRecord; txn: TxnState | undefined } | { kind: 'marker' };

export type Isolation = 'read_committed' | 'read_uncommitted';

export class PartitionLog {
  readonly #entries: Entry[] = [];
  /** First offset written here by each open transaction. */
  readonly #open = new Map<TxnState, number>();

  /** The next offset to be written (records and markers). */
  get highWatermark(): number {
    return this.#entries.length;
  }

  /** The first offset a read_committed reader may not read yet (the first open transaction's). */
  get lastStable(): number {
    let lso = this.#entries.length;
    for (const first of this.#open.values()) lso = Math.min(lso, first);
    return lso;
  }

  append(record: Omit<StoredRecord, 'offset'>, txn?: TxnState): number {
    const offset = this.#entries.length;
    this.#entries.push({ kind: 'data', record: { ...record, offset }, txn });
    if (txn !== undefined && !this.#open.has(txn)) this.#open.set(txn, offset);
    return offset;
  }

  /** Ends a transaction here: its entries take its final status, and a control marker is written. */
  endTransaction(txn: TxnState): void {
    if (!this.#open.delete(txn)) return;
    this.#entries.push({ kind: 'marker' });
  }

  /**
   * Up to `max` records from `from` on; `next` is the offset after the last entry looked at (past
   * markers and aborted records, so a reader never stalls on them).
   */
  read(from: number, max: number, isolation: Isolation): { records: StoredRecord[]; next: number } {
    const end = isolation === 'read_committed' ? this.lastStable : this.#entries.length;
    const records: StoredRecord[] = [];
    let next = Math.max(0, from);
    while (next < end && records.length < max) {
      const e = this.#entries[next] as Entry;
      next++;
      if (e.kind === 'marker') continue;
      if (isolation === 'read_committed' && e.txn?.status === 'aborted') continue;
      records.push(e.record);
    }
    return { records, next };
  }
}

/** A stored record as a consumer receives it (copies: the reader may change them freely). */
export function toInRecord(tp: TopicPartition, r: StoredRecord): InRecord {
  const headers: InRecord['headers'] = {};
  for (const [name, v] of Object.entries(r.headers))
    headers[name] = Array.isArray(v) ? v.map((x) => Buffer.from(x)) : Buffer.from(v);
  return {
    topic: tp.topic,
    partition: tp.partition,
    offset: String(r.offset),
    key: r.key === null ? null : Buffer.from(r.key),
    value: r.value === null ? null : Buffer.from(r.value),
    headers,
    timestamp: r.timestamp,
  };
}
