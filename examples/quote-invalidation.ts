/**
 * The quote cache's invalidation as a module for the CLI:
 *   redfence run examples/quote-invalidation.ts --brokers 127.0.0.1:19092 --redis redis://127.0.0.1:16379
 * Input: JSON events `{ "tenantId": "acme", "quoteId": "q-17" }` on QUOTE_EVENTS (default
 * quote-events); each deletes the entry of the cache QUOTE_CACHE (default quotes) for that tenant and
 * quote, and moves its generation. The CLI gives the Kafka, Redis, group and commit settings.
 */
import { defineInvalidation } from '../src/kit/index.js';

const cache = process.env.QUOTE_CACHE ?? 'quotes';

export default defineInvalidation<{ tenantId: string; quoteId: string }>({
  input: { topic: process.env.QUOTE_EVENTS ?? 'quote-events' },
  name: 'quote-cache',
  cache,
  keys: `${cache}:{tenantId}:{quoteId}`,
});
