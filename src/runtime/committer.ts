/**
 * Offset commits of the runtimes that finish records out of order and commit each partition only up to
 * a point they track: the handler (src/handler/handler.ts, its tracker's contiguous point) and the
 * invalidation consumer (src/invalidation/consumer.ts, its done point). One commit at a time, every
 * interval and when partitions go; a partition is committed only where its point moved; a failed commit
 * is logged and tried again at the next tick (nothing is lost: the point stays where it was); a fatal
 * Kafka error (RF_KAFKA_FATAL) is handed to `onFatal`.
 */
import { RedfenceError } from '../errors/index.js';
import type { KafkaPort, TopicPartition } from '../kafka/types.js';
import { errorShape, type Logger } from './logger.js';

export interface CommitPart {
  readonly tp: TopicPartition;
  /** The last offset committed (-1: none); raised here after each commit. */
  committed: number;
}

export interface CommitterOptions<P extends CommitPart> {
  kafka: Pick<KafkaPort, 'commit'>;
  log: Logger;
  /** The next offset of the partition that is safe to commit (-1: none yet). */
  pointOf(p: P): number;
  /** The partitions an interval commit covers. */
  live(): readonly P[];
  onCommitted(): void;
  onFatal(err: Error): void;
}

export class Committer<P extends CommitPart> {
  readonly #o: CommitterOptions<P>;
  #chain: Promise<void> = Promise.resolve();
  #timer: NodeJS.Timeout | undefined;
  #ticking = false;

  constructor(o: CommitterOptions<P>) {
    this.#o = o;
  }

  /**
   * Commits `live()` every `intervalMs`; `onTick` runs at each tick. A commit still running at the next
   * tick (coordinator away) is not queued up behind itself.
   */
  start(intervalMs: number, onTick?: () => void): void {
    this.stop();
    this.#timer = setInterval(() => {
      onTick?.();
      if (this.#ticking) return;
      this.#ticking = true;
      void this.commit().finally(() => {
        this.#ticking = false;
      });
    }, intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Commits the given partitions (a revocation, close: even though they are stopped), else `live()`. */
  commit(only?: readonly P[]): Promise<void> {
    const next = this.#chain.then(async () => {
      const due = (only ?? this.#o.live())
        .map((p) => ({ p, offset: this.#o.pointOf(p) }))
        .filter((x) => x.offset >= 0 && x.offset > x.p.committed);
      if (due.length === 0) return;
      try {
        await this.#o.kafka.commit(due.map((x) => ({ ...x.p.tp, offset: x.offset })));
        for (const x of due) x.p.committed = Math.max(x.p.committed, x.offset);
        this.#o.onCommitted();
      } catch (err) {
        this.#o.log.warn(errorShape(err), 'offset commit failed: retried at the next interval');
        if (RedfenceError.is(err, 'RF_KAFKA_FATAL') || RedfenceError.is(err, 'RF_KAFKA_AUTH'))
          this.#o.onFatal(err);
      }
    });
    this.#chain = next.catch(() => undefined);
    return next;
  }
}
