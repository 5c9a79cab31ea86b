/**
 * The stalled-consumer watchdog. The promise-API consumer has a known failure where it silently stops
 * delivering batches; every interval the watchdog asks {@link watchdogVerdict} (kept pure, so it is
 * tested without a broker) and, on 'recover', seeks the owned partitions back to their committed
 * offsets (a fresh fetch); after repeated failed recoveries it gives up liveness so /livez fails and
 * the orchestrator restarts the instance. It sees the processor only through {@link WatchdogContext}.
 */
import type { KafkaPort } from '../kafka/types.js';
import type { Logger } from '../runtime/logger.js';
import type { OwnedPartition } from './partition-table.js';

export interface WatchdogInput {
  now: number;
  /** When the last batch was delivered (or the partitions were assigned). */
  lastDeliveryAt: number;
  stallMs: number;
  batchInFlight: boolean;
  redisOutage: boolean;
  /**
   * Records between the committed offsets (or the log start, when retention deleted records the group
   * never processed: the fetch starts there) and the high watermarks of the owned partitions.
   */
  lag: number;
  /** Recoveries tried since the last delivery. */
  recoveries: number;
  maxRecoveries: number;
}

export type WatchdogVerdict = 'ok' | 'recover' | 'give-up';

export function watchdogVerdict(i: WatchdogInput): WatchdogVerdict {
  if (i.batchInFlight || i.redisOutage || i.lag <= 0) return 'ok';
  if (i.now - i.lastDeliveryAt < i.stallMs) return 'ok';
  return i.recoveries >= i.maxRecoveries ? 'give-up' : 'recover';
}

export interface WatchdogSettings {
  readonly stallMs: number;
  readonly intervalMs: number;
  readonly maxRecoveries: number;
}

export interface WatchdogContext {
  /** Only a running processor is watched. */
  running(): boolean;
  /** The owned partitions not fenced off (of every topic the runtime reads). */
  partitions(): readonly Pick<OwnedPartition, 'topic' | 'partition' | 'committed'>[];
  /** High watermarks of a topic's partitions. */
  highWatermarks(topic: string): Promise<Map<number, number>>;
  /**
   * Low watermarks (log starts) of a topic's partitions, when the port reads them. A committed
   * offset below its log start is not lag: those records are gone and the fetch starts at the log start,
   * so counting them would "recover" (and finally give up liveness on) a consumer with nothing to read.
   */
  logStarts?(topic: string): Promise<Map<number, number>>;
  /**
   * The consumer's positions (by `topic/partition`), when the port reads them: what lies between a
   * position and the high watermark is what the consumer has yet to hand over. Without them a
   * partition ending in a transaction marker (read_committed never delivers it) reads as lag forever.
   */
  positions?(partitions: readonly Pick<OwnedPartition, 'topic' | 'partition'>[]): Map<string, number>;
  readonly kafka: Pick<KafkaPort, 'seek'>;
  batchInFlight(): boolean;
  redisOutage(): boolean;
  /** Stops reporting liveness; false when it had already stopped. */
  giveUp(): boolean;
  /** Something else to look at on each look while running (a topology's newer pattern matches); never throws. */
  look?(): Promise<void>;
  readonly log: Logger;
}

export class Watchdog {
  readonly #ctx: WatchdogContext;
  readonly #settings: WatchdogSettings;
  #timer: NodeJS.Timeout | undefined;
  #lastDeliveryAt = Date.now();
  #recoveries = 0;

  constructor(ctx: WatchdogContext, settings: WatchdogSettings) {
    this.#ctx = ctx;
    this.#settings = settings;
  }

  start(): void {
    this.#timer ??= setInterval(() => void this.check(), this.#settings.intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** A batch was delivered: the consumer is not stalled. */
  delivered(): void {
    this.#lastDeliveryAt = Date.now();
    this.#recoveries = 0;
  }

  /** Partitions were assigned: their first batch is given `stallMs` to arrive. */
  assigned(): void {
    this.#lastDeliveryAt = Date.now();
  }

  async check(): Promise<void> {
    const ctx = this.#ctx;
    const partitions = ctx.partitions();
    if (ctx.running()) await ctx.look?.();
    if (!ctx.running() || partitions.length === 0) return;
    try {
      let lag = 0;
      const positions = ctx.positions?.(partitions);
      for (const topic of new Set(partitions.map((p) => p.topic))) {
        const [ends, starts] = await Promise.all([
          ctx.highWatermarks(topic),
          // a failed read of the log starts leaves the committed offsets as the lag's start
          ctx.logStarts?.(topic).catch(() => undefined),
        ]);
        for (const p of partitions) {
          if (p.topic !== topic) continue;
          const at = positions?.get(`${p.topic}/${p.partition}`) ?? 0;
          const from = Math.max(0, p.committed, starts?.get(p.partition) ?? 0, at);
          lag += Math.max(0, (ends.get(p.partition) ?? 0) - from);
        }
      }
      const verdict = watchdogVerdict({
        now: Date.now(),
        lastDeliveryAt: this.#lastDeliveryAt,
        stallMs: this.#settings.stallMs,
        batchInFlight: ctx.batchInFlight(),
        redisOutage: ctx.redisOutage(),
        lag,
        recoveries: this.#recoveries,
        maxRecoveries: this.#settings.maxRecoveries,
      });
      if (verdict === 'recover') {
        this.#recoveries++;
        ctx.log.warn(
          { lag, recoveries: this.#recoveries },
          'consumer stalled with lag: seeking owned partitions to their committed offsets',
        );
        // never committed: offset 0, which auto.offset.reset=earliest maps to the log start
        for (const p of ctx.partitions())
          ctx.kafka.seek({ topic: p.topic, partition: p.partition }, Math.max(0, p.committed));
        this.#lastDeliveryAt = Date.now();
      } else if (verdict === 'give-up' && ctx.giveUp()) {
        ctx.log.error({ lag }, 'consumer stays stalled after recoveries: reporting not live');
      }
    } catch (err) {
      ctx.log.warn({ err: (err as Error).message }, 'watchdog check failed');
    }
  }
}
