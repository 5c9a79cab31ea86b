export { checkPartition, checkTopic, type KeyEncoding, KeySpace, type KeySpaceOptions } from './keys.js';
export { keySlot } from './slot.js';
