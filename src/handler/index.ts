export { createHandler, Handler, type HandlerCounts, type HandlerState } from './handler.js';
export { RateLimited } from './hold.js';
export type { HandlerOptions, PostgresOptions, RetryOptions } from './options.js';
export { createProcessedTable, processedTableSql, type SqlPool } from './postgres.js';
