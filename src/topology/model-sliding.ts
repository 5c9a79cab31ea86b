/**
 * The model's sliding-window aggregation (Kafka Streams' KStreamSlidingWindowAggregate, the reverse-fetch
 * path, which its RocksDB stores take), one instance per task, caching off: the algorithm itself is
 * sliding.ts (shared with the Redis executor); here the store, its retention and emit-final.
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
  storeKey,
} from './model-io.js';
import {
  type SlideSpec,
  type SlideWindow,
  slide,
  slidePruneBelow,
  slideRange,
  slideVisibleFrom,
  slidingLate,
  slidingRetention,
} from './sliding.js';

interface Entry {
  readonly keyBytes: Buffer;
  readonly keyId: string;
  readonly start: number;
  readonly bytes: Buffer;
  readonly timestamp: number;
}

export class SlidingAggregate {
  private streamTime = NO_TIMESTAMP;
  private lastEmitCloseTime = NO_TIMESTAMP;
  private storeTime = NO_TIMESTAMP;
  private readonly store = new KeyedEntries<Entry>();
  private readonly spec: SlideSpec;

  constructor(private readonly io: AggIO) {
    const w = io.node.window;
    if (w === null || w.kind !== 'sliding') throw new TypeError('not a sliding window');
    this.spec = w;
  }

  process(r: ModelRecord): void {
    if (r.key === null) {
      this.io.drop('null-key');
      return;
    }
    if (r.value === null) {
      this.io.drop('null-value');
      return;
    }
    this.streamTime = Math.max(this.streamTime, r.timestamp);
    const closeTime = this.streamTime - this.spec.graceMs;
    const late = slidingLate(this.spec, r.timestamp, closeTime);
    if (late !== null) {
      // Kafka Streams emits no final results for such a record.
      this.io.late([late]);
      return;
    }
    const key = storeKey(this.io.node, r.key);
    const [from, to] = slideRange(this.spec, r.timestamp);
    const p = this.io.node;
    const missed = slide(this.spec, r.timestamp, closeTime, this.fetch(key.id, from, to), {
      aggregate: (old) => p.aggregator(r.key, r.value, old),
      initial: () => p.initializer(),
      put: (start, value, timestamp) => this.put(r.key, key, start, value, timestamp),
    });
    if (missed.length > 0) this.io.late(missed);
    this.closeUpTo(r.timestamp, closeTime);
  }

  /**
   * A tick (src/topology/tick.ts): a record at `timestamp` that is in no window (never late as a whole);
   * stream time moves and, with emit('final'), the windows it closes are emitted as a record's are.
   */
  tick(timestamp: number): void {
    this.streamTime = Math.max(this.streamTime, timestamp);
    this.closeUpTo(timestamp, this.streamTime - this.spec.graceMs);
  }

  private closeUpTo(timestamp: number, closeTime: number): void {
    if (timestamp < this.spec.timeDifferenceMs) return; // processEarly: no final results checked
    if (this.io.node.emit === 'final') this.emitFinal(closeTime);
    // Windows below the retention bound (both stores' lowest) are out of every fetch's reach.
    const bound = slidePruneBelow(this.spec, this.storeTime);
    this.store.prune(this.storeTime, slidingRetention(this.spec), (e) => e.start < bound);
  }

  /** The key's windows with start in [from, to], ascending, as the store shows them (retention). */
  private fetch(keyId: string, from: number, to: number): SlideWindow[] {
    const p = this.io.node;
    const actualFrom = Math.max(from, slideVisibleFrom(this.spec, this.storeTime, p.emit));
    return this.store
      .ofKey(keyId)
      .filter((e) => e.start >= actualFrom && e.start <= to)
      .sort((a, b) => a.start - b.start)
      .map((e) => ({ start: e.start, agg: { value: decodeAgg(p, e), timestamp: e.timestamp } }));
  }

  private put(
    recordKey: unknown,
    key: { bytes: Buffer; id: string },
    start: number,
    value: unknown,
    timestamp: number,
  ): void {
    const p = this.io.node;
    const id = `${key.id}@${start}`;
    const stored = encodeAgg(p, value, timestamp);
    if (stored === null) this.store.delete(key.id, id);
    else this.store.set(key.id, id, { ...stored, keyBytes: key.bytes, keyId: key.id, start });
    this.storeTime = Math.max(this.storeTime, start);
    if (p.emit === 'update')
      this.io.forward(
        { key: recordKey, start, end: start + this.spec.timeDifferenceMs },
        value ?? null,
        timestamp,
      );
  }

  /** Windows whose end is before the close time, once, by (start, key bytes), timestamp their max record's. */
  private emitFinal(closeTime: number): void {
    if (this.lastEmitCloseTime !== NO_TIMESTAMP && this.lastEmitCloseTime >= closeTime) return;
    const d = this.spec.timeDifferenceMs;
    const upper = closeTime - d - 1;
    if (upper < 0) return;
    const last = this.lastEmitCloseTime;
    const lower = last === NO_TIMESTAMP ? 0 : Math.max(0, last - d);
    const from = Math.max(lower, slideVisibleFrom(this.spec, this.storeTime, 'final'));
    const due = this.store
      .all()
      .filter((e) => e.start >= from && e.start <= upper)
      .sort((a, b) => a.start - b.start || compareBytes(a.keyBytes, b.keyBytes));
    const p = this.io.node;
    for (const e of due) {
      const key = decodeKey(p, e.keyBytes);
      this.io.forward({ key, start: e.start, end: e.start + d }, decodeAgg(p, e), e.timestamp);
    }
    this.lastEmitCloseTime = closeTime;
  }
}
