export { type OutboxStatus, purgePublished, retry, status } from './admin.js';
export { enqueue, type OutboxEvent } from './enqueue.js';
export { eventId } from './event-id.js';
export { OutboxMetrics, type RoleChange } from './metrics.js';
export type { RelayKafkaOptions, RelayOptions } from './options.js';
export type { Queryable } from './pg.js';
export { OutboxRelay, type RelayState } from './relay.js';
export { DEFAULT_TOPIC_TEMPLATE } from './routing.js';
export {
  DEFAULT_ROLES,
  DEFAULT_TABLE,
  initOutbox,
  MAX_ROLES,
  type OutboxInit,
  type OutboxLocation,
  type OutboxNames,
  outboxNames,
  outboxSql,
} from './schema.js';
export type { RelayMode } from './worker.js';
