export { murmur2, toPositive } from './murmur2.js';
export { keyBytes, type PartitionKey, partitionFor } from './partition-for.js';
