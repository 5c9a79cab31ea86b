export {
  createIdempotencyMiddleware,
  type IdempotencyMiddlewareOptions,
  type IdempotentHandler,
  type IdempotentResponse,
} from './middleware.js';
export {
  fingerprint,
  type IdempotencyCodec,
  type IdempotencyResult,
  type IdempotencyStoreOptions,
} from './options.js';
export type { PgPool, PgQueryable } from './pg-records.js';
export { IdempotencyStore } from './store.js';
