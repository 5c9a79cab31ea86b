/**
 * redfence/testing: an in-memory Kafka for tests of code built on redfence. A MemoryKafka is one
 * cluster; `kafka.port({ groupId })` is one consumer instance's KafkaPort, given to a Processor as its
 * `kafka` option. Failures and holds are injected per port; readers check what was committed.
 * See docs/testing.md.
 */

export { MemoryKafkaError } from './errors.js';
export type { FailOptions, HeldStep, KafkaStep, PortStep } from './faults.js';
export type { Isolation } from './log.js';
export { MemoryKafka, type MemoryKafkaOptions, type ReadOptions } from './memory-kafka.js';
export {
  MemoryKafkaPort,
  type MemoryPortOptions,
  type MemoryPortState,
  type PortCalls,
  type StepRecord,
} from './port.js';
