/**
 * Per-customer order total and count, exactly once. Run it with:
 *   redfence run examples/customer-totals.ts --brokers 127.0.0.1:19092 --redis redis://127.0.0.1:16379
 * Input: JSON orders `{ "customer": "c-7", "amount": 250 }` keyed by customer on ORDERS_TOPIC (orders).
 * Output: the customer's `{ "total": ..., "count": ... }` after each order on TOTALS_TOPIC (customer-totals).
 * An order whose amount is not an integer is undecodable; one with `"refuse": true` is refused by the
 * reducer (it throws): both are dead letters, and neither changes the customer's totals.
 * Under the fault harness (its input from chaosInput below; docs/chaos.md):
 *   redfence chaos examples/customer-totals.ts --brokers 127.0.0.1:19092
 */
import { defineProcessor } from '../src/index.js';

interface Order {
  customer: string;
  amount: number;
  refuse?: boolean;
}
interface Totals {
  total: number;
  count: number;
}

export default defineProcessor<Order, Totals>({
  input: process.env.ORDERS_TOPIC ?? 'orders',
  output: process.env.TOTALS_TOPIC ?? 'customer-totals',
  store: process.env.TOTALS_STORE ?? 'customer-totals',
  decode: (value) => {
    const order = JSON.parse(value?.toString('utf8') ?? '') as Order;
    if (typeof order.amount !== 'number' || !Number.isInteger(order.amount))
      throw new TypeError('amount must be an integer');
    return order;
  },
  reduce: (state, order) => {
    if (order.refuse === true) throw new RangeError('the order is marked to be refused');
    return { state: { total: (state?.total ?? 0) + order.amount, count: (state?.count ?? 0) + 1 } };
  },
});

/**
 * Input for `redfence chaos`: n orders over 200 customers, a few hot ones, with the occasional order
 * whose amount is not an integer (dead-lettered as undecodable) and, as often, one the reducer refuses
 * (`"refuse": true`: a processing-error dead letter). `rng` is the harness's seeded source.
 */
export function chaosInput(
  rng: { int(n: number): number; range(lo: number, hi: number): number },
  n: number,
) {
  return Array.from({ length: n }, (_, i) => {
    const customer = `c-${rng.int(4) === 0 ? rng.int(5) : rng.int(200)}`;
    const amount = rng.range(-50, 1000);
    if (i % 997 === 500) return { key: customer, value: { customer, amount, refuse: true } };
    return { key: customer, value: { customer, amount: i % 997 === 13 ? amount + 0.5 : amount } };
  });
}
