export {
  type CacheRef,
  defineInvalidation,
  type InvalidationDefinition,
  type InvalidationKey,
} from '../definition/invalidation.js';
export {
  createInvalidation,
  InvalidationConsumer,
  type InvalidationOptions,
} from './consumer.js';
