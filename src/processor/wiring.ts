/**
 * Pieces the Processor class wires together, built here so its constructor only connects them: the
 * Kafka port of the options, the Redis step (through the outage guard, refreshing a Cluster's slots
 * after a redirect), the WAIT confirmation of a batch's writes, the watchdog, the snapshotter, and the
 * narrow contexts the batch stages and the rebalance callbacks run on, cut from the built stages.
 */
import type { Fence } from '../fence/index.js';
import { ConfluentKafka } from '../kafka/confluent.js';
import type { KafkaPort } from '../kafka/types.js';
import { adapterSettings } from '../runtime/kafka-options.js';
import type { Logger } from '../runtime/logger.js';
import { offsetResetReport } from '../runtime/offset-resets.js';
import type { BatchContext, Replication } from './batch.js';
import type { CommitPipeline } from './commit-pipeline.js';
import type { Counts } from './counts.js';
import type { InputPartitions } from './input-partitions.js';
import type { ResolvedOptions } from './options.js';
import { OwnerState } from './owner-state.js';
import type { OwnedPartition, PartitionTable } from './partition-table.js';
import { jsonDecode } from './plan.js';
import type { RebalanceContext } from './rebalance.js';
import type { RedisGuard } from './redis-guard.js';
import { connectionCloses, refreshAfterRedirect, waitReplicas } from './redis-setup.js';
import { snapshotClient } from './snapshot-options.js';
import { Snapshotter } from './snapshotter.js';
import type { Sweeper } from './sweeper.js';
import type { UserCall } from './user-call.js';
import { Watchdog, type WatchdogContext } from './watchdog.js';

/** The port given in the options, or the default adapter (transactional in exactly-once mode). */
export function kafkaPort(
  o: Pick<ResolvedOptions, 'kafka' | 'mode' | 'logger' | 'metrics'>,
  groupId: string,
  instanceId: string,
): KafkaPort {
  if ('port' in o.kafka) return o.kafka.port;
  return new ConfluentKafka({
    ...adapterSettings(o.kafka.settings, {
      clientId: `redfence-${instanceId}`,
      ...(o.mode === 'exactly-once' ? { transactionalId: `${groupId}-${instanceId}` } : {}),
    }),
    groupId,
    offsetResets: offsetResetReport(o.logger, o.metrics),
  });
}

export type RedisStep = <R>(what: string, fn: () => Promise<R>) => Promise<R>;

/** A Redis call through the outage guard; a Cluster redirect refreshes the slot map before the retry. */
export function redisStepOf(guard: RedisGuard, redis: ResolvedOptions['redis']): RedisStep {
  return (what, fn) =>
    guard.step(what, async () => {
      try {
        return await fn();
      } catch (err) {
        refreshAfterRedirect(redis, err);
        throw err;
      }
    });
}

/**
 * With `waitReplicas`, a batch's writes are confirmed by WAIT, and made again when a Redis connection
 * closed since them (its writes may be lost with it); without, every write is confirmed at once.
 */
export function replicationOf(
  o: Pick<ResolvedOptions, 'waitReplicas' | 'redis'>,
  redisStep: RedisStep,
  log: Logger,
): Replication {
  const wait = o.waitReplicas;
  const closes = wait ? connectionCloses(o.redis) : () => 0;
  return {
    mark: closes,
    confirm: async (mark) => {
      if (!wait) return true;
      await redisStep('WAIT', () => waitReplicas(o.redis, wait));
      if (closes() === mark) return true;
      log.warn({}, 'WAIT: a Redis connection closed since the writes it was to confirm: making them again');
      return false;
    },
  };
}

export function watchdogOf(o: Pick<ResolvedOptions, 'watchdog'>, ctx: WatchdogContext): Watchdog | undefined {
  return o.watchdog && new Watchdog(ctx, o.watchdog);
}

