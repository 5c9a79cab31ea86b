export {
  Projection,
  type ProjectionCodec,
  type ProjectionOptions,
  type UpdateResult,
  type Version,
} from './projection.js';
