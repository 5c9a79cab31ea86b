/**
 * The reference model's book of throws (src/topology/model.ts): `runModel` runs the input again from the
 * start each time a record's walk, its aggregation's own code or a node downstream of its aggregation
 * throws, with what the earlier tries learned, until a try runs through (docs/streams.md, "A record that
 * cannot be walked"). A record is named by its path (its input record's `topic/partition/offset`, then,
 * for a repartition record, the step that wrote it and its place there), which no other record's fate
 * moves, where a repartition record's offset would.
 */
import type { ModelErrorDeadLetter, ModelSource } from './model-types.js';

/** What a throw was: the node whose code threw and what it threw. */
export interface Thrown {
  readonly node: string;
  readonly error: unknown;
}

/** A throw downstream of aggregation `agg`, on the walk of its update or final result `step`. */
export interface DownstreamThrown extends Thrown {
  readonly step: string;
  readonly agg: string;
}

/** The throw of an aggregation's own code kept until the record's walk is over (the model's `threw`). */
export interface Threw {
  fold: (Thrown & { readonly stored: boolean }) | null;
}

/** A record's walk threw at `node` (not an Error: never seen outside runModel). */
export class WalkThrow {
  constructor(
    readonly path: string,
    readonly node: string,
    readonly error: unknown,
  ) {}
}

/**
 * A node downstream of the record's aggregation threw on `step`: run again at once, without it. At once,
 * not at the end of the record: a step not walked on takes its repartition records away from the
 * sub-topology reading them, so what a try learns after it (a later record's throw there) may not hold.
 */
export class StepThrew {
  constructor(
    readonly path: string,
    readonly step: DownstreamThrown,
  ) {}
}

/** A throw that cannot be a dead letter (RF_TOPOLOGY_NODE_THREW): runModel fails with it. */
export class RunFails {
  constructor(readonly error: Error) {}
}

/** One of the model's own throws, which pass through every catch of a user's code to runModel. */
export function isModelThrow(e: unknown): e is WalkThrow | StepThrew | RunFails {
  return e instanceof WalkThrow || e instanceof StepThrew || e instanceof RunFails;
}

/**
 * What the tries so far learned, each at the first place a try differed from the one before (every
 * throw starts a new try at once but an aggregation's own code, which stays within its record): records that are dead letters and nothing else (their walk or
 * aggregation threw), and the updates or final results not to walk on (a node downstream threw) with
 * their records, dead letters marked `stateApplied`.
 *
 * @example
 * const book = new Failures();
 * book.learn(new WalkThrow('in/0/3', 'KSTREAM-FILTER-0000000001', new TypeError('no')));
 * book.dead('in/0/3'); // { node: 'KSTREAM-FILTER-0000000001', error: TypeError: no }
 */
export class Failures {
  readonly #dead = new Map<string, Thrown>();
  readonly #skipped = new Set<string>();
  readonly #applied = new Map<string, DownstreamThrown>();

  /** The record at `path` is a dead letter with nothing else made: what it threw. */
  dead(path: string): Thrown | undefined {
    return this.#dead.get(path);
  }

  /** The update or final result `step` is not walked on. */
  skipped(step: string): boolean {
    return this.#skipped.has(step);
  }

  /** The record's dead letter when a node downstream of its aggregation threw (its state kept). */
  applied(path: string, source: ModelSource): ModelErrorDeadLetter | null {
    const a = this.#applied.get(path);
    if (a === undefined) return null;
    const { node, error, agg } = a;
    return { reason: 'processing-error', node, error, source, stateApplied: true, downstreamOf: agg };
  }

  /** Learns a try's throw; false when it is not new (the model would run the same try again). */
  learn(t: WalkThrow | StepThrew): boolean {
    if (t instanceof WalkThrow) {
      if (this.#dead.has(t.path)) return false;
      this.#dead.set(t.path, { node: t.node, error: t.error });
      return true;
    }
    if (this.#skipped.has(t.step.step)) return false;
    this.#skipped.add(t.step.step);
    // the record's first throw names its dead letter
    if (!this.#applied.has(t.path)) this.#applied.set(t.path, t.step);
    return true;
  }
}

/** An input record's path. */
export const recordId = (r: ModelSource) => `${r.topic}/${r.partition}/${r.offset}`;
