export { checkFencingToken, FencedStore, type FencedStoreOptions } from './fenced-store.js';
export { type AcquireOptions, type Lock, LockManager } from './lock.js';
export type { LockLostReason, LockOptions } from './options.js';
