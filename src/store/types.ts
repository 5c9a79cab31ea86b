/**
 * The store interface's unit, one key call (docs/architecture.md, "The store interface"): every record
 * of one fence key from one partition batch, each with its effects on the key's stores.
 *
 * In this slice: `kv`, `window`, `field`, `final`, `session` and `note` effects, cluster fencing (the
 * writer epoch in the fence hash), `expect` (read-then-write by token, with the key's generation: field
 * `g`, bumped by writers outside the owner). Not yet: float addition, strict fencing by the partition
 * epoch key.
 */

/** What an effect does to a value. Integers are exact up to 2^53 (a larger sum is a REJECT). */
export type StoreOp =
  /** Last write wins. */
  | { readonly op: 'set'; readonly value: string | Uint8Array }
  /** Integer addition (an absent value counts as 0). */
  | { readonly op: 'add'; readonly by: number | bigint }
  /** Keep the larger / smaller number (an absent value takes the operand). */
  | { readonly op: 'max'; readonly value: number }
  | { readonly op: 'min'; readonly value: number }
  /** Remove the value. */
  | { readonly op: 'delete' };

/**
 * A field of a window key: `value` (field `v`) or `time` (field `t`): a second value kept in the same
 * key, e.g. the largest record timestamp beside a windowed aggregate (one key per window, not two).
 */
export type WindowField = 'value' | 'time';

/** One effect of a record on one store of its fence key. `store` is a small integer id (0..65535). */
export type Effect =
  /** A key-value store: field `v` of the fence hash for store 0 (the processor's own), else `v:<store>`. */
  | { readonly store: number; readonly kind: 'kv'; readonly op: StoreOp }
  /**
   * A time window `[start, ...)` of a window store: its own key, expiring at `expireAt` (ms since the
   * epoch); the op applies to its `field` (default `value`). The key lives while it holds either field.
   */
  | {
      readonly store: number;
      readonly kind: 'window';
      readonly start: number;
      readonly expireAt: number;
      readonly op: StoreOp;
      readonly field?: WindowField;
    }
  /**
   * A window kept as a field of the key's window hash of store `store` (`<fence hash>:h:<store>`, field
   * `<start>`): for windows whose starts follow the data (sliding windows), so one read finds them all.
   * The hash expires at the largest `expireAt` of the call (PEXPIREAT).
   */
  | {
      readonly store: number;
      readonly kind: 'field';
      readonly start: number;
      readonly expireAt: number;
      readonly op: StoreOp;
    }
  /**
   * Nothing changes; its result is `value`, kept pending with the record's other results (what the
   * caller needs to rebuild the record's outputs from a REEMIT: e.g. which windows it wrote).
   */
  | { readonly store: number; readonly kind: 'note'; readonly value: string | Uint8Array }
  /**
   * Emit-final: the window's `field` (default `value`), once (a second final of the same field gives
   * null); the window is marked final when the record's effects are made, so one record takes its value
   * and its time, and a later record's final gives null; null too when the window holds no value. With `end`: the session `[start, end]` of the store's session hash, its
   * value (null: none, e.g. merged away), nothing marked (the caller's close ranges never meet a session
   * twice). With `hash`: the window `start` kept as a field of the key's window hash of `store` (the
   * `field` effects' layout), its value there as the call has it so far, once: the field is marked
   * final (the hash's field `f<start>`, written with the record's effects, deleted with the value), so
   * a second final of it gives null, as does one of a field with no value; with `field: 'time'` (a
   * window's timestamp kept in a hash of its own) the field as the call has it, nothing marked.
   */
  | {
      readonly store: number;
      readonly kind: 'final';
      readonly start: number;
      readonly end?: number;
      readonly field?: WindowField;
      readonly hash?: true;
    }
  /**
   * A session window at `time` (Kafka Streams' session aggregation, the bounds computed by the caller):
   * the key's sessions with end >= `lowEnd` and start <= `highStart` merge with the record into one
   * session; `add` sums their values (a count, a sum), `max`/`min` keep the extreme; then the op applies;
   * `set` / `delete` write the merged session's value computed by the caller from a read (a JS
   * aggregator and merger, sent with `expect`), the merged-away sessions removed all the same.
   * A merged end below `closeTime` is late: nothing changes. Sessions ending before `dropBefore` are
   * beyond retention and removed. The key's session hash expires at the largest `expireAt` given.
   */
  | {
      readonly store: number;
      readonly kind: 'session';
      readonly time: number;
      readonly lowEnd: number;
      readonly highStart: number;
      readonly closeTime: number;
      readonly dropBefore: number;
      readonly expireAt: number;
      readonly op: SessionOp;
    };

