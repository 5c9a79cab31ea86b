/**
 * Rebalance: on assignment, INCR each partition's epoch (before any of its records is processed) and
 * read its committed offset; on revocation, let the Kafka steps of every applied batch finish, sweep
 * what this instance committed there, and forget the partitions. A lost assignment is never committed
 * and not swept (a newer owner has it).
 */
import type { Fence } from '../fence/index.js';
import { type CommittedOffset, type KafkaPort, type TopicPartition, tpKey } from '../kafka/types.js';
import type { HealthState, RedfenceMetrics } from '../metrics/index.js';
import type { Logger } from '../runtime/logger.js';
import type { Replication } from './batch.js';
import type { OwnedPartition, PartitionTable } from './partition-table.js';

/** Longest a revocation waits for the sweep of its partitions (the rebalance waits for it). */
const REVOKE_SWEEP_MS = 5000;

export interface RebalanceContext {
  readonly kafka: Pick<KafkaPort, 'committed' | 'committedWithMetadata' | 'resume'>;
  readonly fence: Pick<Fence, 'acquireEpoch'>;
  readonly table: PartitionTable;
  /** Runs a Redis call through the outage guard. */
  redisStep<T>(what: string, fn: () => Promise<T>): Promise<T>;
  redisOutage(): boolean;
  readonly replication: Replication;
  /**
   * The input's partition count, known before any batch is planned; read again when it is below
   * `atLeast` (an assigned partition the known count does not have: partitions were added).
   */
  partitionCount(atLeast?: number): Promise<number>;
  drain(): Promise<void>;
  sweepAll(entries: readonly OwnedPartition[], timeoutMs: number): Promise<void>;
  assigned(): void;
  /**
   * For state kept in the commit metadata (a topology's stream time): each assigned partition's
   * committed offset and metadata (read with `committedWithMetadata`), before any of its batches.
   */
  restore?(tp: TopicPartition, committed: CommittedOffset): void;
  /** Each revoked partition, once the Kafka steps of its applied batches have finished. */
  forget?(tp: TopicPartition): void;
  readonly metrics: RedfenceMetrics | undefined;
  readonly health: HealthState | undefined;
  readonly log: Logger;
}

export async function assign(ctx: RebalanceContext, tps: readonly TopicPartition[]): Promise<void> {
  ctx.metrics?.rebalance('assign');
  // Normally known already; a failure here fails start() (which awaits the same call), so it is not
  // raised in the rebalance callback.
  await ctx.partitionCount(Math.max(0, ...tps.map((tp) => tp.partition + 1))).catch(() => undefined);
  const committed = await committedOf(ctx, tps);
  // the epochs are raised again when WAIT cannot confirm them on the connection that raised them
  for (let done = false; !done; ) {
    const mark = ctx.replication.mark();
    for (const tp of tps) {
      const epoch = await ctx.redisStep('acquireEpoch', () => ctx.fence.acquireEpoch(tp.topic, tp.partition));
      // the port reports committed offsets by `topic/partition`: converted here, at its boundary
      const c = committed.get(tpKey(tp.topic, tp.partition)) ?? { offset: -1, metadata: '' };
      ctx.restore?.(tp, c);
      ctx.table.add(tp, epoch, c.offset);
      ctx.metrics?.owned(tp.topic, tp.partition);
    }
    done = tps.length === 0 || (await ctx.replication.confirm(mark));
  }
  // A partition this instance paused earlier (FENCE, outage) keeps its pause in the client across a
  // revoke and a new assignment: resume what we now own.
  if (tps.length > 0 && !ctx.redisOutage()) ctx.kafka.resume(tps);
  ctx.health?.setReady('group', true);
  ctx.assigned();
  ctx.log.info({ partitions: tps.map((t) => t.partition), topics: topicsOf(tps) }, 'partitions assigned');
}

export async function revoke(
  ctx: RebalanceContext,
  tps: readonly TopicPartition[],
  lost: boolean,
): Promise<void> {
  ctx.metrics?.rebalance(lost ? 'lost' : 'revoke');
  // The Kafka steps of every applied batch finish (or fail) before its partition goes.
  await ctx.drain();
  const entries: OwnedPartition[] = [];
  for (const tp of tps) {
    const entry = ctx.table.remove(tp);
    ctx.forget?.(tp);
    if (entry && !entry.fenced) entries.push(entry);
    ctx.metrics?.clearPartition(tp.topic, tp.partition);
  }
  if (!lost && entries.length > 0) await ctx.sweepAll(entries, REVOKE_SWEEP_MS);
  ctx.log.info(
    { partitions: tps.map((t) => t.partition), topics: topicsOf(tps), lost },
    'partitions revoked',
  );
}

/** The committed offsets (with their metadata when the context restores state from it), by tpKey. */
async function committedOf(
  ctx: RebalanceContext,
  tps: readonly TopicPartition[],
): Promise<Map<string, CommittedOffset>> {
  if (ctx.restore !== undefined && ctx.kafka.committedWithMetadata !== undefined)
    return ctx.kafka.committedWithMetadata(tps);
  const offsets = await ctx.kafka.committed(tps);
  return new Map([...offsets].map(([k, offset]) => [k, { offset, metadata: '' }]));
}

/** The topics of a rebalance's partitions, each once, in the order given (`partitions` holds their numbers). */
function topicsOf(tps: readonly TopicPartition[]): string[] {
  return [...new Set(tps.map((t) => t.topic))];
}
