/**
 * Long synchronous loops over records (a consume call's messages turned into the port's records, a
 * Kafka step's records handed to librdkafka) run in slices with a turn of the event loop between them,
 * so Redis replies that arrived meanwhile are not held up behind thousands of records. Order is kept.
 */

/** Records per slice: a few hundred keep one slice well under a millisecond. */
export const SLICE_RECORDS = 256;

/** Resolves on the event loop's next turn, after the I/O (e.g. Redis replies) that is ready now. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** `items.map(fn)`, in order, with a turn of the event loop after every slice. */
export async function mapInSlices<T, U>(items: readonly T[], fn: (item: T) => U): Promise<U[]> {
  const out = new Array<U>(items.length);
  for (let i = 0; i < items.length; i++) {
    if (i > 0 && i % SLICE_RECORDS === 0) await nextTurn();
    out[i] = fn(items[i] as T);
  }
  return out;
}

/**
 * Runs `tasks` with at most `depth` of them at once, each started in order as an earlier one ends.
 * Resolves when all have ended; rejects with the first failure once all have ended (none is left
 * running behind a rejection).
 */
export async function inTurns(tasks: ReadonlyArray<() => Promise<void>>, depth: number): Promise<void> {
  if (depth <= 1) {
    for (const t of tasks) await t();
    return;
  }
  let next = 0;
  const failures: unknown[] = [];
  const worker = async (): Promise<void> => {
    while (next < tasks.length) {
      const t = tasks[next++] as () => Promise<void>;
      try {
        await t();
      } catch (err) {
        failures.push(err);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(depth, tasks.length) }, worker));
  if (failures.length > 0) throw failures[0];
}
