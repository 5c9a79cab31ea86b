/**
 * The model's session-window aggregation (Kafka Streams' KStreamSessionWindowAggregate), one instance per
 * task, caching off: a record bridging sessions merges them; each merged-away session is forwarded as a
 * tombstone (timestamp: its end) before the merged session's new value (timestamp: its end).
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
  segmentInterval,
  storeKey,
} from './model-io.js';

interface Session extends Stored {
  readonly keyBytes: Buffer;
  readonly keyId: string;
  readonly start: number;
  readonly end: number;
}

export class SessionAggregate {
  private streamTime = NO_TIMESTAMP;
  private lastEmitCloseTime = NO_TIMESTAMP;
  /** The store's stream time (the largest session end it was given) and the one of its last put (segment clean-up). */
  private storeTime = NO_TIMESTAMP;
  private cleanupTime = NO_TIMESTAMP;
  private readonly sessions = new KeyedEntries<Session>();
  private readonly gap: number;
  private readonly grace: number;

  constructor(private readonly io: AggIO) {
    const w = io.node.window;
    if (w === null || w.kind !== 'session') throw new TypeError('not a session window');
    this.gap = w.inactivityGapMs;
    this.grace = w.graceMs;
  }

  private get retention(): number {
    return this.gap + this.grace;
  }

  process(r: ModelRecord): void {
    const p = this.io.node;
    if (r.key === null) {
      this.io.drop('null-key');
      return;
    }
    const ts = r.timestamp;
    this.streamTime = Math.max(this.streamTime, ts);
    const closeTime = this.streamTime - this.grace - this.gap;
    const key = storeKey(p, r.key);
    // findSessions(key, ts - gap, ts + gap): sessions ending at or after ts - gap and starting at or before
    // ts + gap, by (end, start); the key-first store hides sessions older than its retention.
    const from = Math.max(ts - this.gap, this.storeTime - this.retention + 1);
    const found = this.sessions
      .ofKey(key.id)
      .filter((s) => s.end >= from && s.start <= ts + this.gap)
      .sort((a, b) => a.end - b.end || a.start - b.start);
    let agg = p.initializer();
    let start = ts;
    let end = ts;
    for (const s of found) {
      agg = (p.merger ?? ((_k, a) => a))(r.key, agg, decodeAgg(p, s));
      start = Math.min(start, s.start);
      end = Math.max(end, s.end);
    }
    if (end < closeTime) {
      this.io.late([{ start, end }]);
    } else {
      if (start !== ts || end !== ts) {
        for (const s of found) {
          this.sessions.delete(s.keyId, sessionId(s.keyId, s.start, s.end));
          this.storeTime = Math.max(this.storeTime, s.end);
          if (p.emit === 'update')
            this.io.forward({ key: r.key, start: s.start, end: s.end }, null, s.end, true);
        }
      }
      agg = p.aggregator(r.key, r.value, agg);
      const stored = encodeAgg(p, agg, end);
      const id = sessionId(key.id, start, end);
      if (stored === null) this.sessions.delete(key.id, id);
      else this.sessions.set(key.id, id, { ...stored, keyBytes: key.bytes, keyId: key.id, start, end });
      this.storeTime = Math.max(this.storeTime, end);
      this.cleanupTime = this.storeTime;
      if (p.emit === 'update') this.io.forward({ key: r.key, start, end }, agg ?? null, end, true);
    }
    if (p.emit === 'final') this.emitFinal(closeTime);
    this.prune();
  }

  /** A tick (src/topology/tick.ts): a record at `timestamp` that joins no session; stream time moves. */
  tick(timestamp: number): void {
    this.streamTime = Math.max(this.streamTime, timestamp);
    if (this.io.node.emit === 'final') this.emitFinal(this.streamTime - this.grace - this.gap);
    this.prune();
  }

  /** Sessions no lookup (end below the retention bound) and no final emission (a dropped segment) can reach. */
  private prune(): void {
    const interval = segmentInterval(this.retention);
    const minLiveSegment = Math.trunc((this.cleanupTime - this.retention) / interval);
    const bound = this.storeTime - this.retention + 1;
    const final = this.io.node.emit === 'final';
    this.sessions.prune(this.storeTime, this.retention, (s) =>
      final ? Math.floor(s.end / interval) < minLiveSegment : s.end < bound,
    );
  }

  /** Sessions whose end is before the close time, once, by (end, start, key bytes), timestamp their end. */
  private emitFinal(closeTime: number): void {
    if (this.lastEmitCloseTime !== NO_TIMESTAMP && this.lastEmitCloseTime >= closeTime) return;
    const upper = closeTime - 1;
    if (upper < 0) return;
    const lower = Math.max(0, this.lastEmitCloseTime);
    if (upper < lower) return;
    // The time-ordered session store drops whole segments older than its retention (at a put).
    const interval = segmentInterval(this.retention);
    const minLiveSegment = Math.trunc((this.cleanupTime - this.retention) / interval);
    const due = this.sessions
      .all()
      .filter((s) => s.end >= lower && s.end <= upper && Math.floor(s.end / interval) >= minLiveSegment)
      .sort((a, b) => a.end - b.end || a.start - b.start || compareBytes(a.keyBytes, b.keyBytes));
    const p = this.io.node;
    for (const s of due) {
      this.io.forward({ key: decodeKey(p, s.keyBytes), start: s.start, end: s.end }, decodeAgg(p, s), s.end);
    }
    this.lastEmitCloseTime = closeTime;
  }
}

function sessionId(keyId: string, start: number, end: number): string {
  return `${keyId}@${start}@${end}`;
}
