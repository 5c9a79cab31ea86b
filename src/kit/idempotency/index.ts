export {
  createIdempotencyMiddleware,
  type IdempotencyMiddlewareOptions,
  type IdempotentHandler,
  type IdempotentResponse,
} from './middleware.js';
export type { PgQueryable } from './pg-records.js';
export {
  fingerprint,
  type IdempotencyCodec,
  type IdempotencyResult,
  IdempotencyStore,
  type IdempotencyStoreOptions,
} from './store.js';
