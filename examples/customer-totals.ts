/**
 * Per-customer order total and count, exactly once. Run it with:
 *   redfence run examples/customer-totals.ts --brokers 127.0.0.1:19092 --redis redis://127.0.0.1:16379
 * Input: JSON orders `{ "customer": "c-7", "amount": 250 }` keyed by customer on ORDERS_TOPIC (orders).
 * Output: the customer's `{ "total": ..., "count": ... }` after each order on TOTALS_TOPIC (customer-totals).
 */
import { defineProcessor } from '../src/index.js';

interface Order {
  customer: string;
  amount: number;
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
  reduce: (state, order) => ({
    state: { total: (state?.total ?? 0) + order.amount, count: (state?.count ?? 0) + 1 },
  }),
});
