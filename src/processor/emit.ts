/**
 * Emit: a batch's outputs and dead letters, in offset order. APPLY, REBASE and REEMIT give an output
 * (keyed by the input key, with its timestamp); REJECT and a re-emitted rejection give a dead letter, as
 * do records the plan refused and records whose user function threw. Dead letters follow Spring Kafka's
 * format and are capped in size (src/dead-letter/record.ts).
 */

import type { DeadLetterReason } from '../dead-letter/build.js';
import { deadLetterRecord } from '../dead-letter/record.js';
import type { RecordResult } from '../fence/index.js';
import type { InRecord, OutRecord } from '../kafka/types.js';
import type { RedfenceMetrics } from '../metrics/index.js';
import type { Logger } from '../runtime/logger.js';
import type { Applied } from './apply.js';
import type { Counts } from './counts.js';
import type { Planned } from './plan.js';

export interface EmitContext {
  readonly outputTopic: string;
  readonly deadLetterTopic: string;
  readonly groupId: string;
  readonly metrics: RedfenceMetrics | undefined;
  readonly counts: Counts;
  readonly log: Logger;
}

/** The records a batch produces, in offset order; counts every verdict on the way. */
export function emit(
  ctx: EmitContext,
  topic: string,
  partition: number,
  planned: readonly Planned[],
  applied: Applied & { results: Map<number, RecordResult> },
): OutRecord[] {
  const { results, outputs, deadFromUser } = applied;
  const out: OutRecord[] = [];
  // the metric is counted once per verdict kind per batch, not per record
  const tally = new Map<string, number>();
  for (const p of planned) {
    const dead = p.dead ?? deadFromUser.get(p.meta.offset);
    if (dead) {
      out.push(deadLetter(ctx, p.record, dead.reason, dead.error));
      continue;
    }
    const r = results.get(p.meta.offset);
    if (r === undefined) continue;
    ctx.counts.verdict(r.verdict);
    tally.set(r.verdict, (tally.get(r.verdict) ?? 0) + 1);
    if (r.verdict === 'REBASE')
      ctx.log.warn(
        { topic, partition, previousPartition: r.previousPartition },
        'REBASE: a key moved partitions',
      );
    if (r.verdict === 'REJECT') out.push(deadLetter(ctx, p.record, 'rejected', new Error(r.reason)));
    else if (r.verdict === 'REEMIT' && 'deadLetter' in r)
      out.push(deadLetter(ctx, p.record, 'rejected', new Error(r.deadLetter)));
    else if (r.verdict === 'APPLY' || r.verdict === 'REBASE' || r.verdict === 'REEMIT') {
      const value = r.verdict === 'REEMIT' ? r.output.value : (r.output?.value ?? outputs.get(p.meta.offset));
      if (value !== undefined) out.push(output(ctx, p.record, value));
    }
  }
  if (ctx.metrics) for (const [verdict, n] of tally) ctx.metrics.verdict(topic, partition, verdict, n);
  return out;
}

/** An output keeps its input record's key and timestamp (event time, as Kafka Streams does). */
function output(ctx: EmitContext, record: InRecord, value: Buffer | string | null): OutRecord {
  const ts = record.timestamp;
  return {
    topic: ctx.outputTopic,
    key: record.key,
    value,
    ...(ts !== undefined && ts !== '' && Number(ts) >= 0 ? { timestamp: ts } : {}),
  };
}

function deadLetter(ctx: EmitContext, record: InRecord, reason: DeadLetterReason, error: unknown): OutRecord {
  ctx.metrics?.deadLetter(reason);
  return deadLetterRecord(ctx.deadLetterTopic, ctx.groupId, record, reason, error);
}
