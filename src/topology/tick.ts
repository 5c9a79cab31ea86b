/**
 * Ticks: the records a topology processor with `idleCloseMs` produces into an idle input partition of a
 * windowed sub-topology (docs/streams.md, "Closing the windows of an idle partition"), so that its last
 * windows close with no further record. A tick has a null key, an empty value, the header
 * `redfence-tick` and the wall clock as its timestamp. It is consumed like any record (an offset, its
 * effects fenced and pending under it) but walks no node: every windowed aggregation of the
 * sub-topology reading its topic takes it as a record with that timestamp that updates no window
 * (stream time moves to it; with emit('final') the windows it closes are emitted, as a record's are).
 * The reference model (model.ts) and the Redis executor (run/steps.ts) recognise ticks by the same rule,
 * whether or not the processor that reads them makes ticks itself.
 */
import type { BuiltTopology, TopologyNode } from './types.js';

/** The header naming a tick; its value is not read (the producing instance's id, for people). */
export const TICK_HEADER = 'redfence-tick';

/**
 * A record is a tick when its key is null and it carries the `redfence-tick` header: a keyed record is
 * never one, so a record of yours with that header is walked like any other.
 *
 * @example
 * isTick({ key: null, headers: { 'redfence-tick': 'a1b2' } }); // true
 */
export function isTick(r: { readonly key: Buffer | null; readonly headers?: object | undefined }): boolean {
  return r.key === null && r.headers !== undefined && Object.hasOwn(r.headers, TICK_HEADER);
}

/** How many of `records` are ticks (counted, no list of them made: a batch rarely holds one). */
export function countTicks(
  records: readonly { readonly key: Buffer | null; readonly headers?: object }[],
): number {
  let n = 0;
  for (let i = 0; i < records.length; i++) if (isTick(records[i] as (typeof records)[number])) n++;
  return n;
}

/**
 * The record a tick's effects name as their source: the tick without its headers, so the final results
 * it closes never carry `redfence-tick` (a reader skipping ticks by the header would skip them).
 */
export function tickSource<T extends { readonly headers?: unknown }>(tick: T): Omit<T, 'headers'> {
  const { headers: _headers, ...rest } = tick;
  return rest;
}

/** The windowed aggregations of a built topology (the nodes a tick moves), in node order. */
export function windowedAggregations(built: BuiltTopology): Extract<TopologyNode, { kind: 'aggregate' }>[] {
  return built.nodes.filter(
    (n): n is Extract<TopologyNode, { kind: 'aggregate' }> => n.kind === 'aggregate' && n.window !== null,
  );
}
