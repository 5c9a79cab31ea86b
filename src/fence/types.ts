/** Verdicts of the fence decision table (docs/guarantees.md). One enum for the whole library. */
export const Verdict = {
  /** New record for this key: state updated, fence moved, output emitted. */
  APPLY: 'APPLY',
  /** Already applied and its output already committed: nothing to do. */
  SKIP: 'SKIP',
  /** Already applied, output not yet committed: emit the stored output (or dead letter) again. */
  REEMIT: 'REEMIT',
  /** The key was last written from another partition: applied, fence reset to this partition; alert. */
  REBASE: 'REBASE',
  /** The caller's epoch is older than the partition's: nothing written; stop processing the partition. */
  FENCE: 'FENCE',
  /** Compare-and-set found the fence moved since the caller read it: nothing written; re-read and retry. */
  CONFLICT: 'CONFLICT',
  /** The operation cannot apply to the stored value (e.g. add on text): state untouched, fence moved, dead letter. */
  REJECT: 'REJECT',
} as const;
export type Verdict = (typeof Verdict)[keyof typeof Verdict];

/** The fence of a key: the partition and offset of the last record applied to it. */
export interface FenceToken {
  readonly partition: number;
  readonly offset: number;
  /**
   * The key's generation (field `g`): bumped by every writer outside the owner (`redfence reconcile
   * --repair`), so a token read before such a write never matches after it. Absent: none (0).
   */
  readonly generation?: number;
}

/** What a record does to its key's state. Arithmetic runs inside Redis, atomically. */
export type Operation =
  /** Last write wins. */
  | { readonly op: 'set'; readonly value: string | Uint8Array }
  /** Exact 64-bit integer addition (HINCRBY semantics). */
  | { readonly op: 'add'; readonly by: number | bigint }
  /** Floating-point addition (HINCRBYFLOAT semantics). */
  | { readonly op: 'addFloat'; readonly by: number }
  /** Keep the larger / smaller number. */
  | { readonly op: 'max'; readonly value: number }
  | { readonly op: 'min'; readonly value: number }
  /** Remove the value, keep the fence (tombstone). */
  | { readonly op: 'delete' }
  /** Set a value computed in JS from a read whose fence was `expected` (null: the key had no state). */
  | { readonly op: 'cas'; readonly expected: FenceToken | null; readonly value: string | Uint8Array };

/**
 * The output a record emits, kept pending in Redis until the partition's committed offset passes it:
 * given bytes, a null value (tombstone), or `'state'`: the key's value right after this record. Or
 * `{ deadLetter: reason }`: the caller dead-letters the record itself (its reducer threw): the value
 * is not changed (a `cas` still checks its token), the fence moves past it, the verdict is `REJECT`
 * with this reason, and a replay of the offset is `REEMIT`ted as that dead letter, so a later record of
 * the key moving the fence never hides it.
 *
 * @example
 * await fence.apply({ ...request, records: [{ offset: 7, operation: { op: 'cas', expected, value: '' }, output: { deadLetter: 'reducer threw' } }] });
 */
export type OutputSpec =
  | { readonly value: string | Uint8Array | null }
  | 'state'
  | { readonly deadLetter: string };

export interface FenceRecord {
  /** The record's offset in its partition. */
  readonly offset: number;
  readonly operation: Operation;
  /** Omitted: the record emits nothing. */
  readonly output?: OutputSpec;
}

/** One `apply` call: every record of one key from one partition batch, in increasing offset order. */
export interface ApplyRequest {
  readonly topic: string;
  readonly partition: number;
  /** The partition epoch this caller acquired with `acquireEpoch`. */
  readonly epoch: number;
  /** The partition's committed offset (next offset to consume), or -1 when unknown. Pending entries below it are pruned. */
  readonly committedOffset: number;
  readonly key: string | Uint8Array;
  readonly records: readonly FenceRecord[];
}

/** An emitted output: bytes, or null for a tombstone. */
export interface Output {
  readonly value: Buffer | null;
}

export type RecordResult =
  | { readonly verdict: 'APPLY'; readonly offset: number; readonly gap: number; readonly output?: Output }
  | {
      readonly verdict: 'REBASE';
      readonly offset: number;
      readonly previousPartition: number;
      readonly output?: Output;
    }
  | { readonly verdict: 'SKIP'; readonly offset: number }
  | { readonly verdict: 'REEMIT'; readonly offset: number; readonly output: Output }
  | { readonly verdict: 'REEMIT'; readonly offset: number; readonly deadLetter: string }
  | { readonly verdict: 'FENCE'; readonly offset: number; readonly epoch: number }
  | { readonly verdict: 'CONFLICT'; readonly offset: number; readonly current: FenceToken | null }
  | { readonly verdict: 'REJECT'; readonly offset: number; readonly reason: string };

/** A pending entry of a key: an output or a dead letter not yet passed by the committed offset. */
export type PendingEntry =
  | { readonly offset: number; readonly kind: 'output'; readonly output: Output }
  | { readonly offset: number; readonly kind: 'deadLetter'; readonly reason: string };

/** A key's state and fence as stored. */
export interface StoredState {
  readonly value: Buffer | null;
  readonly partition: number;
  readonly offset: number;
  readonly epoch: number;
  /**
   * The key's generation (field `g`): bumped by every writer outside the owner (`redfence reconcile
   * --repair`), so a token read before such a write never matches after it. Absent: none (0).
   */
  readonly generation?: number;
  readonly pending: readonly PendingEntry[];
}

/** `strict`: a single Redis; the script also reads the partition epoch. `cluster`: one slot per script. */
export type FencingMode = 'strict' | 'cluster';
