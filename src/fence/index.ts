export { decodeApply, decodeEntry, decodeState, encodeApply } from './codec.js';
export { Fence, type FenceOptions } from './fence.js';
export { BatchResults, decodeKey, KeyBatch, type OutputMode, V, VERDICT_OF } from './key-batch.js';
export { asFenceRedis, type FenceRedis, type RedisArg } from './redis-port.js';
export { type LoadedScript, LUA_DIR, loadScripts } from './script-loader.js';
export * from './types.js';
