export { checkPartition, checkTopic, type KeyEncoding, KeySpace, type KeySpaceOptions } from './keys.js';