/**
 * The ops a session merges in Redis, or the merged value given (`set`, or `delete`: none): a JS
 * aggregator reads first and writes with `expect`.
 */
export type SessionOp =
  | { readonly op: 'add'; readonly by: number | bigint }
  | { readonly op: 'max'; readonly value: number }
  | { readonly op: 'min'; readonly value: number }
  | { readonly op: 'set'; readonly value: string | Uint8Array }
  | { readonly op: 'delete' };

/** A session effect's result. */
export interface SessionResult {
  /** The merged session's bounds (ms, both inclusive). */
  readonly start: number;
  readonly end: number;
  /** Its value after the record (null when late, or deleted by a `delete` op). */
  readonly value: Buffer | null;
  /** The sessions merged away, by (end, start): Kafka Streams forwards a tombstone for each. */
  readonly removed: readonly { readonly start: number; readonly end: number }[];
  /** The merged end was below the close time: nothing changed. */
  readonly late: boolean;
}

/** One record of a key call. */
export interface KeyRecord {
  /** The record's offset in its partition; strictly increasing within a call. */
  readonly offset: number;
  /** Made in order, all or none. */
  readonly effects: readonly Effect[];
  /** 1: the effects' results are kept pending as this record's output (a REEMIT returns them). */
  readonly emit: 0 | 1;
}

/**
 * A key's fence token: the partition and offset of the last record applied to it. A {@link StateStamp}
 * from a read is one (its epoch is not compared).
 */
export interface StoreToken {
  readonly partition: number;
  readonly offset: number;
  /**
   * The key's generation (field `g`): bumped by every writer outside the owner (`redfence reconcile
   * --repair`), so a token read before such a write never matches after it. Absent: none (0).
   */
  readonly generation?: number;
}

/** One script call: every record of one fence key from one partition batch, in offset order. */
export interface KeyCall {
  readonly partition: number;
  /** The partition epoch this owner acquired. */
  readonly epoch: number;
  /** The partition's committed offset (next offset to consume), or -1: pending entries below it are pruned. */
  readonly committedOffset: number;
  /** The fence key (the record's key after grouping). */
  readonly key: string | Uint8Array;
  /**
   * Read-then-write: the token the caller read (null: the key had no state). When the key's token
   * differs, every record is CONFLICT and nothing is written (re-read and try again). Absent: no check.
   */
  readonly expect?: StoreToken | null;
  readonly records: readonly KeyRecord[];
}

/**
 * An effect's result: the value after a `kv`, `window` or `field` effect (null: none; a window effect's:
 * its field's), a note's value, for `final` the window's field the first time (null after that, or when
 * the window holds no value), for `session` a {@link SessionResult}.
 */
export type EffectResult = Buffer | null | SessionResult;

/** Per record: the verdict; with emit 1, on APPLY/REBASE/REEMIT, each effect's result in order. */
export type KeyRecordResult =
  | { readonly verdict: 'APPLY'; readonly offset: number; readonly results?: readonly EffectResult[] }
  | {
      readonly verdict: 'REBASE';
      readonly offset: number;
      readonly previousPartition: number;
      readonly results?: readonly EffectResult[];
    }
  | { readonly verdict: 'SKIP'; readonly offset: number }
  | { readonly verdict: 'REEMIT'; readonly offset: number; readonly results: readonly EffectResult[] }
  | { readonly verdict: 'REEMIT'; readonly offset: number; readonly deadLetter: string }
  | { readonly verdict: 'FENCE'; readonly offset: number; readonly epoch: number }
  | { readonly verdict: 'REJECT'; readonly offset: number; readonly reason: string }
  | { readonly verdict: 'CONFLICT'; readonly offset: number; readonly current: StoreToken | null };
