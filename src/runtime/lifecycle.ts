/**
 * The one lifecycle of the long-running services (the processor, the handler, the invalidation
 * consumer, the outbox relay): `idle -> starting -> running -> closing -> closed`, each service giving
 * only its steps. "The group" below is a consumer group, or the relay's roles leased in PostgreSQL.
 *
 * - `start()` once (RF_INVALID_STATE otherwise). A failed start, or a `close()`/`destroy()` while it
 *   runs, rolls back what was started and ends `closed`; `start()` then rejects.
 * - `close()` is graceful and memoised: stop taking work, `drain` (finish or hand back what is in
 *   flight, commit it), `stop` (leave the group, disconnect). Every call returns the same promise.
 * - `destroy(err?)` is immediate and idempotent, as undici's `client.destroy()`: stop taking work and
 *   `stop` without draining. Work in flight is not committed: the group's next owner does it again
 *   (the same as a crash, which the fence and the commit rules make safe). During a `close()` it cuts
 *   the drain short.
 * - `fatal(err)`: a latch for an error the service cannot go on after (a fenced producer): logged once,
 *   then `close()`, then the service's `onFatal(err)`.
 * The abort `signal` fires when closing or destroying begins: steps that wait check it.
 */
import { RedfenceError } from '../errors/index.js';
import type { Logger } from './logger.js';
import type { InstanceRegistration } from './registry.js';

export type RuntimeState = 'idle' | 'starting' | 'running' | 'closing' | 'closed';

/** What a service does at each stage of its lifecycle. */
export interface LifecycleSteps {
  /** For messages: "processor", "handler", "invalidation consumer", "outbox relay". */
  readonly name: string;
  readonly log: Logger;
  /** Fields of the closed/destroyed log line (the instance id). */
  readonly logFields?: () => Record<string, unknown>;
  /** Connects and starts. Between slow steps, call {@link Lifecycle.stillStarting}. */
  startUp(): Promise<void>;
  /** Stops taking new work (timers, probes, readiness), on close, destroy and a failed start. */
  quiesce(): void;
  /** close() only: finishes or hands back the work in flight and commits it. */
  drain(): Promise<void>;
  /** Leaves the group and disconnects; after drain() on close(), at once on destroy(). */
  stop(): Promise<void>;
  /** After a failed start has stopped what was started. */
  failedStart?: () => void;
  /** After the close that a fatal error starts. */
  onFatal?: ((error: Error) => void) | undefined;
  /** Its entry in the instance registry (src/runtime/registry.ts): written once running, deleted on close. */
  registration?: InstanceRegistration | undefined;
}

const errText = (e: unknown) => String((e as Error)?.message ?? e);

export class Lifecycle {
  readonly #steps: LifecycleSteps;
  readonly #abort = new AbortController();
  #state: RuntimeState = 'idle';
  #starting: Promise<void> | undefined;
  #closing: Promise<void> | undefined;
  #destroying: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;
  #fatalError: Error | undefined;

  constructor(steps: LifecycleSteps) {
    this.#steps = steps;
  }

  get state(): RuntimeState {
    return this.#state;
  }

  /** Aborted once closing or destroying has begun. */
  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** True while it may take new work: starting or running. */
  get accepting(): boolean {
    return this.#state === 'starting' || this.#state === 'running';
  }

  /** Throws RF_INVALID_STATE when close() or destroy() was called during start(). */
  stillStarting(): void {
    if (this.#abort.signal.aborted)
      throw new RedfenceError('RF_INVALID_STATE', 'close() was called while start() was running');
  }

  async start(): Promise<void> {
    if (this.#state !== 'idle')
      throw new RedfenceError(
        'RF_INVALID_STATE',
        `start() called in state ${this.#state}: each ${this.#steps.name} starts only once (create a new one)`,
      );
    this.#state = 'starting';
    this.#starting = this.#steps.startUp().then(
      () => {
        this.#state = 'running';
        this.#steps.registration?.start();
      },
      async (err: unknown) => {
        this.#steps.log.error({ err: errText(err) }, 'start failed: stopping what was started');
        this.#state = 'closing';
        this.#abort.abort();
        this.#steps.quiesce();
        await this.#stop().catch((e: unknown) =>
          this.#steps.log.warn({ err: errText(e) }, 'stopping after a failed start failed'),
        );
        this.#steps.failedStart?.();
        this.#state = 'closed';
        throw err;
      },
    );
    await this.#starting;
  }

  close(): Promise<void> {
    this.#closing ??= this.#end(true);
    return this.#closing;
  }

  /** Stops at once without draining (see the file comment). `err` is logged as the reason. */
  destroy(err?: Error): Promise<void> {
    if (err !== undefined && this.#destroying === undefined)
      this.#steps.log.warn({ err: err.message }, `destroying the ${this.#steps.name}`);
    this.#destroying ??= this.#end(false);
    return this.#destroying;
  }

  fatal(err: Error): void {
    // the first fatal error latches: a second one before the close begins changes nothing
    if (this.#fatalError !== undefined || this.#state === 'closing' || this.#state === 'closed') return;
    this.#fatalError = err;
    this.#steps.log.error(
      { err: err.message },
      `fatal ${RedfenceError.is(err, 'RF_REDIS_AUTH') ? 'Redis' : 'Kafka'} error: closing the ${this.#steps.name} (restart it)`,
    );
    // not awaited here: close() may wait for the very call that reported the error
    setImmediate(() => {
      void this.close()
        .catch((e: unknown) => this.#steps.log.warn({ err: errText(e) }, 'close after a fatal error failed'))
        .then(() => this.#steps.onFatal?.(err))
        .catch((e: unknown) => this.#steps.log.warn({ err: errText(e) }, 'onFatal threw'));
    });
  }

  async #end(graceful: boolean): Promise<void> {
    if (this.#state === 'idle') {
      this.#state = 'closed';
      return;
    }
    if (this.#state === 'starting') {
      this.#abort.abort();
      await this.#starting?.catch(() => undefined);
    }
    if (this.#state === 'closed') return; // a failed start already stopped everything
    const first = this.#state !== 'closing';
    this.#state = 'closing';
    this.#abort.abort();
    if (first) this.#steps.quiesce();
    await this.#steps.registration?.stop();
    try {
      if (graceful) await this.#steps.drain();
      // a destroy during close(): its stop cuts the drain short (the close ends when that drain does)
      await this.#stop();
    } finally {
      this.#state = 'closed';
    }
    this.#steps.log.info(
      this.#steps.logFields?.() ?? {},
      `${this.#steps.name} ${graceful ? 'closed' : 'destroyed'}`,
    );
  }

  /** The stop step once, however many paths reach it. */
  #stop(): Promise<void> {
    this.#stopping ??= this.#steps.stop();
    return this.#stopping;
  }
}
