/**
 * How an aggregation's state is written to and read from Redis, in one place for the executor and the
 * state reader (src/topology/state/): the fence key is the grouped key's bytes through the store's key
 * serde; a count and every timestamp are integers as text; a reduce or aggregate is its value serde's
 * bytes, read back through the same serde.
 */
import { RedfenceError } from '../../errors/index.js';
import type { EffectResult, LayoutCheck } from '../../store/index.js';
import { type AggregateNode, changelog } from '../model-io.js';
import { readStored } from '../threw.js';
import type { AggregatePlan, RunPlan } from './plan.js';

/** The fence key of a grouped key: its bytes through the store's key serde (the store's order). */
export function fenceKeyOf(node: AggregateNode, key: unknown): Buffer {
  // storeKey's bytes, without its map key (a hex string per record the executor never uses)
  return node.keySerde.serialize(key, changelog(node));
}

/** A stored count or timestamp, or RF_STATE_CORRUPT naming the node. */
export function storedNumber(v: EffectResult | undefined, node: string): number {
  const n = Buffer.isBuffer(v) ? (digitsOf(v) ?? Number(v.toString('latin1'))) : Number.NaN;
  if (!Number.isSafeInteger(n))
    throw new RedfenceError(
      'RF_STATE_CORRUPT',
      `topology node ${node}: a count or timestamp in Redis is not an integer`,
      { details: { node } },
    );
  return n;
}

/**
 * The integer of bytes that are 1 to 15 ASCII digits after an optional `-` (what Redis writes: a count,
 * a timestamp), read in place: as `Number` of their text gives, without the text. Anything else
 * (empty, a 16th digit, a sign or space `Number` takes too): undefined, for `Number` to decide.
 */
function digitsOf(b: Buffer): number | undefined {
  const neg = b.length > 0 && b[0] === 0x2d;
  const from = neg ? 1 : 0;
  if (b.length === from || b.length - from > 15) return undefined;
  let n = 0;
  for (let i = from; i < b.length; i++) {
    const d = (b[i] as number) - 0x30;
    if (d < 0 || d > 9) return undefined;
    n = n * 10 + d;
  }
  return neg ? -n : n;
}

/** An aggregate from its stored bytes: a count's number, a reduce's or aggregate's through its serde; none: null. */
export function storedAggregate(agg: AggregatePlan, v: EffectResult | undefined): unknown {
  const p = agg.node;
  if (p.op === 'count') return storedNumber(v, p.name);
  if (v === null || v === undefined) return null;
  if (!Buffer.isBuffer(v)) throw new TypeError('a kv or window result is bytes');
  return readStored(() => p.valueSerde.deserialize(v, changelog(p)));
}

/**
 * What the application's layout check needs (KeyStore.checkLayout): the topics it reads and whether it
 * keeps time windows (tumbling or hopping: the windows whose key layout changed). `claim`: a processor
 * at start.
 */
export function layoutCheck(plan: RunPlan, claim: boolean): LayoutCheck {
  const windowed = [...plan.aggregates.values()].some(
    (a) => a.node.window?.kind === 'tumbling' || a.node.window?.kind === 'hopping',
  );
  return { topics: [...plan.subs.keys()], windowed, claim };
}
