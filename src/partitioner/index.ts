export { murmur2, toPositive } from './murmur2.js';
export {
  keyBytes,
  misplacedKey,
  misplacedMessage,
  type PartitionKey,
  partitionFor,
} from './partition-for.js';
