/**
 * The consume side's per-record work, off the main thread's long blocks: records fetched in consume
 * calls of at most SLICE_RECORDS, split into per-partition runs and turned into the port's records with
 * a turn of the event loop between slices (slices.ts).
 */
import type { RdKafka } from '@confluentinc/kafka-javascript';
import { nextTurn, SLICE_RECORDS } from './slices.js';
import type { Headers, InRecord } from './types.js';
import { tpKey } from './types.js';

/** The consumer calls used here. */
interface Consuming {
  consume(n: number, cb: (err: unknown, messages: RdKafka.Message[]) => void): void;
  setDefaultConsumeTimeout(ms: number): void;
}

/**
 * Up to `n` records, in consume calls of at most SLICE_RECORDS: the binding builds a call's messages on
 * the main thread in one go (a call of 3,000 held the event loop for tens of ms). The first call waits
 * up to `waitMs` for a first record; the next ones take only what is fetched already, until a call
 * brings fewer than it asked for. A failed next call ends the fetch with what it has (those records are
 * out of librdkafka's queue: dropping them would skip them).
 */
export async function fetchRecords(
  c: Consuming,
  n: number,
  waitMs: number,
  stopping: () => boolean,
): Promise<RdKafka.Message[]> {
  const call = (k: number) =>
    new Promise<RdKafka.Message[]>((resolve, reject) =>
      c.consume(k, (err, m) => (err ? reject(err) : resolve(m))),
    );
  const first = Math.min(n, SLICE_RECORDS);
  const all = await call(first);
  if (all.length < first) return all;
  c.setDefaultConsumeTimeout(0);
  try {
    while (all.length < n && !stopping()) {
      const k = Math.min(n - all.length, SLICE_RECORDS);
      const more = await call(k).catch(() => []);
      for (const m of more) all.push(m);
      if (more.length < k) break;
    }
  } finally {
    c.setDefaultConsumeTimeout(waitMs);
  }
  return all;
}

/** A fetch's messages by partition (tpKey), each run in offset order, split a slice at a time. */
export async function partitionRuns(
  messages: readonly RdKafka.Message[],
): Promise<Map<string, RdKafka.Message[]>> {
  const runs = new Map<string, RdKafka.Message[]>();
  for (let i = 0; i < messages.length; i++) {
    if (i > 0 && i % SLICE_RECORDS === 0) await nextTurn();
    const m = messages[i] as RdKafka.Message;
    const k = tpKey(m.topic, m.partition);
    const run = runs.get(k);
    if (run === undefined) runs.set(k, [m]);
    else run.push(m);
  }
  return runs;
}

/**
 * A partition's records to hand over: those held by a pause, then the fetched ones, without any below
 * `next` (the first offset not handed over yet; -1: not known) and none twice. librdkafka can hand a
 * record over twice: a pause that lands while a consume call is taking that record off the queue
 * (after its staleness check, before it moves the application position) resumes the fetch at it.
 */
export function unhanded(
  held: readonly RdKafka.Message[] | undefined,
  fetched: readonly RdKafka.Message[],
  next: number,
): RdKafka.Message[] {
  const out: RdKafka.Message[] = [];
  let from = next;
  for (const list of [held ?? [], fetched]) {
    for (const m of list) {
      if (m.offset < from) continue;
      out.push(m);
      from = m.offset + 1;
    }
  }
  return out;
}

export function inRecord(m: RdKafka.Message): InRecord {
  let h: Headers = {};
  if (m.headers !== undefined && m.headers.length > 0) {
    h = {};
    for (const entry of m.headers) {
      for (const [k, v] of Object.entries(entry)) {
        const prev = h[k];
        const x = v as Buffer;
        h[k] = prev === undefined ? x : Array.isArray(prev) ? [...prev, x] : [prev, x];
      }
    }
  }
  return {
    topic: m.topic,
    partition: m.partition,
    offset: String(m.offset),
    key: m.key === undefined || m.key === null ? null : Buffer.isBuffer(m.key) ? m.key : Buffer.from(m.key),
    value: m.value ?? null,
    headers: h,
    timestamp: String(m.timestamp ?? -1),
  };
}
