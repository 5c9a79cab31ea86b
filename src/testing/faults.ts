/**
 * Failures and pauses a test injects into a memory port's calls: the next produce, commit or
 * transaction fails (retriably, or fatally), or waits until the test releases it (to make batches
 * pile up behind it deterministically, e.g. to see group commit); start, stop and the admin calls
 * too (a start that fails or takes its time, a stop that waits, a partition count that fails).
 */
import { RedfenceError } from '../errors/index.js';

/** The Kafka steps of the commit path. */
export type KafkaStep = 'produce' | 'commit' | 'transaction';

/**
 * Every port call a test can hold, and (all but stop) fail. `committed` is the read of committed
 * offsets, with or without their metadata (committed() and committedWithMetadata()).
 */
export type PortStep =
  | KafkaStep
  | 'start'
  | 'stop'
  | 'committed'
  | 'partitionCount'
  | 'describeTopics'
  | 'listTopics'
  | 'createTopics'
  | 'highWatermarks';

const STEPS = new Set<string>([
  'produce',
  'commit',
  'transaction',
  'start',
  'stop',
  'committed',
  'partitionCount',
  'describeTopics',
  'listTopics',
  'createTopics',
  'highWatermarks',
]);

export interface FailOptions {
  /**
   * A fatal error: on produce and commit an error with `fatal: true` (as the client raises for a
   * fatal idempotent-producer error), on a transaction RF_KAFKA_FATAL (as the default adapter raises
   * for a fenced transactional producer). Default: a retriable error.
   */
  fatal?: boolean;
  /** Throw exactly this instead. */
  error?: Error;
  /**
   * produce: the records reach the log although the call fails (a lost delivery report): the caller
   * will write them again. Default false: nothing is written.
   */
  written?: boolean;
}

export interface HeldStep {
  readonly step: PortStep;
  /** Resolves once a step of this kind has arrived and is waiting to be released. */
  readonly reached: Promise<void>;
  /** Lets the held step go on (idempotent). */
  release(): void;
}

interface Hold {
  arrived(): void;
  released: Promise<void>;
}

function checkStep(step: unknown): asserts step is PortStep {
  if (typeof step !== 'string' || !STEPS.has(step))
    throw new RedfenceError(
      'RF_INVALID_ARGUMENT',
      `the step must be one of ${[...STEPS].join(', ')}, got ${JSON.stringify(step)}`,
    );
}

export class Faults {
  readonly #fails = new Map<PortStep, FailOptions[]>();
  readonly #holds = new Map<PortStep, Hold[]>();
  readonly #releases = new Set<() => void>();

  /** The next step of this kind fails (calls queue up: two calls fail the next two). */
  failNext(step: PortStep, options: FailOptions = {}): void {
    checkStep(step);
    if (step === 'stop')
      throw new RedfenceError('RF_INVALID_ARGUMENT', 'stop cannot be failed (hold it to make it wait)');
    const list = this.#fails.get(step) ?? [];
    list.push({ ...options });
    this.#fails.set(step, list);
  }

  /** The next step of this kind waits, before it touches the log, until `release()`. */
  hold(step: PortStep): HeldStep {
    checkStep(step);
    let arrived: () => void = () => undefined;
    let release: () => void = () => undefined;
    const reached = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const done = () => {
      this.#releases.delete(done);
      release();
    };
    this.#releases.add(done);
    const list = this.#holds.get(step) ?? [];
    list.push({ arrived, released });
    this.#holds.set(step, list);
    return { step, reached, release: done };
  }

  /** Entered by every step: waits at a hold, then hands back the failure to inject, if any. */
  async enter(step: PortStep): Promise<FailOptions | undefined> {
    const hold = this.#holds.get(step)?.shift();
    if (hold !== undefined) {
      hold.arrived();
      await hold.released;
    }
    return this.#fails.get(step)?.shift();
  }

  /** Releases every hold (a stopping port must not hang on one). */
  releaseAll(): void {
    for (const release of [...this.#releases]) release();
  }
}
