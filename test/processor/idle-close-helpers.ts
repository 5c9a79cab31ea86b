/**
 * Shared pieces of the tests of the wall-clock close of idle partitions (topology-idle-close*.test.ts):
 * the events (a few keys on each partition, two 1-second windows each, timestamps a little behind the
 * wall clock), the model's input read back from the events topic (ticks included), and the final counts
 * the events give per key and window.
 */
import assert from 'node:assert/strict';
import { partitionFor } from '../../src/partitioner/index.js';
import type { ModelInput } from '../../src/topology/model.js';
import { isTick, TICK_HEADER } from '../../src/topology/tick.js';
import { type ReadRecord, readToEnd } from '../helpers/kafka.js';
import { IDLE_WINDOW_MS } from './fixtures/idle-close.js';

export const IDLE_PARTITIONS = 3;

export interface IdleEvent {
  readonly key: string;
  readonly partition: number;
  readonly timestamp: number;
}

/** Two keys per partition, each with records in two consecutive windows starting at `base`, in time order. */
export function idleEvents(base: number): IdleEvent[] {
  const keys: string[] = [];
  for (let i = 0; keys.length < 2 * IDLE_PARTITIONS; i++) {
    const k = `k${i}`;
    if (
      keys.filter(
        (x) =>
          partitionFor(Buffer.from(x), IDLE_PARTITIONS) === partitionFor(Buffer.from(k), IDLE_PARTITIONS),
      ).length < 2
    )
      keys.push(k);
  }
  const out: IdleEvent[] = [];
  keys.forEach((key, i) => {
    const partition = partitionFor(Buffer.from(key), IDLE_PARTITIONS);
    for (let w = 0; w < 2; w++)
      for (let j = 0; j <= (i + w) % 3; j++)
        out.push({ key, partition, timestamp: base + w * IDLE_WINDOW_MS + 100 * j + i });
  });
  // in time order: with no grace, a record behind its partition's stream time by a window is late
  return out.sort((a, b) => a.timestamp - b.timestamp);
}

/** The events as records to produce: value `{"n":1}`, on their partitions, with their event times. */
export function idleMessages(
  events: readonly IdleEvent[],
): Array<{ key: string; value: string; partition: number; timestamp: string }> {
  return events.map((e) => ({
    key: e.key,
    value: JSON.stringify({ n: 1 }),
    partition: e.partition,
    timestamp: String(e.timestamp),
  }));
}

/** The final counts the events give: `key start-end` -> n, one per key and window. */
export function expectedFinals(events: readonly IdleEvent[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const e of events) {
    const start = Math.floor(e.timestamp / IDLE_WINDOW_MS) * IDLE_WINDOW_MS;
    const id = `${e.key} ${start}-${start + IDLE_WINDOW_MS}`;
    m.set(id, (m.get(id) ?? 0) + 1);
  }
  return m;
}

/** The counts topic's records as `key start-end` -> n; asserts each key and window comes once. */
export function finalsOf(rows: readonly ReadRecord[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of rows) {
    const v = JSON.parse(r.value ?? 'null') as { start: number; end: number; n: number };
    const id = `${r.key} ${v.start}-${v.end}`;
    assert.ok(!m.has(id), `the final result of ${id} once`);
    m.set(id, v.n);
  }
  return m;
}

/**
 * The events topic read to its end (read_committed) as the model's input; the ticks among them.
 * `brokers`: another broker's listener than the test cluster's (the secured node's INTERNAL one).
 */
export async function eventsAsInput(
  topic: string,
  brokers?: string,
): Promise<{ input: ModelInput[]; ticks: ReadRecord[] }> {
  const rows = await readToEnd(topic, 60_000, brokers);
  rows.sort((a, b) => a.partition - b.partition || Number(a.offset) - Number(b.offset));
  const input = rows.map((r) => {
    const headers: Record<string, string> = {};
    for (const [name, v] of Object.entries(r.headers)) if (v !== undefined) headers[name] = String(v);
    return {
      topic,
      partition: r.partition,
      offset: Number(r.offset),
      key: r.key === null ? null : Buffer.from(r.key),
      value: r.value === null ? null : Buffer.from(r.value),
      timestamp: Number(r.timestamp),
      ...(Object.keys(headers).length === 0 ? {} : { headers }),
    };
  });
  const ticks = rows.filter((r) => r.key === null && r.headers[TICK_HEADER] !== undefined);
  assert.equal(ticks.length, input.filter(isTick).length);
  return { input, ticks };
}
