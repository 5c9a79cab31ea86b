/**
 * A topology partition's stream time in its offset commit's metadata, as Kafka Streams keeps a task's
 * stream time there: committed atomically with the offset (in exactly-once mode inside the transaction
 * holding the outputs), read back by the partition's next owner before its first batch, so a replay
 * from the committed offset decides lateness and final results as the first run did.
 *
 * The text is compact JSON: `{"v":1,"t":{"<aggregation node>":[stream,emitted,store]}}` (each clock's
 * three numbers, src/topology/run/types.ts). Empty metadata (never committed, or committed by another
 * client) is no stream time yet.
 *
 * {@link PartitionTimes} keeps, per owned partition, the stream time after each batch not yet committed:
 * a failed Kafka step seeks the partition back, and the batches delivered again must start from the
 * stream time at the offset they start from.
 */
import { RedfenceError } from '../../errors/index.js';
import type { StreamTimes } from '../../topology/run/types.js';

const VERSION = 1;

/**
 * The commit metadata of a stream time.
 *
 * @example
 * encodeStreamTime({ 'big-orders': { stream: 1700000000000, emitted: -1, store: 1699999800000 } });
 * // '{"v":1,"t":{"big-orders":[1700000000000,-1,1699999800000]}}'
 */
export function encodeStreamTime(times: StreamTimes): string {
  const t: Record<string, [number, number, number]> = {};
  for (const [node, c] of Object.entries(times)) t[node] = [c.stream, c.emitted, c.store];
  return JSON.stringify({ v: VERSION, t });
}

function corrupt(where: string, why: string): RedfenceError {
  return new RedfenceError(
    'RF_STATE_CORRUPT',
    `the commit metadata of ${where} is not a stream time this version reads (${why}); reset the group's offsets of this partition or run the version that committed it`,
    { details: { partition: where } },
  );
}

/**
 * The stream time in a commit's metadata ('' : none yet). RF_STATE_CORRUPT naming `where` (the
 * partition; never the text) when it is not one this version wrote.
 *
 * @example
 * decodeStreamTime('{"v":1,"t":{"big-orders":[1700000000000,-1,1699999800000]}}', 'orders/0');
 * // { 'big-orders': { stream: 1700000000000, emitted: -1, store: 1699999800000 } }
 */
export function decodeStreamTime(metadata: string, where: string): StreamTimes {
  if (metadata === '') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(metadata);
  } catch {
    throw corrupt(where, 'not JSON');
  }
  const o = parsed as { v?: unknown; t?: unknown } | null;
  if (o === null || typeof o !== 'object' || o.v !== VERSION) throw corrupt(where, `not version ${VERSION}`);
  if (o.t === null || typeof o.t !== 'object' || Array.isArray(o.t)) throw corrupt(where, 'no clocks');
  const out: Record<string, { stream: number; emitted: number; store: number }> = {};
  const ok = (n: unknown) => Number.isSafeInteger(n) && (n as number) >= -1;
  for (const [node, c] of Object.entries(o.t as Record<string, unknown>)) {
    if (!Array.isArray(c) || c.length !== 3 || !c.every(ok))
      throw corrupt(where, 'a clock is not 3 integers');
    out[node] = { stream: c[0], emitted: c[1], store: c[2] };
  }
  return out;
}

/** Per owned partition, the stream time at the committed offset and after each uncommitted batch. */
export class PartitionTimes {
  /** partition -> (next offset -> stream time there), ascending offsets. */
  readonly #at = new Map<number, Map<number, StreamTimes>>();

  /** On assignment: the stream time at the committed offset (-1: from the start). */
  restore(partition: number, offset: number, times: StreamTimes): void {
    this.#at.set(partition, new Map([[offset, times]]));
  }

  /** After a batch: the stream time at its next offset. */
  remember(partition: number, next: number, times: StreamTimes): void {
    let m = this.#at.get(partition);
    if (m === undefined) {
      m = new Map();
      this.#at.set(partition, m);
    }
    m.set(next, times);
  }

  /** After a commit reached `offset`: what lies before it is not needed again. */
  committed(partition: number, offset: number): void {
    const m = this.#at.get(partition);
    if (m === undefined) return;
    for (const k of m.keys()) if (k < offset) m.delete(k);
  }

  /**
   * The stream time at `offset` (a batch delivered again after a seek back starts there): the one
   * remembered at the largest offset not after it (an offset hole, a transaction marker), else none.
   */
  at(partition: number, offset: number): StreamTimes {
    let best = -2;
    let times: StreamTimes = {};
    for (const [k, t] of this.#at.get(partition) ?? [])
      if (k <= offset && k > best) {
        best = k;
        times = t;
      }
    return times;
  }

  forget(partition: number): void {
    this.#at.delete(partition);
  }
}