/** The watchdog's reads of a port: high watermarks, and log starts and positions when the port reads them. */
export function watermarkReads(
  kafka: KafkaPort,
): Pick<WatchdogContext, 'highWatermarks' | 'logStarts' | 'positions'> {
  const low = kafka.lowWatermarks?.bind(kafka);
  const positions = kafka.positions?.bind(kafka);
  return {
    highWatermarks: (topic) => kafka.highWatermarks(topic),
    ...(low ? { logStarts: (topic: string) => low(topic) } : {}),
    ...(positions ? { positions: (tps: Parameters<typeof positions>[0]) => positions(tps) } : {}),
  };
}

/** The snapshotter of the `snapshot` option (needs connection settings, not a port). */
export function snapshotterOf(
  o: ResolvedOptions,
  fence: Fence,
  instanceId: string,
  partitions: () => readonly OwnedPartition[],
  outage: () => boolean,
  log: Logger,
): Snapshotter | undefined {
  if (!o.snapshot || !('settings' in o.kafka)) return undefined;
  return new Snapshotter({
    options: o.snapshot,
    redis: o.redis,
    keys: fence.keys,
    input: o.definition.input,
    client: snapshotClient(o.kafka.settings, `redfence-${instanceId}`),
    replicationFactor: o.replicationFactor,
    partitions,
    outage,
    log,
  });
}

/** The stages a processor has built, from which its batch and rebalance contexts are cut. */
export interface Stages {
  readonly o: ResolvedOptions;
  readonly groupId: string;
  readonly kafka: KafkaPort;
  readonly fence: Fence;
  readonly table: PartitionTable;
  readonly counts: Counts;
  readonly input: InputPartitions;
  readonly redisStep: RedisStep;
  readonly outage: () => boolean;
  readonly replication: Replication;
  readonly pipeline: CommitPipeline;
  readonly sweeper: Sweeper;
  readonly watchdog: Watchdog | undefined;
  readonly callUser: UserCall;
  readonly signal: AbortSignal;
  readonly log: Logger;
}

/** What a batch flows through: plan, apply, emit, the commit pipeline. */
export function batchContextOf(s: Stages, accepting: () => boolean): BatchContext {
  const { o, kafka, counts, log } = s;
  const { metrics } = o;
  return {
    table: s.table,
    accepting,
    plan: {
      decode: o.definition.decode ?? jsonDecode,
      get partitionCount() {
        return s.input.count;
      },
      get partitionCounts() {
        return s.input.counts;
      },
      callUser: s.callUser,
    },
    apply: {
      definition: o.definition,
      fence: s.fence,
      redisStep: s.redisStep,
      callUser: s.callUser,
      signal: s.signal,
      // a reducer's keys: owner-local state (operations never read)
      ...(o.ownerCache === undefined || o.definition.operation !== undefined
        ? {}
        : { owner: new OwnerState(o.ownerCache.maxBytes) }),
    },
    emit: {
      outputTopic: o.definition.output,
      deadLetterTopic: o.deadLetterTopic,
      groupId: s.groupId,
      metrics,
      counts,
      log,
    },
    pipeline: s.pipeline,
    replication: s.replication,
    kafka,
    metrics,
    counts,
    log,
    ...(o.crashHook ? { crash: o.crashHook } : {}),
  };
}

/** What the assignment and revocation callbacks work with. */
export function rebalanceContextOf(s: Stages): RebalanceContext {
  return {
    kafka: s.kafka,
    fence: s.fence,
    table: s.table,
    redisStep: s.redisStep,
    redisOutage: s.outage,
    replication: s.replication,
    partitionCount: (atLeast) => s.input.read(atLeast),
    drain: () => s.pipeline.drain(),
    sweepAll: (entries, timeoutMs) => s.sweeper.sweepAll(entries, timeoutMs),
    assigned: () => s.watchdog?.assigned(),
    metrics: s.o.metrics,
    health: s.o.health,
    log: s.log,
  };
}
