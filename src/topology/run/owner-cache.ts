/**
 * Owner-local state for reduce and aggregate (docs/architecture.md, "Owner-local state"): while this
 * process owns a partition, the unwindowed values it last read or wrote per fence key, with the key's
 * token (partition and offset of the last record applied). A fold whose key is cached starts from the
 * cached values instead of reading Redis; its key call still carries `expect` = the cached token, so a
 * key someone else wrote since (a new owner, another partition's record of the key, a deleted key)
 * answers CONFLICT and is read again (fold.ts). The cache only saves the read; Redis still decides.
 *
 * Only unwindowed reduce and aggregate values are kept: time windows expire in Redis by wall clock, and
 * sliding and session windows are read as whole hashes. A key is served from the cache only when every
 * record of its group is newer than the cached token (a replay needs the key's pending entries: read).
 * An entry is replaced after each call whose records all applied, updated (token only) after a call
 * of the key without folds, and dropped on anything else; a partition's entries are dropped when its
 * batch fails (an unknown outcome), when it is assigned or revoked (setStreamTime, forget). Bounded by
 * bytes (the keys' and values' lengths plus a fixed count per entry and value): least recently used
 * entries go first.
 *
 * @example
 * const cache = new OwnerCache(16 * 1024 * 1024);
 * const answer = cache.answer('orders/0', group, request); // undefined: read Redis
 */

import { LruBytes } from '../../runtime/lru-bytes.js';
import type { KeyRecordResult, StateStamp, StoreReadAnswer, StoreReadRequest } from '../../store/index.js';
import type { KeyGroup } from './steps.js';

interface Entry {
  readonly stamp: StateStamp;
  /** By store id: the value (null: none). */
  readonly kv: ReadonlyMap<number, Buffer | null>;
  /** What the entry is counted as against maxBytes. */
  readonly bytes: number;
}

/** Counted per entry beside its key and values (the map entry, the stamp, the value map). */
const ENTRY_BYTES = 160;
/** Counted per value kept. */
const VALUE_BYTES = 48;

function sizeOf(id: string, kv: ReadonlyMap<number, Buffer | null>): number {
  let n = ENTRY_BYTES + 2 * id.length;
  for (const v of kv.values()) n += VALUE_BYTES + (v?.length ?? 0);
  return n;
}

const NOTHING: readonly never[] = Object.freeze([]);

export class OwnerCache {
  /** By `<topic>/<partition>` then NUL then the fence key's hex; Map order is recency. */
  readonly #entries: LruBytes<Entry>;
  hits = 0;
  misses = 0;

  constructor(readonly maxBytes: number) {
    this.#entries = new LruBytes(maxBytes);
  }

  /** Keys held. */
  get size(): number {
    return this.#entries.size;
  }

  /** Bytes counted for the keys held (an estimate of the memory they take), at most maxBytes. */
  get bytes(): number {
    return this.#entries.bytes;
  }

  /**
   * The answer a read of `request` would give, from the cache; undefined when it does not know it all
   * (the key is not cached, a window, hash or session is asked for, a record is not newer than the
   * token, or the token is another partition's).
   */
  answer(tp: string, g: KeyGroup, partition: number, request: StoreReadRequest): StoreReadAnswer | undefined {
    const id = entryId(tp, g);
    const e = this.#entries.peek(id);
    const known =
      e !== undefined &&
      e.stamp.partition === partition &&
      (request.windows?.length ?? 0) === 0 &&
      (request.hashes?.length ?? 0) === 0 &&
      (request.sessions?.length ?? 0) === 0 &&
      (g.records[0]?.offset ?? -1) > e.stamp.offset &&
      (request.kv ?? NOTHING).every((s) => e.kv.has(s));
    if (!known) {
      this.misses++;
      return undefined;
    }
    this.hits++;
    this.#entries.get(id); // the most recently used
    return {
      stamp: e.stamp,
      kv: (request.kv ?? NOTHING).map((s) => e.kv.get(s) ?? null),
      windows: NOTHING,
      sessions: NOTHING,
      hashes: NOTHING,
      hashFinals: NOTHING,
      pending: (request.pending ?? NOTHING).map(() => null),
    };
  }

  /**
   * After a key's call: `read` (the answer its fold started from) and `written` (the values its folds
   * set, by store) when the group was folded, both absent when it was sent without folds. Every record
   * applied (APPLY or REBASE): the entry gets the new token; otherwise it is dropped.
   */
  after(
    tp: string,
    g: KeyGroup,
    partition: number,
    epoch: number,
    results: readonly KeyRecordResult[],
    folded?: {
      read: StoreReadAnswer;
      request: StoreReadRequest;
      written: ReadonlyMap<number, Buffer | null>;
    },
  ): void {
    const id = entryId(tp, g);
    const last = g.records[g.records.length - 1];
    const applied =
      last !== undefined &&
      results.length === g.records.length &&
      results.every((r) => r.verdict === 'APPLY' || r.verdict === 'REBASE');
    const old = this.#entries.peek(id);
    this.#entries.delete(id);
    if (!applied) return;
    // the key's generation stays (only a writer outside the owner changes it)
    const generation = (folded === undefined ? old?.stamp : folded.read.stamp)?.generation;
    const stamp = {
      partition,
      offset: last.offset,
      epoch,
      ...(generation === undefined ? {} : { generation }),
    };
    if (folded === undefined) {
      if (old !== undefined) this.#entries.set(id, { stamp, kv: old.kv, bytes: old.bytes }, old.bytes);
      return;
    }
    const { read, request, written } = folded;
    if ((request.windows?.length ?? 0) + (request.hashes?.length ?? 0) + (request.sessions?.length ?? 0) > 0)
      return;
    // values of stores this call did not read stay known while nothing else wrote the key
    const same = old !== undefined && read.stamp !== null && sameToken(old.stamp, read.stamp);
    const kv = new Map<number, Buffer | null>(same ? old.kv : undefined);
    (request.kv ?? NOTHING).forEach((s, i) => {
      kv.set(s, read.kv[i] ?? null);
    });
    for (const [s, v] of written) kv.set(s, v);
    const bytes = sizeOf(id, kv);
    this.#entries.set(id, { stamp, kv, bytes }, bytes);
  }

  /** Drops a topic-partition's entries (its batch failed, or it was assigned or revoked). */
  dropPartition(tp: string): void {
    this.#entries.dropPrefix(`${tp}\0`);
  }
}

function sameToken(a: StateStamp, b: StateStamp): boolean {
  return a.partition === b.partition && a.offset === b.offset && a.generation === b.generation;
}

function entryId(tp: string, g: KeyGroup): string {
  return `${tp}\0${g.key.toString('hex')}`;
}
