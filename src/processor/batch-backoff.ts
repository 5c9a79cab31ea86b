/**
 * Backoff for a partition whose batch failed. The Kafka port delivers a failed batch again from its first
 * record at once, so a failure that repeats would spin on its partition, a warning per delivery: a store
 * serde that cannot read its state (RF_TOPOLOGY_NODE_THREW), a script error, Redis refusing writes (an
 * OOM answer at maxmemory with `noeviction`). A Redis outage is not one of them (RedisGuard pauses every
 * partition and retries the call), nor is a FENCE (the partition stays paused until it is revoked).
 *
 * The failed partition is paused instead and resumed after an exponential delay with jitter (100 ms,
 * doubling, capped at 30 s and at half the watchdog's stall time, so a partition that keeps failing is
 * still delivered often enough not to look stalled); the batch is then delivered again from its first
 * record, as before. A success resets the partition's count; a revocation forgets it. Other partitions
 * go on meanwhile. Nothing of a failed batch was produced or committed, so waiting loses nothing.
 */
import { type KafkaPort, type TopicPartition, tpKey } from '../kafka/types.js';
import { backoffMs } from '../runtime/backoff.js';
import type { Logger } from '../runtime/logger.js';

export interface BatchBackoffContext {
  readonly kafka: Pick<KafkaPort, 'pause' | 'resume'>;
  /** Owned now and not fenced off: only then is a partition resumed when its delay ends. */
  owned(tp: TopicPartition): boolean;
  /** During a Redis outage every partition stays paused (the outage's end resumes them). */
  outage(): boolean;
  /** The delay's cap (ms); the runtime passes min(30 s, the watchdog's stall time / 2). */
  readonly maxMs: number;
}

/** The first delay (ms): a failure that does not repeat costs about this much. */
export const BACKOFF_BASE_MS = 100;
/** The delay's cap (ms) unless the watchdog's stall time asks for less. */
export const BACKOFF_MAX_MS = 30_000;

interface Waiting {
  failures: number;
  timer: NodeJS.Timeout | undefined;
}

const keyOf = (tp: TopicPartition) => tpKey(tp.topic, tp.partition);

export class BatchBackoff {
  readonly #ctx: BatchBackoffContext;
  readonly #parts = new Map<string, Waiting>();

  constructor(ctx: BatchBackoffContext) {
    this.#ctx = ctx;
  }

  /** A batch of `tp` failed: pauses it and returns how long until it is resumed (ms), and its failures in a row. */
  failed(tp: TopicPartition): { retryInMs: number; failures: number } {
    const k = keyOf(tp);
    const w = this.#parts.get(k) ?? { failures: 0, timer: undefined };
    this.#parts.set(k, w);
    w.failures++;
    clearTimeout(w.timer);
    const retryInMs = backoffMs(w.failures - 1, BACKOFF_BASE_MS, Math.max(BACKOFF_BASE_MS, this.#ctx.maxMs));
    this.#ctx.kafka.pause([tp]);
    w.timer = setTimeout(() => {
      w.timer = undefined;
      if (this.#parts.get(k) !== w || !this.#ctx.owned(tp) || this.#ctx.outage()) return;
      this.#ctx.kafka.resume([tp]);
    }, retryInMs);
    w.timer.unref();
    return { retryInMs, failures: w.failures };
  }

  /** A batch of `tp` succeeded: its next failure starts from the first delay again. */
  succeeded(tp: TopicPartition): void {
    if (this.#parts.size === 0) return;
    const k = keyOf(tp);
    const w = this.#parts.get(k);
    if (w !== undefined && w.timer === undefined) this.#parts.delete(k);
  }

  /** Waiting for its delay to end (kept paused by a Redis outage's end). */
  waiting(tp: TopicPartition): boolean {
    return this.#parts.get(keyOf(tp))?.timer !== undefined;
  }

  /** Those of `tps` not waiting for their delay to end. */
  notWaiting<T extends TopicPartition>(tps: readonly T[]): T[] {
    return this.#parts.size === 0 ? [...tps] : tps.filter((tp) => !this.waiting(tp));
  }

  /** Revoked: forgotten (a new assignment starts afresh and resumes it). */
  forget(tp: TopicPartition): void {
    const k = keyOf(tp);
    clearTimeout(this.#parts.get(k)?.timer);
    this.#parts.delete(k);
  }

  /** Closing: no resume after this. */
  stop(): void {
    for (const w of this.#parts.values()) clearTimeout(w.timer);
    this.#parts.clear();
  }
}

/**
 * The backoff of a processor or topology processor: `owned` is its partition table's (not fenced), the
 * cap half the watchdog's stall time when the watchdog is on.
 */
export function batchBackoffOf(
  watchdog: { readonly stallMs: number } | undefined,
  kafka: BatchBackoffContext['kafka'],
  table: { get(topic: string, partition: number): { readonly fenced: boolean } | undefined },
  outage: () => boolean,
): BatchBackoff {
  return new BatchBackoff({
    kafka,
    owned: (tp) => table.get(tp.topic, tp.partition)?.fenced === false,
    outage,
    maxMs: Math.min(
      BACKOFF_MAX_MS,
      watchdog === undefined ? BACKOFF_MAX_MS : Math.floor(watchdog.stallMs / 2),
    ),
  });
}

/** Logs a failed batch with when it is delivered again, and pauses its partition until then. */
export function batchFailed(
  backoff: BatchBackoff,
  log: Logger,
  tp: TopicPartition,
  err: unknown,
  what: 'batch' | 'topology batch',
): void {
  const { retryInMs, failures } = backoff.failed(tp);
  const e = err as { code?: unknown; message?: unknown };
  log.warn(
    { topic: tp.topic, partition: tp.partition, code: e?.code, err: String(e?.message), failures, retryInMs },
    `${what} failed: it is delivered again from its first record in ${retryInMs} ms`,
  );
}
