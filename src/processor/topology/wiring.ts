/**
 * The topology processor's collaborators' contexts, built from its parts (processor.ts holds them):
 * the batch context (batch.ts), the rebalance context (src/processor/rebalance.ts, with the stream
 * time restored from each commit's metadata) and the wall-clock close of idle partitions (ticks.ts).
 * Each collaborator gets a narrow context, never the processor.
 */
import type { Fence } from '../../fence/index.js';
import { type KafkaPort, tpKey } from '../../kafka/types.js';
import { invalid } from '../../options/checks.js';
import type { Logger } from '../../runtime/logger.js';
import type { Tracing } from '../../telemetry/tracing.js';
import type { BatchBackoff } from '../batch-backoff.js';
import { CommitPipeline, type QueuedBatch } from '../commit-pipeline.js';
import type { Counts } from '../counts.js';
import type { PartitionTable } from '../partition-table.js';
import type { RebalanceContext } from '../rebalance.js';
import { kafkaPort, type RedisStep } from '../wiring.js';
import type { TopologyBatchContext } from './batch.js';
import type { NodeMetrics } from './node-metrics.js';
import type { ResolvedTopologyOptions } from './options.js';
import type { Placements } from './placement.js';
import type { ExecutorAtStart } from './sources.js';
import { decodeStreamTime, type PartitionTimes } from './stream-time.js';
import { IdleTicks } from './ticks.js';

/** The port of the options, or the default adapter (transactional in exactly-once mode). */
export function topologyPort(o: ResolvedTopologyOptions, groupId: string, instanceId: string): KafkaPort {
  if ('port' in o.kafka && typeof o.kafka.port.committedWithMetadata !== 'function')
    throw invalid(
      'option "kafka" is a port without committedWithMetadata: a topology keeps its stream time in the commit metadata',
    );
  return kafkaPort(o, groupId, instanceId);
}

/** What the contexts are made of: the processor's parts. */
export interface TopologyParts {
  readonly o: ResolvedTopologyOptions;
  readonly instanceId: string;
  readonly groupId: string;
  readonly deadLetterTopic: string;
  readonly run: ExecutorAtStart;
  readonly table: PartitionTable;
  readonly kafka: KafkaPort;
  readonly fence: Fence;
  readonly pipeline: CommitPipeline;
  readonly redisStep: RedisStep;
  readonly replication: RebalanceContext['replication'];
  readonly counts: Counts;
  readonly nodes: NodeMetrics;
  readonly placements: Placements;
  readonly log: Logger;
  timesOf(topic: string): PartitionTimes;
  /** False once closing. */
  accepting(): boolean;
  /** True while running and Redis is not in an outage. */
  ticking(): boolean;
  redisOutage(): boolean;
  dropped(n: number): void;
  assigned(): void;
}

export function batchContext(p: TopologyParts): TopologyBatchContext {
  const { o, run } = p;
  return {
    table: p.table,
    accepting: p.accepting,
    get executor() {
      return run.executor;
    },
    times: p.timesOf,
    redisStep: p.redisStep,
    replication: p.replication,
    pipeline: p.pipeline,
    kafka: p.kafka,
    deadLetterTopic: p.deadLetterTopic,
    groupId: p.groupId,
    counts: p.counts,
    dropped: p.dropped,
    metrics: o.metrics,
    nodes: p.nodes,
    log: p.log,
    ...(o.crashHook ? { crash: o.crashHook } : {}),
    partitionCounts: (topic, atLeast) => p.placements.counts(topic, atLeast),
  };
}

/** The rebalance context: epochs, committed offsets and their stream times; `ticks` and `backoff` forget revoked partitions. */
export function rebalanceContext(
  p: TopologyParts,
  ticks: IdleTicks | undefined,
  backoff: Pick<BatchBackoff, 'forget'>,
): RebalanceContext {
  const { o, run } = p;
  return {
    kafka: p.kafka,
    fence: p.fence,
    table: p.table,
    redisStep: p.redisStep,
    redisOutage: p.redisOutage,
    replication: p.replication,
    partitionCount: async () => 0,
    drain: () => p.pipeline.drain(),
    sweepAll: async () => undefined,
    assigned: p.assigned,
    restore: (tp, committed) => {
      const times = decodeStreamTime(committed.metadata, tpKey(tp.topic, tp.partition));
      run.executor.setStreamTime(tp.partition, times, tp.topic);
      p.timesOf(tp.topic).restore(tp.partition, committed.offset, times);
    },
    forget: (tp) => {
      run.executor.forget(tp.partition, tp.topic);
      p.timesOf(tp.topic).forget(tp.partition);
      ticks?.forget(tp.topic, tp.partition);
      backoff.forget(tp);
    },
    metrics: o.metrics,
    health: o.health,
    log: p.log,
  };
}

/** The ticks of `idleCloseMs` (ticks.ts), or none when the option is off. */
export function idleTicksOf(p: TopologyParts, ticks: { produced: number }): IdleTicks | undefined {
  const { o, run } = p;
  if (o.idleCloseMs === undefined) return undefined;
  const app = o.topology.applicationId;
  return new IdleTicks({
    idleMs: o.idleCloseMs,
    instanceId: p.instanceId,
    log: p.log,
    plan: () => run.executor.plan,
    streamTime: (topic, partition) => run.executor.streamTime(partition, topic),
    active: () => p.table.active(),
    ticking: p.ticking,
    produce: (records) => p.pipeline.alone(records),
    produced: (n) => {
      ticks.produced += n;
      o.metrics?.topologyTicks(app, 'produced', n);
    },
  });
}

/** The topology processor's commit pipeline: the processor's (src/processor/commit-pipeline.ts) on its options. */
export function commitPipelineOf(
  o: ResolvedTopologyOptions,
  kafka: KafkaPort,
  log: Logger,
  tracing: Tracing,
  on: { fatal(err: Error): void; committed(b: QueuedBatch): Promise<void> },
): CommitPipeline {
  return new CommitPipeline({
    mode: o.mode,
    kafka,
    log,
    metrics: o.metrics,
    groupCommitRecords: o.groupCommitRecords,
    commitIntervalMs: o.commitIntervalMs,
    fatal: on.fatal,
    tracing,
    ...(o.crashHook ? { crash: o.crashHook } : {}),
    committed: on.committed,
  });
}
