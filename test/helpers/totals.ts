/**
 * The running-totals processor many real-broker tests use: orders `{ customer, amount }` keyed by
 * customer, a state `{ total, count }` per customer (one output per order), and a check of the state
 * against each customer's amounts (test/helpers/outputs.ts `customerOrders`) read through the fence.
 */
import { defineProcessor, type Processor } from '../../src/index.js';

export interface Order {
  customer: string;
  amount: number;
}
export type Totals = { total: number; count: number };

/** `<ns>-orders` -> `<ns>-totals`, store `<ns>` (dashes as underscores). */
export function totalsDefinition(ns: string) {
  return defineProcessor<Order, Totals>({
    input: `${ns}-orders`,
    output: `${ns}-totals`,
    store: ns.replace(/-/g, '_'),
    reduce: (s, o) => ({ state: { total: (s?.total ?? 0) + o.amount, count: (s?.count ?? 0) + 1 } }),
  });
}

/** True when every customer's state is the sum and count of its amounts (read through `probe`'s fence). */
export async function totalsAre(
  probe: Pick<Processor, 'fence'>,
  amounts: ReadonlyMap<string, readonly number[]>,
): Promise<boolean> {
  for (const [customer, list] of amounts) {
    const s = JSON.parse((await probe.fence.read(customer))?.value?.toString() ?? 'null') as Totals | null;
    if (s?.count !== list.length || s.total !== list.reduce((a, b) => a + b, 0)) return false;
  }
  return true;
}
