/**
 * What a throw of a topology's own code (a user function or a serde) becomes where it cannot be a dead
 * letter, for the model and the Redis runtime alike (docs/streams.md, "A record that cannot be walked"):
 * a RF_TOPOLOGY_NODE_THREW naming the node, the record (topic, partition, offset: never its key or value)
 * and what was thrown (its class and message), the throw kept as the cause. A stored aggregate its store's
 * serde cannot read is marked where it is read ({@link readStored}), so the caller can tell it from a throw
 * of the aggregation's functions (a dead letter).
 */
import { RedfenceError } from '../errors/index.js';

/** Where the record was: enough to find it, nothing of its content. */
export interface ThrewAt {
  readonly topic: string;
  readonly partition: number;
  readonly offset: number;
}

/**
 * A store serde could not read stored state (not an Error: the caller turns it into {@link nodeThrew}).
 *
 * @example
 * if (err instanceof StoredUnreadable) throw nodeThrew(node, at, err.error, STORED);
 */
export class StoredUnreadable {
  constructor(readonly error: unknown) {}
}

/**
 * Reads a stored aggregate through `read`; a throw becomes a {@link StoredUnreadable}.
 *
 * @example
 * const agg = readStored(() => serde.deserialize(bytes, topic));
 */
export function readStored<T>(read: () => T): T {
  try {
    return read();
  } catch (error) {
    throw new StoredUnreadable(error);
  }
}

/** Why a throw is no dead letter: where it happened. */
export const STORED = 'its store serde cannot read the stored state';

/**
 * The class and message of what was thrown (cut to 200 characters); the class only for a serde reading
 * stored bytes (a parser's message may quote them: stored values are never shown).
 *
 * @example
 * describeThrown(new RangeError('too big')); // 'RangeError: too big'
 */
export function describeThrown(error: unknown, where = ''): string {
  const cls = error instanceof Error ? error.constructor.name || error.name : typeof error;
  if (where === STORED) return `${cls} (its message is in the cause)`;
  const message = error instanceof Error ? error.message : String(error);
  return `${cls}: ${message.length > 200 ? `${message.slice(0, 200)}...` : message}`;
}

/**
 * The batch's (or the model run's) failure: node `node` threw on record `at`; `where` says why it is no
 * dead letter.
 *
 * @example
 * throw nodeThrew('KSTREAM-AGGREGATE-0000000002', { topic: 'in', partition: 0, offset: 7 }, err, STORED);
 */
export function nodeThrew(node: string, at: ThrewAt, error: unknown, where: string): RedfenceError {
  return new RedfenceError(
    'RF_TOPOLOGY_NODE_THREW',
    `topology node ${node} threw on ${at.topic}/${at.partition} offset ${at.offset} (${where}): ${describeThrown(error, where)}`,
    {
      cause: error,
      details: { node, topic: at.topic, partition: at.partition, offset: at.offset, where },
    },
  );
}
