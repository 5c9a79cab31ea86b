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
  type InvalidationState,
} from './consumer.js';
