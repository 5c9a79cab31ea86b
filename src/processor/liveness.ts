/**
 * Liveness for /livez: progress is marked every second while no batch is in flight, and after every
 * batch that went through; a batch stuck in flight stops the marks. Once given up (a fatal Kafka
 * error, or the watchdog failing to recover a stalled consumer) the ticker marks nothing, so the
 * orchestrator restarts the instance.
 */
import type { HealthState } from '../metrics/index.js';

export class Liveness {
  readonly #health: HealthState | undefined;
  #ticker: NodeJS.Timeout | undefined;
  /** Batches in flight now (several partitions' at once with `partitionsInFlight` > 1). */
  #batches = 0;
  #gaveUp = false;

  constructor(health: HealthState | undefined) {
    this.#health = health;
  }

  get batchInFlight(): boolean {
    return this.#batches > 0;
  }

  get gaveUp(): boolean {
    return this.#gaveUp;
  }

  start(): void {
    this.#ticker ??= setInterval(() => {
      if (this.#batches === 0) this.progress();
    }, 1000);
    this.#ticker.unref();
    this.progress();
  }

  stop(): void {
    if (this.#ticker) clearInterval(this.#ticker);
    this.#ticker = undefined;
  }

  batchStarted(): void {
    this.#batches++;
  }

  /** A batch finished: `done` when it went through (progress, even after giving up: batches flow again). */
  batchEnded(done: boolean): void {
    this.#batches = Math.max(0, this.#batches - 1);
    if (done) this.#health?.markProgress();
  }

  progress(): void {
    if (!this.#gaveUp) this.#health?.markProgress();
  }

  /** Stops reporting liveness; false when it had already stopped. */
  giveUp(): boolean {
    if (this.#gaveUp) return false;
    this.#gaveUp = true;
    return true;
  }
}
