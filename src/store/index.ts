export {
  CloseIndex,
  type CloseIndexOptions,
  type CloseIndexRedis,
  type IndexedWindow,
  isCloseIndexRedis,
} from './close-index.js';
export {
  type EncodedCall,
  type EncodedMany,
  encodeKeyCall,
  encodeKeyCallMany,
  MAX_STORE_ID,
} from './codec.js';
export { StoreKeys, type StoreKeysOptions } from './keys.js';
export { type LayoutCheck, STORE_LAYOUT } from './layout.js';
export { decideKeyCall, type KeyModelState } from './model.js';
export {
  decodeRead,
  encodeRead,
  MAX_READ_WINDOWS,
  type PendingEntry,
  type SessionValue,
  type StateStamp,
  type StoreReadAnswer,
  type StoreReadRequest,
  type WindowValue,
} from './read.js';
export { decodeKeyCall, decodeKeyCallMany } from './reply.js';
export {
  KeyStore,
  type KeyStoreOptions,
  MANY_KEYS_PER_CALL,
  STORE_LUA_DIR,
  type StoreRedis,
} from './store.js';
export type * from './types.js';
