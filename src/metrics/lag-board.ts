/**
 * A processor's own view of its lag (behind `GET /status` and `redfence_consumer_lag_seconds`): the
 * partitions this instance owns, a sample at each of their commits (the committed offset, the high
 * watermark the consumer reported with the batch, the timestamp of the batch's last record), evaluated
 * by the same rules as `redfence lag` (lag.ts). No Kafka call: what the processor knows already.
 */
import { evaluateLag, type LagEvaluation, type LagStatus, LagWindow, worstStatus } from './lag.js';

export interface PartitionProgress {
  /** The next offset the group will read (what was committed). */
  committed: number;
  /** The partition's end as the consumer last saw it (its high watermark). */
  end: number;
  /** Timestamp (ms since the epoch) of the last committed record. */
  lastRecordTime?: number;
}

export interface LagBoardReport {
  status: LagStatus;
  at: string;
  windowMs: number;
  partitions: (LagEvaluation & { topic: string; partition: number })[];
}

export class LagBoard {
  readonly #windowMs: number;
  readonly #window: LagWindow;
  readonly #lastTime = new Map<string, number>();

  /** `windowMs`: how far back the rates look and how long without a commit makes a partition STALL. */
  constructor(windowMs = 60_000) {
    this.#windowMs = windowMs;
    this.#window = new LagWindow(windowMs);
  }

  /** A commit of an owned partition. */
  record(topic: string, partition: number, p: PartitionProgress, at: number = Date.now()): void {
    this.#window.add(topic, partition, { at, committed: p.committed, end: p.end, owned: true });
    if (p.lastRecordTime !== undefined && Number.isFinite(p.lastRecordTime))
      this.#lastTime.set(`${topic}:${partition}`, p.lastRecordTime);
  }

  /** A partition no longer owned. */
  forget(topic: string, partition: number): void {
    this.#window.forget(topic, partition);
    this.#lastTime.delete(`${topic}:${partition}`);
  }

  /**
   * Each owned partition's status. The time lag is the age of the last committed record while there
   * is lag: the next unprocessed record is newer, so this over-states it by at most the gap between
   * the two records (the processor does not fetch the next record just to read its timestamp).
   */
  report(now: number = Date.now()): LagBoardReport {
    const partitions = this.#window
      .view(now)
      .map(({ topic, partition, window }) => {
        const t = this.#lastTime.get(`${topic}:${partition}`);
        const last = window.at(-1);
        const w =
          t === undefined || last === undefined
            ? window
            : [...window.slice(0, -1), { ...last, nextRecordTime: t }];
        return { topic, partition, ...evaluateLag(w, {}, now) };
      })
      .sort((a, b) => (a.topic === b.topic ? a.partition - b.partition : a.topic < b.topic ? -1 : 1));
    return {
      status: worstStatus(partitions.map((p) => p.status)),
      at: new Date(now).toISOString(),
      windowMs: this.#windowMs,
      partitions,
    };
  }
}
