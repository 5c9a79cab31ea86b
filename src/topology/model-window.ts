/**
 * The model's unwindowed aggregation (Kafka Streams' KStreamAggregate / KStreamReduce) and its time-window
 * aggregation, tumbling and hopping (KStreamWindowAggregate with AbstractKStreamTimeWindowAggregateProcessor),
 * one instance per task, caching off.
 */
import {
  type AggIO,
  compareBytes,
  decodeAgg,
  decodeKey,
  encodeAgg,
  KeyedEntries,
  type ModelRecord,
  NO_TIMESTAMP,
  type Stored,
  storeKey,
} from './model-io.js';
import { timeWindowsFor } from './windows.js';

/** KStreamAggregate: null keys and null values dropped; the aggregate's timestamp is the max of its records'. */
export class TableAggregate {
  private readonly store = new Map<string, Stored>();

  constructor(private readonly io: AggIO) {}

  process(r: ModelRecord): void {
    const p = this.io.node;
    if (r.key === null) {
      this.io.drop('null-key');
      return;
    }
    if (r.value === null) {
      this.io.drop('null-value');
      return;
    }
    const { id } = storeKey(p, r.key);
    const old = this.store.get(id);
    const oldAgg = old === undefined ? p.initializer() : decodeAgg(p, old);
    const timestamp = old === undefined ? r.timestamp : Math.max(r.timestamp, old.timestamp);
    const newAgg = p.aggregator(r.key, r.value, oldAgg);
    const stored = encodeAgg(p, newAgg, timestamp);
    if (stored === null) this.store.delete(id);
    else this.store.set(id, stored);
    this.io.forward(r.key, newAgg ?? null, timestamp);
  }
}

interface WindowEntry extends Stored {
  readonly keyBytes: Buffer;
  readonly start: number;
}

/** Tumbling and hopping windows: `[start, start + size)`, late when `end <= streamTime - grace`. */
export class TimeWindowAggregate {
  private streamTime = NO_TIMESTAMP;
  private lastEmitCloseTime = NO_TIMESTAMP;
  /** The store's own stream time: the largest window start it was given (its retention runs on it). */
  private storeTime = NO_TIMESTAMP;
  private readonly store = new KeyedEntries<WindowEntry>();
  private readonly size: number;
  private readonly advance: number;
  private readonly grace: number;

  constructor(private readonly io: AggIO) {
    const w = io.node.window;
    if (w === null || (w.kind !== 'tumbling' && w.kind !== 'hopping'))
      throw new TypeError('not a time window');
    this.size = w.sizeMs;
    this.advance = w.advanceMs;
    this.grace = w.graceMs;
  }

  process(r: ModelRecord): void {
    const p = this.io.node;
    if (r.key === null) {
      this.io.drop('null-key');
      return;
    }
    this.streamTime = Math.max(this.streamTime, r.timestamp);
    const closeTime = this.streamTime - this.grace;
    const key = storeKey(p, r.key);
    const missed = [];
    for (const start of timeWindowsFor(this, r.timestamp)) {
      const end = start + this.size;
      if (end <= closeTime) {
        missed.push({ start, end });
        continue;
      }
      const id = `${key.id}@${start}`;
      const old = this.store.ofKey(key.id).find((w) => w.start === start);
      const oldAgg = old === undefined ? p.initializer() : decodeAgg(p, old);
      const timestamp = old === undefined ? r.timestamp : Math.max(r.timestamp, old.timestamp);
      const newAgg = p.aggregator(r.key, r.value, oldAgg);
      const stored = encodeAgg(p, newAgg, timestamp);
      if (stored === null) this.store.delete(key.id, id);
      else this.store.set(key.id, id, { ...stored, keyBytes: key.bytes, start });
      this.storeTime = Math.max(this.storeTime, start);
      if (p.emit === 'update') this.io.forward({ key: r.key, start, end }, newAgg ?? null, timestamp);
    }
    if (missed.length > 0) this.io.late(missed);
    this.closeUpTo(closeTime);
  }

  /**
   * A tick (src/topology/tick.ts): a record at `timestamp` that updates no window. Stream time moves
   * to it and, with emit('final'), the windows it closes are emitted as a record's closes are.
   */
  tick(timestamp: number): void {
    this.streamTime = Math.max(this.streamTime, timestamp);
    this.closeUpTo(this.streamTime - this.grace);
  }

  private closeUpTo(closeTime: number): void {
    if (this.io.node.emit === 'final') this.emitFinal(closeTime);
    // Windows below the retention bound are out of every fetch's reach (update: only open windows are read).
    const bound = this.storeTime - (this.size + this.grace);
    this.store.prune(this.storeTime, this.size + this.grace, (w) => w.start < bound);
  }

  /** Every window whose end passed the close time, once, by (start, key bytes); emit interval 0. */
  private emitFinal(closeTime: number): void {
    if (this.lastEmitCloseTime !== NO_TIMESTAMP && this.lastEmitCloseTime >= closeTime) return;
    const upper = closeTime - this.size;
    if (upper < 0) return;
    const last = this.lastEmitCloseTime;
    const lower = last === NO_TIMESTAMP ? 0 : Math.max(0, last - this.size) + 1;
    if (last !== NO_TIMESTAMP) {
      const closing = timeWindowsFor(this, upper).join();
      if (closing === timeWindowsFor(this, lower - 1).join()) return;
    }
    // The time-ordered store hides windows older than its retention (size + grace) from a range fetch.
    const from = Math.max(lower, this.storeTime - (this.size + this.grace));
    const due = this.store
      .all()
      .filter((w) => w.start >= from && w.start <= upper)
      .sort((a, b) => a.start - b.start || compareBytes(a.keyBytes, b.keyBytes));
    const p = this.io.node;
    for (const w of due) {
      const k = decodeKey(p, w.keyBytes);
      this.io.forward({ key: k, start: w.start, end: w.start + this.size }, decodeAgg(p, w), w.timestamp);
    }
    this.lastEmitCloseTime = closeTime;
  }

  get sizeMs(): number {
    return this.size;
  }
  get advanceMs(): number {
    return this.advance;
  }
}
