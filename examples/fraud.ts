/**
 * The fraud topology of docs/streams.md: customers with more than 10 orders over 100 within a 5-minute
 * window, as an alert per window update. Its default export is a built topology, so `redfence run` runs it
 * (a TopologyProcessor: exactly-once by default, its counts and stream time in Redis and Kafka):
 *   redfence run examples/fraud.ts --brokers 127.0.0.1:19092 --redis redis://127.0.0.1:16379 --create-topics
 * Input: JSON orders `{ "amount": 250 }` keyed by customer on ORDERS_TOPIC (orders).
 * Output: `{ "start": ..., "end": ..., "count": ... }` keyed by customer on ALERTS_TOPIC (fraud-alerts).
 * FRAUD_APP (fraud) is the applicationId: the consumer group and the Redis keys' prefix;
 * FRAUD_MIN_AMOUNT (100) and FRAUD_MIN_COUNT (10) the thresholds.
 */
import { serdes, TimeWindows, topology } from '../src/index.js';

const minAmount = Number(process.env.FRAUD_MIN_AMOUNT ?? 100);
const minCount = Number(process.env.FRAUD_MIN_COUNT ?? 10);

const t = topology({ applicationId: process.env.FRAUD_APP ?? 'fraud' });
t.stream<string, { amount: number }>(process.env.ORDERS_TOPIC ?? 'orders', { key: serdes.string() })
  .filter((_customer, order) => order !== null && order.amount > minAmount)
  .groupByKey()
  .windowedBy(TimeWindows.ofSizeWithNoGrace(5 * 60_000))
  .count({ name: 'big-orders' })
  .toStream()
  .filter((_window, count) => count > minCount)
  .map((w, count) => [w.key, { start: w.start, end: w.end, count }] as const)
  .to(process.env.ALERTS_TOPIC ?? 'fraud-alerts', { key: serdes.string() });

export default t.build();
