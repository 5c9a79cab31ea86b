/**
 * Liveness and readiness of the redfence runtime, as reported by `/livez` and `/readyz`.
 */
import { RedfenceError } from '../errors/index.js';

/** The parts that must all be ready before the runtime is ready. */
export type HealthPart = 'group' | 'scripts' | 'redis' | 'kafka';

/** Every {@link HealthPart}, in the order snapshots list them. */
export const HEALTH_PARTS: readonly HealthPart[] = ['group', 'scripts', 'redis', 'kafka'];

/** Default longest time without poll-loop progress before the runtime counts as stalled. */
export const DEFAULT_MAX_STALL_MS = 30_000;

/** JSON-ready view of the readiness state. */
export interface HealthSnapshot {
  /** True when every part is ready. */
  ready: boolean;
  /** Readiness of each part. */
  parts: Record<HealthPart, boolean>;
  /** Clock time (ms) of the last progress mark, or of construction when none was marked yet. */
  lastProgressAt: number;
}

/** Options for {@link HealthState}. */
export interface HealthStateOptions {
  /** Clock in epoch milliseconds. Default `Date.now`; inject one in tests. */
  clock?: () => number;
}

function isPart(part: unknown): part is HealthPart {
  return typeof part === 'string' && (HEALTH_PARTS as readonly string[]).includes(part);
}

/**
 * Liveness and readiness of one runtime.
 *
 * - Live: the poll loop marked progress within `maxStallMs`. The runtime calls `markProgress()` after
 *   every poll, even an empty one, so an idle but polling loop stays live. Construction counts as a
 *   first mark, giving the loop `maxStallMs` to start.
 * - Ready: all four parts (`group`, `scripts`, `redis`, `kafka`) are ok. Every part starts not ready.
 *
 * @example
 * ```ts
 * const health = new HealthState();
 * for (const part of ['group', 'scripts', 'redis', 'kafka'] as const) health.setReady(part, true);
 * health.markProgress();
 * health.live(); // true
 * health.ready(); // true
 * JSON.stringify(health.snapshot()); // {"ready":true,"parts":{"group":true,...},"lastProgressAt":...}
 * ```
 */
export class HealthState {
  readonly #clock: () => number;
  readonly #parts: Record<HealthPart, boolean> = { group: false, scripts: false, redis: false, kafka: false };
  #lastProgressAt: number;

  constructor(options: HealthStateOptions = {}) {
    const clock = options.clock ?? Date.now;
    if (typeof clock !== 'function') {
      throw new RedfenceError('RF_INVALID_OPTIONS', 'health.clock must be a function returning milliseconds');
    }
    this.#clock = clock;
    this.#lastProgressAt = clock();
  }

  /** Records that the poll loop made progress (call after every poll, empty or not). */
  markProgress(): void {
    this.#lastProgressAt = this.#clock();
  }

  /** Sets whether one part is ready. */
  setReady(part: HealthPart, ok: boolean): void {
    if (!isPart(part)) {
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        `health part must be one of ${HEALTH_PARTS.join(', ')}, got ${JSON.stringify(part)}`,
      );
    }
    this.#parts[part] = ok === true;
  }

  /**
   * True when progress was marked at most `maxStallMs` before `now`. A clock that went backwards
   * counts as live.
   */
  live(now: number = this.#clock(), maxStallMs: number = DEFAULT_MAX_STALL_MS): boolean {
    if (typeof maxStallMs !== 'number' || !(maxStallMs > 0) || !Number.isFinite(maxStallMs)) {
      throw new RedfenceError(
        'RF_INVALID_ARGUMENT',
        `maxStallMs must be a finite number > 0, got ${String(maxStallMs)}`,
      );
    }
    return now - this.#lastProgressAt <= maxStallMs;
  }

  /** True when every part is ready. */
  ready(): boolean {
    return HEALTH_PARTS.every((part) => this.#parts[part]);
  }

  /** A fresh, JSON-ready copy of the readiness state. */
  snapshot(): HealthSnapshot {
    return { ready: this.ready(), parts: { ...this.#parts }, lastProgressAt: this.#lastProgressAt };
  }
}
