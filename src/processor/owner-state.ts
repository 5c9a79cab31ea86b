/**
 * Owner-local state for a reducer processor (docs/operations.md, "Owner-local state"): per owned
 * partition, the state (its JSON text) and fence token each key had after this owner's last call, so the
 * next batch of the key folds from memory instead of reading Redis (apply.ts). Redis still decides:
 * the compare-and-set carries the cached token, so a key anyone else wrote since (a newer owner, a
 * record of the key from another partition, `reconcile --repair`, which bumps the key's generation)
 * answers CONFLICT and is read again. An entry is used only under the epoch it was written with (a new
 * assignment acquires a new epoch) and only when every record of the key's group is newer than its
 * token (a replay, or a batch run again after a failed WAIT, reads); a partition's entries are dropped
 * when its apply fails or is FENCEd. Bounded by bytes (src/runtime/lru-bytes.ts).
 *
 * @example
 * const owner = new OwnerState(16 * 1024 * 1024);
 * owner.stored('orders/0', 0, 3, 'c1', 120); // undefined: read Redis
 */
import type { FenceToken, StoredState } from '../fence/index.js';
import { LruBytes } from '../runtime/lru-bytes.js';

interface Entry {
  readonly epoch: number;
  /** The state's JSON text; null: the key has none. */
  readonly json: string | null;
  readonly token: FenceToken;
}

/** Counted per entry beside its key and state (the map entry, the token, the strings). */
const ENTRY_BYTES = 160;

const NO_PENDING: readonly never[] = Object.freeze([]);

export class OwnerState {
  readonly #entries: LruBytes<Entry>;
  hits = 0;
  misses = 0;
  /** The counts at the last {@link drain}. */
  #drained = { hits: 0, misses: 0 };

  constructor(maxBytes: number) {
    this.#entries = new LruBytes(maxBytes);
  }

  /** Keys held. */
  get size(): number {
    return this.#entries.size;
  }

  /**
   * The key's state as a read would give it, or undefined (read Redis): not held, held under another
   * epoch, its token another partition's, or `firstOffset` (the group's first record) not newer than
   * the token.
   */
  stored(
    tp: string,
    partition: number,
    epoch: number,
    key: string,
    firstOffset: number,
  ): StoredState | undefined {
    const id = `${tp}\0${key}`;
    const e = this.#entries.peek(id);
    if (
      e === undefined ||
      e.epoch !== epoch ||
      e.token.partition !== partition ||
      firstOffset <= e.token.offset
    ) {
      this.misses++;
      return undefined;
    }
    this.hits++;
    this.#entries.get(id);
    return {
      value: e.json === null ? null : Buffer.from(e.json, 'utf8'),
      partition: e.token.partition,
      offset: e.token.offset,
      epoch,
      ...(e.token.generation === undefined ? {} : { generation: e.token.generation }),
      pending: NO_PENDING,
    };
  }

  /** After a call that left the key at `token` holding `json`. */
  keep(tp: string, epoch: number, key: string, json: string | null, token: FenceToken): void {
    const id = `${tp}\0${key}`;
    this.#entries.set(id, { epoch, json, token }, ENTRY_BYTES + 2 * (id.length + (json?.length ?? 0)));
  }

  /** Hits and misses since the last drain (for the metrics, after each batch). */
  drain(): { hits: number; misses: number } {
    const since = { hits: this.hits - this.#drained.hits, misses: this.misses - this.#drained.misses };
    this.#drained = { hits: this.hits, misses: this.misses };
    return since;
  }

  /** Forgets a key (its call answered something other than applied). */
  forget(tp: string, key: string): void {
    this.#entries.delete(`${tp}\0${key}`);
  }

  /** Drops a partition's entries (its apply failed or was FENCEd). */
  dropPartition(tp: string): void {
    this.#entries.dropPrefix(`${tp}\0`);
  }
}
