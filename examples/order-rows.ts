/**
 * Writes one row per order into PostgreSQL, exactly once per order even across crashes and replays
 * (the row and the processed id in one transaction). Run it with:
 *   REDFENCE_POSTGRES_URL=postgres://user@127.0.0.1:5432/db \
 *   redfence run examples/order-rows.ts --brokers 127.0.0.1:19092
 * Input: JSON orders `{ "customer": "c-7", "amount": 250 }` on ORDERS_TOPIC (orders). Rows go to
 * ORDERS_TABLE (order_rows), which must exist:
 *   CREATE TABLE order_rows (id text, customer text, amount int);
 * and so must the processed-ids table (docs/handlers.md).
 */
import { defineHandler } from '../src/index.js';

interface Order {
  customer: string;
  amount: number;
}

const table = process.env.ORDERS_TABLE ?? 'order_rows';
if (!/^[A-Za-z_][A-Za-z0-9_.]*$/.test(table)) throw new Error('ORDERS_TABLE must be a plain table name');

export default defineHandler<Order>({
  input: process.env.ORDERS_TOPIC ?? 'orders',
  name: 'order-rows',
  handle: async (order, ctx) => {
    await ctx.transaction(async (db) => {
      await db.query(`INSERT INTO ${table} (id, customer, amount) VALUES ($1, $2, $3)`, [
        ctx.id,
        order.value.customer,
        order.value.amount,
      ]);
    });
  },
});
