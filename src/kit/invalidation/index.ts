export {
  createInvalidation,
  InvalidationConsumer,
  type InvalidationOptions,
} from './consumer.js';
export {
  type CacheRef,
  defineInvalidation,
  type InvalidationDefinition,
  type InvalidationKey,
} from './definition.js';
