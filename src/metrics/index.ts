export {
  DEFAULT_MAX_STALL_MS,
  HEALTH_PARTS,
  type HealthPart,
  type HealthSnapshot,
  HealthState,
  type HealthStateOptions,
} from './health.js';
export {
  type CommitMode,
  type HandlerOutcome,
  type MetricsRegistry,
  type OffsetResetReason,
  type RebalanceKind,
  RedfenceMetrics,
  type RedfenceMetricsOptions,
  type TopologyDropReason,
  type TopologyNodes,
} from './metrics.js';
export {
  type MetricsMount,
  type MetricsServer,
  type MetricsServerOptions,
  startMetricsServer,
} from './server.js';
