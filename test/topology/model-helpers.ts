// Shared helpers of the streams model tests: input records from short tuples, outputs decoded.
import type { ModelInput, ModelResult } from '../../src/topology/model.js';

/** One input record: key as UTF-8 (null: none), value as JSON (undefined: null value). */
export interface In {
  readonly key: string | null;
  readonly value?: unknown;
  readonly ts: number;
  readonly partition?: number;
  readonly topic?: string;
}

/** Input records in the given order; offsets count per topic and partition. */
export function input(records: readonly In[], topic = 'in'): ModelInput[] {
  const next = new Map<string, number>();
  return records.map((r) => {
    const t = r.topic ?? topic;
    const partition = r.partition ?? 0;
    const slot = `${t}:${partition}`;
    const offset = next.get(slot) ?? 0;
    next.set(slot, offset + 1);
    return {
      topic: t,
      partition,
      offset,
      key: r.key === null ? null : Buffer.from(r.key, 'utf8'),
      value: r.value === undefined ? null : Buffer.from(JSON.stringify(r.value), 'utf8'),
      timestamp: r.ts,
    };
  });
}

export interface Out {
  readonly key: string | null;
  readonly value: unknown;
  readonly ts: number;
}

/** The outputs of one topic, key as UTF-8, value parsed as JSON (null: a tombstone). */
export function outputs(result: ModelResult, topic = 'out'): Out[] {
  return result.outputs
    .filter((o) => o.topic === topic)
    .map((o) => ({
      key: o.key === null ? null : o.key.toString('utf8'),
      value: o.value === null ? null : (JSON.parse(o.value.toString('utf8')) as unknown),
      ts: o.timestamp,
    }));
}

/** A windowed output as the contract maps it: plain key, `{ start, end, value }`. */
export function win(key: string, start: number, end: number, value: unknown, ts: number): Out {
  return { key, value: { start, end, value }, ts };
}
