/**
 * Calls a webhook once per order, in order per customer, 64 calls at a time. Run it with:
 *   redfence run examples/order-webhook.ts --brokers 127.0.0.1:19092 --redis redis://127.0.0.1:16379
 * Input: JSON orders `{ "customer": "c-7", "amount": 250 }` keyed by customer on ORDERS_TOPIC (orders).
 * Each order is POSTed to WEBHOOK_URL with its idempotency id in an `Idempotency-Key` header, inside
 * ctx.once (Redis), so a redelivered order is not posted again. A 5xx answer is retried with backoff;
 * a 4xx goes to the dead-letter topic at once (orders.DLT).
 */
import { defineHandler } from '../src/index.js';

interface Order {
  customer: string;
  amount: number;
}

const url = process.env.WEBHOOK_URL ?? 'http://127.0.0.1:8080/orders';

export default defineHandler<Order>({
  input: process.env.ORDERS_TOPIC ?? 'orders',
  name: process.env.WEBHOOK_NAME ?? 'order-webhook',
  handle: async (order, ctx) => {
    await ctx.once(async () => {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': ctx.id },
        body: JSON.stringify(order.value),
        signal: ctx.signal,
      });
      await res.arrayBuffer();
      if (!res.ok)
        throw Object.assign(new Error(`webhook answered ${res.status}`), { retriable: res.status >= 500 });
    });
  },
});
