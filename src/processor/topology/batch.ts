/**
 * One delivered batch of a topology's input (or of one of its repartition topics) through the processor's stages: intake (ownership, the
 * seek-back after a failed Kafka step, offset holes), the topology's batch executor on Redis (through
 * the Redis guard: an outage pauses and retries), FENCE handling (pause, never commit), the outputs (to
 * repartition topics too, placed by their key's murmur2) and dead letters as records to produce, then the commit pipeline with the partition's new stream time as
 * the commit's metadata. Order is the invariant: Redis write, then produce, then commit. The batch's
 * trace (a no-op unless `tracing` is on) spans it from intake, wraps each try of the key calls, gets the
 * topology's attributes and stamps its context on every record it produces (repartition records too).
 */
import { deadLetterRecord } from '../../dead-letter/record.js';
import { RedfenceError } from '../../errors/index.js';
import type { InRecord, KafkaPort, OutRecord } from '../../kafka/types.js';
import type { RedfenceMetrics } from '../../metrics/index.js';
import { misplacedMessage } from '../../partitioner/index.js';
import type { Logger } from '../../runtime/logger.js';
import { ATTR } from '../../telemetry/semconv.js';
import { type BatchTrace, NO_TRACING, type TraceAttributes } from '../../telemetry/tracing.js';
import type { ModelHeaders, ModelInput } from '../../topology/model.js';
import type { TopologyExecutor } from '../../topology/run/executor.js';
import type { TopologyBatchResult, TopologyDeadLetter } from '../../topology/run/types.js';
import { countTicks } from '../../topology/tick.js';
import { countHoles, type Replication } from '../batch.js';
import type { CommitPipeline, QueuedBatch } from '../commit-pipeline.js';
import type { Counts } from '../counts.js';
import type { CrashHook } from '../crash-points.js';
import type { PartitionTable } from '../partition-table.js';
import type { RedisStep } from '../wiring.js';
import type { NodeMetrics } from './node-metrics.js';
import { encodeStreamTime, type PartitionTimes } from './stream-time.js';

export interface TopologyBatchContext {
  readonly table: PartitionTable;
  /** False once closing: no new batch is taken (its next owner runs it). */
  accepting(): boolean;
  readonly executor: Pick<TopologyExecutor, 'runBatch' | 'setStreamTime' | 'plan'>;
  /** The stream times of a topic's owned partitions (the input's, or a repartition topic's). */
  times(topic: string): PartitionTimes;
  readonly redisStep: RedisStep;
  /** WAIT for replicas after the batch's key calls (src/processor/batch.ts' Replication). */
  readonly replication: Replication;
  readonly pipeline: Pick<CommitPipeline, 'enqueue'>;
  readonly kafka: Pick<KafkaPort, 'pause'>;
  readonly deadLetterTopic: string;
  readonly groupId: string;
  readonly counts: Counts;
  /** Records the aggregations dropped (null key or value, late with onLate('drop')). */
  dropped(n: number): void;
  readonly metrics: RedfenceMetrics | undefined;
  /** The per-node counts, added to the metrics when the batch commits. */
  readonly nodes: Pick<NodeMetrics, 'queued'>;
  readonly log: Logger;
  /** Fault tests' crash points (src/processor/crash-points.ts); none by default. */
  readonly crash?: CrashHook;
  /**
   * The topic's partition counts for the partition check (now, and every count recorded while the
   * application wrote state), read when unknown or below `atLeast`; null for a topic not checked.
   */
  partitionCounts(
    topic: string,
    atLeast: number,
  ): Promise<{ count: number; counts: readonly number[] } | null>;
}

