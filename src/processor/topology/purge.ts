/**
 * Purging a topology's repartition topics, as Kafka Streams does (`repartition.purge.interval.ms`):
 * after a commit of a repartition partition, at most once per interval, its records below the committed
 * offset are deleted with DeleteRecords. Safe because the group is the topic's only reader and a replay
 * never starts below its committed offset (in exactly-once mode the commit is the transaction's, seen
 * here only once it committed). A failed delete is logged and tried again after a later commit; the
 * records stay until then. A port without `deleteRecords` never purges. With snapshots, never below the
 * partition's last snapshot marker (`floor`): `redfence rebuild` replays the topic from there.
 */
import { type KafkaPort, tpKey } from '../../kafka/types.js';
import type { Logger } from '../../runtime/logger.js';

export interface PurgeOptions {
  readonly port: Pick<KafkaPort, 'deleteRecords'>;
  /** The repartition topics (the input and output topics are never purged). */
  readonly topics: ReadonlySet<string>;
  /** Least time between two deletes of one partition; 0: after every commit. */
  readonly intervalMs: number;
  /**
   * With snapshots: the offset of the partition's last snapshot marker (a rebuild replays from it),
   * below which alone records are deleted; undefined: none yet, nothing is deleted.
   */
  readonly floor?: ((topic: string, partition: number) => number | undefined) | undefined;
  readonly log: Logger;
}

export class RepartitionPurger {
  readonly #o: PurgeOptions;
  /** By partition: when its last delete started. */
  readonly #last = new Map<string, number>();
  readonly #inFlight = new Map<string, Promise<void>>();
  /** By partition: the newest committed offset seen while a delete was in flight (tried when it ends). */
  readonly #wanted = new Map<string, number>();
  /** The first purge of a partition waits an interval from here (as Kafka Streams' from its start). */
  readonly #started = Date.now();
  #purged = 0;

  constructor(o: PurgeOptions) {
    this.#o = o;
  }

  /** How many deletes succeeded (one per partition and purge). */
  get purged(): number {
    return this.#purged;
  }

  /** After a commit of `topic`/`partition` reached `offset` (the next offset to consume). */
  committed(topic: string, partition: number, committed: number): void {
    const { port, topics, intervalMs, log, floor } = this.#o;
    const offset = floor === undefined ? committed : Math.min(committed, floor(topic, partition) ?? 0);
    if (!topics.has(topic) || port.deleteRecords === undefined || offset <= 0) return;
    const k = tpKey(topic, partition);
    const now = Date.now();
    if (this.#inFlight.has(k)) {
      this.#wanted.set(k, Math.max(offset, this.#wanted.get(k) ?? 0));
      return;
    }
    if (now - (this.#last.get(k) ?? this.#started) < intervalMs) return;
    this.#last.set(k, now);
    this.#wanted.delete(k);
    const done = port
      .deleteRecords(topic, [{ partition, offset }])
      .then(
        () => {
          this.#purged++;
        },
        (err) =>
          log.warn(
            {
              topic,
              partition,
              offset,
              err: (err as Error)?.message,
              code: (err as { code?: unknown })?.code,
            },
            'repartition purge failed',
          ),
      )
      .finally(() => {
        this.#inFlight.delete(k);
        const wanted = this.#wanted.get(k);
        if (wanted !== undefined && wanted > offset) this.committed(topic, partition, wanted);
      });
    this.#inFlight.set(k, done);
  }

  /** Waits for the deletes in flight (before the port stops). */
  async settle(): Promise<void> {
    // a delete ending may start the next one (a newer commit came meanwhile)
    while (this.#inFlight.size > 0) await Promise.all(this.#inFlight.values());
  }
}
