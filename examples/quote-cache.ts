/**
 * Invalidates the `quotes` cache from quote events. Run it with:
 *   node --import tsx examples/quote-cache.ts
 * Input: JSON events `{ "tenantId": "acme", "quoteId": "q-17" }` on QUOTE_EVENTS (quote-events; its
 * dead-letter topic quote-events.DLT must exist). Each event deletes the entry a
 * `new Cache({ name: 'quotes' })` keeps for that tenant and quote and moves its generation, one
 * pipeline per partition batch; offsets are committed once the deletes answered. An event without a tenant goes to
 * the dead-letter topic. Redis at REDIS_URL, Kafka at KAFKA_BROKERS.
 */
import { Redis } from 'ioredis';
import { createInvalidation, defineInvalidation } from '../src/kit/index.js';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:16379', { maxRetriesPerRequest: 2 });

const consumer = createInvalidation(
  defineInvalidation<{ tenantId: string; quoteId: string }>({
    input: { topic: process.env.QUOTE_EVENTS ?? 'quote-events' },
    name: 'quote-cache',
    cache: 'quotes',
    keys: 'quotes:{tenantId}:{quoteId}',
  }),
  { kafka: { brokers: (process.env.KAFKA_BROKERS ?? '127.0.0.1:19092').split(',') }, redis },
);

await consumer.start();
process.once('SIGTERM', () => {
  void consumer.close().finally(() => redis.disconnect());
});
