export { BoundedCache } from './cache.js';
export {
  checkPartition,
  checkTopic,
  type KeyEncoding,
  KeySpace,
  type KeySpaceOptions,
  NAME_CACHE_SIZE,
} from './keys.js';
export { keySlot } from './slot.js';
