/**
 * Process tools shared by the tests, the benchmarks, the examples and the chaos harness: a child-process
 * spawner, a redis-server of one's own, a TCP proxy for connection faults, a free port and a bounded
 * poll. Not part of the package's API (not exported from its root).
 */
export {
  Child,
  type ChildOptions,
  type Exit,
  killChildren,
  type LogLine,
  type Readiness,
  spawnChild,
} from './child.js';
export { LogBook } from './log-book.js';
export { pollUntil } from './poll.js';
export { freePort } from './port.js';
export { type Target, TcpProxy } from './proxy.js';
export {
  RedisServer,
  type RedisServerOptions,
  redisBulk,
  redisCommand,
  redisInfo,
  startRedisServer,
} from './redis-server.js';
export { SentinelServer, type SentinelServerOptions } from './sentinel.js';
