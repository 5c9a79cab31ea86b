/**
 * The Redis guard: every Redis call of the cycle runs through {@link RedisGuard.step}. A retriable Redis
 * error (RF_REDIS_UNAVAILABLE: connection lost, LOADING, failover, ...) starts an outage: every owned
 * partition is paused, readiness and the outage metric say so, and the call is retried with backoff
 * until it succeeds; then consumption resumes. Offsets stay where they are throughout: nothing is
 * skipped and nothing is committed. Any other error (a script error, a compare-and-set conflict) is
 * passed on to the caller. Closing (the signal) ends the retries.
 *
 * An idle processor makes no Redis calls, so it would notice an outage (and say so on /readyz and in
 * `redfence_redis_outage`) only with its next batch: {@link RedisGuard.probeIfIdle} sends a PING through
 * the same step when nothing else has called Redis for a while, so an outage and its end show while idle.
 */
import { RedfenceError } from '../errors/index.js';
import { wrapRedisError } from '../fence/script-runner.js';
import type { KafkaPort, TopicPartition } from '../kafka/types.js';
import type { HealthState, RedfenceMetrics } from '../metrics/index.js';
import { backoffMs, delay } from '../runtime/backoff.js';
import type { Logger } from '../runtime/logger.js';

export interface RedisGuardContext {
  readonly kafka: Pick<KafkaPort, 'pause' | 'resume'>;
  /** The partitions to pause and resume (every owned one). */
  owned(): TopicPartition[];
  readonly metrics: RedfenceMetrics | undefined;
  readonly health: HealthState | undefined;
  readonly log: Logger;
  readonly signal: AbortSignal;
}

/** True for errors that mean Redis is (for now) not reachable; a compare-and-set conflict is not one. */
export function isRedisOutage(err: unknown): boolean {
  return RedfenceError.isRetriable(err) && !RedfenceError.is(err, 'RF_CAS_CONFLICT');
}

export class RedisGuard {
  readonly #ctx: RedisGuardContext;
  #outage = false;
  #lastCallAt = Date.now();
  #probing = false;

  constructor(ctx: RedisGuardContext) {
    this.#ctx = ctx;
  }

  get outage(): boolean {
    return this.#outage;
  }

  /** Runs a Redis call until it succeeds; while Redis is unavailable every owned partition is paused. */
  async step<T>(what: string, fn: () => Promise<T>): Promise<T> {
    const ctx = this.#ctx;
    for (let attempt = 0; ; attempt++) {
      this.#lastCallAt = Date.now();
      try {
        const started = performance.now();
        const out = await fn();
        ctx.metrics?.redisCommand(what, (performance.now() - started) / 1000);
        if (this.#outage) {
          this.#outage = false;
          ctx.kafka.resume(ctx.owned());
          ctx.metrics?.redisOutage(false);
          ctx.health?.setReady('redis', true);
          ctx.log.info({ what }, 'Redis is back: resumed');
        }
        return out;
      } catch (err) {
        if (!isRedisOutage(err) || ctx.signal.aborted) throw err;
        if (!this.#outage) {
          this.#outage = true;
          ctx.kafka.pause(ctx.owned());
          ctx.metrics?.redisOutage(true);
          ctx.health?.setReady('redis', false);
          ctx.log.warn(
            { what, err: (err as Error).message },
            'Redis unavailable: paused consumption, offsets stay put',
          );
        }
        await delay(backoffMs(attempt, 200, 5000), ctx.signal);
      }
    }
  }

  /**
   * A PING through {@link RedisGuard.step} when no Redis call has started for `idleMs` (one at a time;
   * none during an outage, whose own retries already watch for its end). Its failure is the outage's.
   */
  probeIfIdle(ping: () => Promise<unknown>, idleMs: number): void {
    if (this.#probing || this.#outage || this.#ctx.signal.aborted) return;
    if (Date.now() - this.#lastCallAt < idleMs) return;
    this.#probing = true;
    void this.step('ping', () =>
      ping().catch((err: unknown) => {
        throw wrapRedisError('PING', err);
      }),
    )
      .catch(() => undefined)
      .finally(() => {
        this.#probing = false;
      });
  }
}
