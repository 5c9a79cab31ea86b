export { Cache } from './cache.js';
export type { CacheCodec, CacheOptions, CacheReadOptions, CacheRedis, CacheSubscriber } from './options.js';