export async function runTopologyBatch(
  ctx: TopologyBatchContext,
  topic: string,
  partition: number,
  records: readonly InRecord[],
  highWatermark: string,
  trace: BatchTrace = NO_TRACING.batch(),
): Promise<void> {
  const entry = ctx.table.get(topic, partition);
  if (!entry || entry.fenced || records.length === 0 || !ctx.accepting()) return;
  const first = Number(records[0]?.offset);
  if (entry.rewound !== undefined) {
    // fetched before the seek back took effect: dropped, delivered again from `rewound`
    if (first > entry.rewound) return;
    entry.rewound = undefined;
    // delivered again from `first`: the stream time there, not the one the dropped batches left
    ctx.executor.setStreamTime(partition, ctx.times(topic).at(partition, first), topic);
  }
  ctx.metrics?.batch(records.length);
  countHoles(ctx, entry, records);
  trace.begin(topic, partition, entry.epoch, records);
  const inputs = records.map(modelInput);
  // before the Redis step: a failed read fails the batch, delivered again
  const placed = await ctx.partitionCounts(topic, partition + 1);
  let result: TopologyBatchResult;
  try {
    // An outage pauses the owned partitions and retries: a batch run again is a replay (the key calls
    // answer REEMIT for what they applied, the index adds are idempotent). With waitReplicas, run again
    // until WAIT confirms it on the connection that carried it: after a failover the key calls answer
    // REEMIT for what survived and APPLY for what the promoted replica never had.
    for (;;) {
      const mark = ctx.replication.mark();
      result = await ctx.redisStep('topology batch', () =>
        trace.redis(() =>
          ctx.executor.runBatch({
            topic,
            partition,
            epoch: entry.epoch,
            committedOffset: entry.committed,
            records: inputs,
            ...(placed === null ? {} : { partitionCount: placed.count, partitionCounts: placed.counts }),
          }),
        ),
      );
      if (await ctx.replication.confirm(mark)) break;
      // from the batch's first record again: its stream time there (owner-local state dropped with it)
      ctx.executor.setStreamTime(partition, ctx.times(topic).at(partition, first), topic);
    }
  } catch (err) {
    if (!RedfenceError.is(err, 'RF_TOPOLOGY_FENCED')) throw err;
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
  // the batch's key calls answered (state, outputs and index written in Redis), nothing produced yet
  ctx.crash?.('after-redis-write');
  for (const [verdict, n] of Object.entries(result.verdicts))
    if (n > 0) {
      ctx.counts.verdict(verdict as keyof typeof result.verdicts, n);
      ctx.metrics?.verdict(topic, partition, verdict as keyof typeof result.verdicts, n);
    }
  if (result.dropped.length > 0) ctx.dropped(result.dropped.length);
  const { hits, misses } = result.ownerCache;
  if (hits + misses > 0) ctx.metrics?.ownerCache(ctx.executor.plan.built.applicationId, hits, misses);
  trace.annotate(() => batchAttributes(ctx, topic, result));
  const out = trace.stamp(outRecords(ctx, records, result));
  const next = entry.delivered;
  ctx.times(topic).remember(partition, next, result.streamTime);
  const queued: QueuedBatch = {
    entry,
    out,
    count: records.length,
    first,
    next,
    highWatermark,
    lastTimestamp: records.at(-1)?.timestamp,
    metadata: encodeStreamTime(result.streamTime),
    trace,
  };
  ctx.nodes.queued(queued, result, countTicks(inputs));
  await ctx.pipeline.enqueue(queued);
}

/**
 * The batch span's topology attributes: which application and sub-topology ran it, its dead letters and
 * drops, and the records in and out of each node the batch reached (parallel arrays: one attribute each
 * however many nodes, so no span limit on attribute count cuts them; names are the topology's, bounded).
 */
function batchAttributes(
  ctx: TopologyBatchContext,
  topic: string,
  result: TopologyBatchResult,
): TraceAttributes {
  const plan = ctx.executor.plan;
  const names: string[] = [];
  const ins: number[] = [];
  const outs: number[] = [];
  for (const [node, f] of result.nodes) {
    names.push(node);
    ins.push(f.in);
    outs.push(f.out);
  }
  return {
    [ATTR.applicationId]: plan.built.applicationId,
    [ATTR.subTopology]: plan.subs.get(topic)?.id ?? -1,
    [ATTR.deadLetters]: result.deadLetters.length,
    [ATTR.dropped]: result.dropped.length,
    [ATTR.nodeNames]: names,
    [ATTR.nodeIn]: ins,
    [ATTR.nodeOut]: outs,
  };
}

/** A consumed record as the executor takes it (offsets and timestamps as numbers; headers if any). */
function modelInput(r: InRecord): ModelInput {
  const m = {
    topic: r.topic,
    partition: r.partition,
    offset: Number(r.offset),
    key: r.key,
    value: r.value,
    timestamp: Number(r.timestamp),
  };
  const headers = inputHeaders(r.headers);
  return headers === undefined ? m : { ...m, headers };
}

/** A record's headers without the names that have no value, or undefined when none is left. */
function inputHeaders(h: InRecord['headers']): ModelHeaders | undefined {
  let out: Record<string, Buffer | string | (Buffer | string)[]> | undefined;
  for (const name in h) {
    const v = h[name];
    if (v === undefined) continue;
    out ??= {};
    out[name] = v;
  }
  return out;
}

/** Headers as the producer takes them (a repeated name: its values as bytes, in order). */
function outHeaders(h: ModelHeaders): NonNullable<OutRecord['headers']> {
  const out: Record<string, Buffer | Buffer[] | string> = {};
  for (const name in h) {
    const v = h[name] as ModelHeaders[string];
    out[name] =
      typeof v === 'string' || Buffer.isBuffer(v)
        ? v
        : v.map((x) => (typeof x === 'string' ? Buffer.from(x) : x));
  }
  return out;
}

/** The sink records (each to its topic, placed by key, with its timestamp), then the dead letters. */
function outRecords(
  ctx: TopologyBatchContext,
  records: readonly InRecord[],
  result: TopologyBatchResult,
): OutRecord[] {
  // each output carries the headers of the record that caused it (src/topology/model.ts, ModelOutput)
  const out: OutRecord[] = result.outputs.map((o) =>
    o.headers === undefined
      ? { topic: o.topic, key: o.key, value: o.value, timestamp: String(o.timestamp) }
      : {
          topic: o.topic,
          key: o.key,
          value: o.value,
          timestamp: String(o.timestamp),
          headers: outHeaders(o.headers),
        },
  );
  if (result.deadLetters.length === 0) return out;
  const byOffset = new Map(records.map((r) => [Number(r.offset), r]));
  for (const d of result.deadLetters) {
    const source = byOffset.get(d.source.offset);
    if (source === undefined) continue; // the executor dead-letters only the batch's own records
    ctx.metrics?.deadLetter(d.reason);
    const applied = (d.reason === 'processing-error' || d.reason === 'rejected') && d.stateApplied === true;
    out.push(
      deadLetterRecord(ctx.deadLetterTopic, ctx.groupId, source, d.reason, deadLetterError(d), applied),
    );
  }
  return out;
}

/** What a dead letter says about itself (node and store names, windows: never a value). */
function deadLetterError(d: TopologyDeadLetter): Error {
  if (d.reason === 'rejected') {
    const refused = `topology node ${d.node} (store ${d.store}) refused the record: ${d.message}`;
    if (d.stateApplied !== true) return new Error(refused);
    // one dead letter for both failures: what the downstream node threw is the cause
    const { downstream } = d;
    if (downstream === undefined)
      return new Error(`${refused}; its state changes on its other keys were made`);
    return new Error(
      `${refused}; and topology node ${downstream.node} threw downstream of ${downstream.downstreamOf}; the record's state changes on its other keys were made, its outputs from there were not`,
      { cause: downstream.error },
    );
  }
  // what it threw is the cause: its class and message go to the dead letter's headers, as Spring writes them
  if (d.reason === 'processing-error' && d.stateApplied === true)
    return new Error(
      `topology node ${d.node} threw downstream of ${d.downstreamOf}; the record's state changes were made, its outputs from there were not`,
      { cause: d.error },
    );
  if (d.reason === 'processing-error')
    return new Error(`topology node ${d.node} threw; the record's effects were not made`, { cause: d.error });
  // the processor's partition check, its words (src/processor/plan.ts)
  if (d.reason === 'wrong-partition')
    return new Error(misplacedMessage(d.expected, d.partitions, d.source.partition));
  const windows = d.windows.map((w) => `[${w.start},${w.end})`).join(' ');
  return new Error(`late for topology node ${d.node} (store ${d.store}): windows ${windows} had closed`);
}
