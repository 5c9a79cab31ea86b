/**
 * One delivered batch through the stages: intake (ownership, seek-back, offset holes), plan, apply
 * (the Redis write), FENCE handling, WAIT for replicas, emit, then the commit pipeline. Order is the
 * invariant: Redis write, then produce, then commit; the pipeline runs the Kafka half while the next
 * batches come through here.
 */
import type { BatchResults } from '../fence/index.js';
import type { InRecord, KafkaPort } from '../kafka/types.js';
import type { RedfenceMetrics } from '../metrics/index.js';
import type { Logger } from '../runtime/logger.js';
import { type BatchTrace, NO_TRACING } from '../telemetry/tracing.js';
import { type ApplyContext, applyAll } from './apply.js';
import type { CommitPipeline } from './commit-pipeline.js';
import type { Counts } from './counts.js';
import type { CrashHook } from './crash-points.js';
import { type EmitContext, emit } from './emit.js';
import type { OwnedPartition, PartitionTable } from './partition-table.js';
import { type PlanContext, plan } from './plan.js';

export interface BatchContext {
  readonly table: PartitionTable;
  /** False once the processor is closing: no new batch is taken (never queued, so never committed). */
  accepting(): boolean;
  readonly plan: PlanContext;
  readonly apply: ApplyContext;
  readonly emit: EmitContext;
  readonly pipeline: Pick<CommitPipeline, 'enqueue'>;
  readonly replication: Replication;
  readonly kafka: Pick<KafkaPort, 'pause'>;
  readonly metrics: RedfenceMetrics | undefined;
  readonly counts: Counts;
  readonly log: Logger;
  /** Fault tests' crash points (src/processor/crash-points.ts); none by default. */
  readonly crash?: CrashHook;
}

/**
 * WAIT for replicas after Redis writes: `mark()` before the writes, `confirm(mark)` after them (through
 * the Redis guard, which pauses and retries a WAIT that falls short). False when a Redis connection
 * closed since the mark: the writes may be lost with a failed-over primary and must be made again.
 * Always true when no WAIT is asked for.
 */
export interface Replication {
  mark(): number;
  confirm(mark: number): Promise<boolean>;
}

export async function processBatch(
  ctx: BatchContext,
  topic: string,
  partition: number,
  records: readonly InRecord[],
  highWatermark: string,
  trace: BatchTrace = NO_TRACING.batch(),
): Promise<void> {
  const entry = ctx.table.get(topic, partition);
  if (!entry || entry.fenced || records.length === 0) return; // not ours (anymore): never commit it
  // Closing: take no new batch (the next owner replays it), or close() would go on draining as long as
  // the consumer has a backlog to deliver.
  if (!ctx.accepting()) return;
  const first = Number(records[0]?.offset);
  if (entry.rewound !== undefined) {
    // fetched before the seek back took effect: dropped, delivered again from `rewound`
    if (first > entry.rewound) return;
    entry.rewound = undefined;
  }
  ctx.metrics?.batch(records.length);
  countHoles(ctx, entry, records);
  trace.begin(topic, partition, entry.epoch, records);
  const planned = await plan(ctx.plan, topic, partition, records);

  // 1. Redis write: one fence call per key (state + pending outputs, atomically), made again until
  // WAIT confirms it on the connection that carried it: after a failover the fence answers REEMIT for
  // what survived and APPLY for what the promoted replica never had.
  let applied: Awaited<ReturnType<typeof applyAll>>;
  for (;;) {
    const mark = ctx.replication.mark();
    applied = await trace.redis(() => applyAll(ctx.apply, entry, planned));
    if (applied.results === 'FENCED' || (await ctx.replication.confirm(mark))) break;
  }
  const owned = ctx.apply.owner?.drain();
  if (owned !== undefined && owned.hits + owned.misses > 0)
    ctx.metrics?.ownerCache(ctx.apply.definition.store, owned.hits, owned.misses);
  if (applied.results === 'FENCED') {
    entry.fenced = true;
    trace.fenced();
    ctx.kafka.pause([{ topic, partition }]);
    ctx.counts.fenced();
    ctx.metrics?.fenced(topic, partition);
    ctx.log.warn(
      { topic, partition, epoch: entry.epoch },
      'FENCE: a newer owner holds this partition; dropped the batch, never committing it',
    );
    return;
  }
  ctx.crash?.('after-redis-write');

  // 2. Outputs and dead letters, in offset order.
  const out = trace.stamp(
    emit(ctx.emit, topic, partition, planned, applied as typeof applied & { results: BatchResults }),
  );

  // 3. Produce, then commit (or both in one transaction) in the next Kafka step: this batch's Redis
  // step above ran while the previous step was producing and committing.
  await ctx.pipeline.enqueue({
    entry,
    out,
    count: records.length,
    first,
    next: entry.delivered,
    highWatermark,
    lastTimestamp: records.at(-1)?.timestamp,
    trace,
  });
}

/**
 * Holes in the partition's offsets (transaction markers, compaction): counted, never an error. Sets the
 * partition's `delivered` (next offset after the batch). Shared with the topology batch.
 */
export function countHoles(
  ctx: Pick<BatchContext, 'metrics'>,
  entry: OwnedPartition,
  records: readonly InRecord[],
): void {
  let holes = 0;
  let prev = (entry.delivered >= 0 ? entry.delivered : entry.committed) - 1;
  for (const r of records) {
    const off = Number(r.offset);
    if (prev >= 0 && off > prev + 1) holes += off - prev - 1;
    prev = off;
  }
  if (holes > 0) ctx.metrics?.offsetGap(entry.topic, entry.partition, holes);
  entry.delivered = prev + 1;
}
