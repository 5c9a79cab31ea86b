/**
 * The processor every chaos instance runs (`redfence run <this module, compiled>`): per-customer order
 * total and count, on the run's topics and store (ORDERS_TOPIC, TOTALS_TOPIC, TOTALS_STORE). The
 * verifier's model of it: a customer's state after its first n valid orders is exactly
 * `{"total":<sum>,"count":n}`; an order whose value is not JSON or whose amount is not an integer is
 * undecodable (dead-lettered); an order with `"refuse":true` decodes but its reducer throws: a
 * `processing-error` dead letter that leaves the state as it was (the fence moves past it).
 */
import { defineProcessor } from '../index.js';

interface Order {
  customer: string;
  amount: number;
  /** The chaos workload's `refused` orders: the reducer throws on them. */
  refuse?: boolean;
}
interface Totals {
  total: number;
  count: number;
}

/** The processor on the given topics and store (the chaos `repair` fault folds the log with it, as reconcile does). */
export function customerTotals(names: { input: string; output: string; store: string }) {
  return defineProcessor<Order, Totals>({
    ...names,
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
}

export default customerTotals({
  input: process.env.ORDERS_TOPIC ?? 'orders',
  output: process.env.TOTALS_TOPIC ?? 'customer-totals',
  store: process.env.TOTALS_STORE ?? 'customer-totals',
});
